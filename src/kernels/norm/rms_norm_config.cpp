// The RMSNorm configurations' names and range checks, and the staged kernel's shared-memory
// arithmetic (host only: the default policy and the tests use them without CUDA).
#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <type_traits>
#include <variant>

#include "kernels/norm/rms_norm_cuda.h"
#include "kernels/norm/rms_norm_limits.h"
#include "tileops/core/error.h"

namespace tileops::cuda_kernels {
namespace {

using namespace rms;  // NOLINT(google-build-using-namespace): this family's own internals

std::string grid_name(RMSNormGrid grid) {
  switch (grid) {
    case RMSNormGrid::persistent:
      return "persistent";
    case RMSNormGrid::balanced:
      return "balanced";
    case RMSNormGrid::all:
      return "all";
  }
  return std::to_string(static_cast<int>(grid));
}

// The fields of the flag struct every configuration was named by before the per-family types;
// the later fields were printed only when they differed from their defaults, so the names of
// the tuning database's entries stay as they were.
struct FlagName {
  int threads = 0;
  int rows_per_block = 1;
  int vec_bytes = 16;
  int vecs_per_thread = 0;
  bool weight_in_registers = false;
  int blocks_per_sm = 0;
  RMSNormGrid grid = RMSNormGrid::persistent;
  int rows_in_flight = 1;
  int cluster_size = 1;
  int cache_hint = 0;
  int staged_rows = 0;
  int streaming_unroll = 0;
  bool reread = false;

  std::string str() const {
    std::string extra;
    if (grid != RMSNormGrid::persistent) extra += ",grid=" + grid_name(grid);
    if (rows_in_flight != 1) extra += ",rows_in_flight=" + std::to_string(rows_in_flight);
    if (cluster_size != 1) extra += ",cluster_size=" + std::to_string(cluster_size);
    if (cache_hint != 0) extra += ",cache_hint=" + std::to_string(cache_hint);
    if (staged_rows != 0) extra += ",staged_rows=" + std::to_string(staged_rows);
    if (streaming_unroll != 0) extra += ",streaming_unroll=" + std::to_string(streaming_unroll);
    if (reread) extra += ",reread=true";
    return "threads=" + std::to_string(threads) +
           ",rows_per_block=" + std::to_string(rows_per_block) +
           ",vec_bytes=" + std::to_string(vec_bytes) +
           ",vecs_per_thread=" + std::to_string(vecs_per_thread) +
           ",weight_in_registers=" + (weight_in_registers ? "true" : "false") +
           ",blocks_per_sm=" + std::to_string(blocks_per_sm) + extra;
  }
};

FlagName flag_name(const RMSNormResidentConfig& c) {
  return {.threads = c.threads,
          .rows_per_block = c.rows_per_block,
          .vecs_per_thread = c.vecs_per_thread,
          .weight_in_registers = c.weight_in_registers,
          .blocks_per_sm = c.blocks_per_sm,
          .grid = c.grid,
          .rows_in_flight = c.rows_in_flight,
          .cluster_size = c.cluster_size};
}
FlagName flag_name(const RMSNormStreamingConfig& c) {
  return {.threads = c.threads,
          .rows_per_block = c.rows_per_block,
          .vec_bytes = c.vec_bytes,
          .blocks_per_sm = c.blocks_per_sm,
          .grid = c.grid};
}
FlagName flag_name(const RMSNormHighOccupancyStreamingConfig& c) {
  return {.threads = c.threads,
          .rows_per_block = c.rows_per_block,
          .blocks_per_sm = c.blocks_per_sm,
          .grid = c.grid,
          .cache_hint = c.cache_hint,
          .streaming_unroll = c.vectors_in_flight};
}
FlagName flag_name(const RMSNormStagedConfig& c) {
  return {.threads = c.threads,
          .blocks_per_sm = c.blocks_per_sm,
          .grid = c.grid,
          .staged_rows = c.stages};
}
FlagName flag_name(const RMSNormRereadConfig& c) {
  return {.threads = c.threads,
          .vecs_per_thread = c.vecs_per_thread,
          .blocks_per_sm = c.blocks_per_sm,
          .grid = c.grid,
          .reread = true};
}

bool valid_grid(RMSNormGrid g) {
  return g == RMSNormGrid::persistent || g == RMSNormGrid::balanced || g == RMSNormGrid::all;
}

// The checks every kernel with row groups of threads_per_row threads shares.
std::string check_block(int threads, int rows_per_block, int max_threads) {
  if (threads < 32 || threads > 1024 || threads % 32 != 0)
    return "threads must be a multiple of 32 in [32, 1024]";
  if (rows_per_block < 1 || threads % rows_per_block != 0)
    return "rows_per_block must divide threads";
  const int tpr = threads / rows_per_block;
  if (!(tpr == 8 || tpr == 16 || tpr % 32 == 0))
    return "threads / rows_per_block must be 8, 16 or a multiple of 32";
  if (threads > max_threads)
    return "at most " + std::to_string(max_threads) + " threads with this kernel";
  return {};
}

std::string check(const RMSNormResidentConfig& c, DType dtype, int64_t cols) {
  const int es = static_cast<int>(element_size(dtype));
  const int nv = c.vecs_per_thread;
  if (!(nv == 1 || nv == 2 || nv == 4 || nv == 8)) return "vecs_per_thread must be 1, 2, 4 or 8";
  if (c.rows_in_flight != 1 && c.rows_in_flight != 2) return "rows_in_flight must be 1 or 2";
  if (c.cluster_size != 1 && c.cluster_size != 2) return "cluster_size must be 1 or 2";
  if (c.pipelined() &&
      !pipelined_variant_exists(nv, c.weight_in_registers, c.rows_in_flight, c.cluster_size))
    return "no kernel variant for vecs_per_thread=" + std::to_string(nv) +
           ",weight_in_registers=" + (c.weight_in_registers ? "true" : "false") +
           ",rows_in_flight=" + std::to_string(c.rows_in_flight) +
           ",cluster_size=" + std::to_string(c.cluster_size);
  if (c.weight_in_registers && nv == 8)
    return "weight_in_registers needs vecs_per_thread 1, 2 or 4";
  // The pipelined kernels' bound is that of their fused instantiation (the tuning space serves
  // plain and fused launches alike).
  const int max_threads =
      c.pipelined() ? pipelined_max_threads(nv, true, c.weight_in_registers, c.rows_in_flight)
                    : resident_max_threads(nv, c.weight_in_registers);
  if (std::string why = check_block(c.threads, c.rows_per_block, max_threads); !why.empty())
    return why;
  if (!valid_grid(c.grid)) return "grid must be persistent, balanced or all";
  const int tpr = c.threads_per_row();
  if (c.cluster_size > 1 && tpr % 32 != 0)
    return "a row split over a cluster needs threads / rows_per_block a multiple of 32";
  if (c.blocks_per_sm < 0) return "blocks_per_sm must be >= 0";
  if (cols / (16 / es) > static_cast<int64_t>(tpr) * nv * c.cluster_size)
    return "the row does not fit " + std::to_string(c.cluster_size) + " x " + std::to_string(tpr) +
           " threads x " + std::to_string(nv) + " vectors";
  return {};
}

std::string check(const RMSNormStreamingConfig& c, DType dtype, int64_t /*cols*/) {
  const int es = static_cast<int>(element_size(dtype));
  if (c.vec_bytes != 16 && c.vec_bytes != es) return "vec_bytes must be 16 or the element size";
  if (std::string why = check_block(c.threads, c.rows_per_block, kStreamingMaxThreads);
      !why.empty())
    return why;
  if (!valid_grid(c.grid)) return "grid must be persistent, balanced or all";
  if (c.blocks_per_sm < 0) return "blocks_per_sm must be >= 0";
  return {};
}

std::string check(const RMSNormHighOccupancyStreamingConfig& c, DType /*dtype*/, int64_t /*cols*/) {
  if (c.vectors_in_flight != 1 && c.vectors_in_flight != 2)
    return "vectors_in_flight must be 1 or 2";
  if (c.cache_hint < 0 || c.cache_hint > 3) return "cache_hint must be 0, 1, 2 or 3";
  if (std::string why = check_block(c.threads, c.rows_per_block, kStreamingMaxThreads);
      !why.empty())
    return why;
  if (!valid_grid(c.grid)) return "grid must be persistent, balanced or all";
  if (c.blocks_per_sm < 0) return "blocks_per_sm must be >= 0";
  return {};
}

// The shared-memory fit of a fused launch, the pointers and the device are checked at launch.
std::string check(const RMSNormStagedConfig& c, DType dtype, int64_t cols) {
  const int64_t es = static_cast<int64_t>(element_size(dtype));
  if (c.stages < 2) return "the staged kernel needs at least 2 stages";
  if (c.threads < 32 || c.threads > 1024 || c.threads % 32 != 0)
    return "threads must be a multiple of 32 in [32, 1024]";
  if (c.grid != RMSNormGrid::persistent && c.grid != RMSNormGrid::balanced)
    return "the staged kernel takes grid persistent or balanced (a block per row stages nothing)";
  if (c.blocks_per_sm < 0) return "blocks_per_sm must be >= 0";
  if (cols * es % 16 != 0)
    return "the staged kernel needs rows of a multiple of 16 bytes, not " +
           std::to_string(cols * es);
  if (const int64_t need = staged_smem_bytes(cols * es, c.stages, false); need > kSm90SmemPerBlock)
    return "the weight and " + std::to_string(c.stages) + " stages of " +
           std::to_string(cols * es) + " bytes need " + std::to_string(need) +
           " bytes of shared memory, a block has at most " + std::to_string(kSm90SmemPerBlock);
  return {};
}

std::string check(const RMSNormRereadConfig& c, DType dtype, int64_t cols) {
  const int64_t es = static_cast<int64_t>(element_size(dtype));
  const int nv = c.vecs_per_thread;
  if (!(nv == 1 || nv == 2 || nv == 4) ||
      !(c.threads == 256 || c.threads == 512 || c.threads == 1024))
    return "reread takes vecs_per_thread 1, 2 or 4 and threads 256, 512 or 1024";
  if (!valid_grid(c.grid)) return "grid must be persistent, balanced or all";
  if (c.blocks_per_sm < 0) return "blocks_per_sm must be >= 0";
  if (cols != static_cast<int64_t>(c.threads) * nv * (16 / es))
    return "reread needs rows of exactly threads x vecs_per_thread 16-byte vectors (" +
           std::to_string(static_cast<int64_t>(c.threads) * nv * (16 / es)) + " elements)";
  return {};
}

bool aligned_to(const void* p, int64_t align) {
  return reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(align) == 0;
}

}  // namespace

std::string RMSNormConfig::str() const {
  return std::visit([](const auto& c) { return flag_name(c).str(); }, kernel);
}

std::string rms_norm_config_refusal(const RMSNormConfig& config, DType dtype, int64_t cols) {
  return std::visit([&](const auto& c) { return check(c, dtype, cols); }, config.kernel);
}

std::string rms_norm_staged_refusal(const RMSNormArgs& a, const RMSNormConfig& config) {
  const RMSNormStagedConfig* const staged = config.as<RMSNormStagedConfig>();
  if (staged == nullptr) return {};
  const bool fused = a.residual != nullptr;
  const int64_t es = static_cast<int64_t>(element_size(a.dtype));
  const int64_t row_bytes = a.cols * es;
  if (!aligned_to(a.x, 16) || !aligned_to(a.y, 16) || !aligned_to(a.weight, 16) ||
      (fused && !aligned_to(a.residual, 16)))
    return "the staged kernel needs x, residual, weight and y 16-byte aligned";
  const int64_t vec = 16 / es;
  if (a.rows > 1 && (a.x_row_stride % vec != 0 || a.y_row_stride % vec != 0 ||
                     (fused && a.residual_row_stride % vec != 0)))
    return "the staged kernel needs row strides of a multiple of 16 bytes";
  const int64_t smem = staged_smem_bytes(row_bytes, staged->stages, fused);
  if (smem > kSm90SmemPerBlock)
    return "the weight and " + std::to_string(staged->stages) + " stages of " +
           std::to_string(row_bytes * (fused ? 2 : 1)) + " bytes need " + std::to_string(smem) +
           " bytes of shared memory, a block has at most " + std::to_string(kSm90SmemPerBlock);
  return {};
}

int rms_norm_staged_max_rows(int64_t cols, DType dtype, bool fused, int blocks_per_sm) {
  if (dtype != DType::float32 && dtype != DType::float16 && dtype != DType::bfloat16)
    throw SignatureError("rms_norm (CUDA): dtype must be float32, float16 or bfloat16, got " +
                         std::string(dtype_name(dtype)));
  const int64_t row_bytes = cols * static_cast<int64_t>(element_size(dtype));
  if (cols <= 0 || cols > INT_MAX / 2 || row_bytes % 16 != 0 || blocks_per_sm < 1) return 0;
  const int64_t budget =
      std::min(kSm90SmemPerBlock, kSm90SmemPerSm / blocks_per_sm - kSmemReservedPerBlock);
  // At most 64 stages: far more bytes in flight than the latency needs for any row that long.
  int stages = 1;
  while (stages < 64 && staged_smem_bytes(row_bytes, stages + 1, fused) <= budget) ++stages;
  return stages >= 2 ? stages : 0;
}

}  // namespace tileops::cuda_kernels
