// The FP8 block-scaled grouped GEMM on Hopper, host side (grouped_gemm_fp8_cuda.h): the argument
// checks and refusals, the instantiated configurations, the default and the launch (tensor maps,
// persistent grid). The kernel: grouped_gemm_fp8_kernel.cuh.
#include "kernels/moe/grouped_gemm_fp8_cuda.h"

#include "kernels/common/tma_map.h"
#include "kernels/moe/grouped_gemm_fp8_kernel.cuh"

#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <string>
#include <vector>

#include "tileops/core/cuda.h"
#include "tileops/core/error.h"

namespace tileops::cuda_kernels {
namespace {

using moe_detail::FP8GemmParams;
using moe_detail::FP8Shape;

using Launcher = void (*)(const FP8GemmParams&, const GroupedGemmFP8Args&, int blocks_per_sm,
                          int sms, long long max_tiles, cudaStream_t);

template <int BM, int BN, int STAGES>
void run(const FP8GemmParams& p, const GroupedGemmFP8Args& a, int blocks_per_sm, int sms,
         long long max_tiles, cudaStream_t stream) {
  using S = FP8Shape<BM, BN, STAGES>;
  const auto kernel = moe_detail::grouped_gemm_fp8_kernel<BM, BN, STAGES>;
  const void* fn = reinterpret_cast<const void*>(kernel);
  moe_detail::allow_smem(fn, S::kSmem);
  const CUtensorMap map_a =
      hopper::make_tma_map_2d(a.a, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, a.M, a.K, 128, BM);
  const CUtensorMap map_b =
      hopper::make_tma_map_2d(a.b, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, a.E * a.N, a.K, 128, 64);
  // c as [M, n_out] in boxes of 64 x 64 (unused when the stores go from registers).
  const CUtensorMap map_c =
      p.tma_store != 0
          ? hopper::make_tma_map_2d(a.c, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, a.M, p.n_out, 64, 64)
          : map_a;
  const long long grid =
      moe_detail::persistent_grid(fn, S::kThreads, S::kSmem, blocks_per_sm, sms, max_tiles);
  kernel<<<static_cast<unsigned>(grid), S::kThreads, S::kSmem, stream>>>(map_a, map_b, map_c, p);
}

struct Entry {
  int bm, bn, stages;
  Launcher launch;
};

template <int BM, int BN, int STAGES>
constexpr Entry entry() {
  return Entry{BM, BN, STAGES, run<BM, BN, STAGES>};
}

// Two consumer warpgroups of 64 x 128 (over M, or over N for 64-row tiles; two waves of them
// over 256 rows), or one. Stage sizes count the stage's scales.
const Entry kEntries[] = {
    entry<128, 128, 6>(),  // 32.5 KB stages, one store buffer per warpgroup: 212 KB in all
    entry<128, 128, 4>(),  // 163 KB
    entry<64, 256, 4>(),   // 40.3 KB stages, 194 KB
    entry<64, 128, 8>(),   // one consumer warpgroup, 24.3 KB stages, 211 KB
    entry<64, 64, 12>(),   // narrow, no activation: 16.3 KB stages, 212 KB
    entry<256, 128, 3>(),  // 49 KB stages, 180 KB
};
constexpr int kSquareEntry = 0;    // 128 x 128, 6 stages
constexpr int kWideRowsEntry = 2;  // 64 x 256
constexpr int kNarrowEntry = 4;    // 64 x 64
constexpr int kTallEntry = 5;      // 256 x 128

GroupedGemmFP8CudaConfig to_config(const Entry& e) {
  GroupedGemmFP8CudaConfig c;
  c.block_m = e.bm;
  c.block_n = e.bn;
  c.stages = e.stages;
  return c;
}

const Entry* find_entry(const GroupedGemmFP8CudaConfig& config) {
  for (const Entry& e : kEntries) {
    if (e.bm == config.block_m && e.bn == config.block_n && e.stages == config.stages) return &e;
  }
  return nullptr;
}

bool aligned_to(const void* p, uintptr_t align) {
  return reinterpret_cast<uintptr_t>(p) % align == 0;
}

int64_t rows_per_expert(const GroupedGemmFP8Args& a) {
  return a.M / std::max<int64_t>(a.E, 1);
}

bool has_activation(const GroupedGemmFP8Args& a) {
  return a.activation != MoEActivation::none;
}

// The SMs of the current device (132 on an H100 / H200 SXM where none can be asked).
int sm_count() {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    static_cast<void>(cudaGetLastError());  // clear it: no device is not an error here
    return 132;
  }
  return cuda_device_properties(device).sm_count;
}

// The fraction of the SMs' waves that `tiles` equal tiles fill.
double wave_fill(int64_t tiles, int sms) {
  const int64_t waves = (tiles + sms - 1) / sms;
  return waves == 0 ? 1.0 : static_cast<double>(tiles) / static_cast<double>(waves * sms);
}

}  // namespace

std::string GroupedGemmFP8CudaConfig::str() const {
  return "block=" + std::to_string(block_m) + "x" + std::to_string(block_n) +
         "x128,stages=" + std::to_string(stages) +
         ",blocks_per_sm=" + std::to_string(blocks_per_sm);
}

std::optional<std::string> grouped_gemm_fp8_refusal(const GroupedGemmFP8Args& a) {
  if (a.block_k != 128 || a.block_n != 128) {
    return "the CUDA kernel takes 128 x 128 weight blocks and 1 x 128 activation groups "
           "(DeepSeek-V3's); block_n = " +
           std::to_string(a.block_n) + ", block_k = " + std::to_string(a.block_k) +
           " run on the CPU";
  }
  if (a.activation != MoEActivation::none && (a.N / 2) % 64 != 0) {
    return "with a gated activation the CUDA kernel needs N / 2 to be a multiple of 64 (each "
           "64-column half within one weight block); N = " +
           std::to_string(a.N) + " runs on the CPU";
  }
  if (a.M > INT_MAX || a.E * std::max<int64_t>(a.N, 1) > INT_MAX || a.K > INT_MAX ||
      a.E > INT_MAX - 1) {
    return "a size is past the CUDA kernel's 32-bit row indices (M " + std::to_string(a.M) +
           ", E x N " + std::to_string(a.E * a.N) + ")";
  }
  return std::nullopt;
}

// Up to 64 rows per expert, and the masked layout (whose counts the host does not know; decode
// fills a fraction of max_m), tiles of 64 rows whose two warpgroups split 256 B rows: a 128-row
// tile would leave one warpgroup idle. More rows: 128 x 128 with 6 stages, or from 256 rows per
// expert 256 x 128 (two waves per warpgroup, a quarter less L2 traffic per product) unless its
// fewer tiles fill the SMs' last wave worse (docs/perf/2026-12-05-fp8-gemm-tall-tiles.md). The
// 64-row and 128 x 128 tiles are bound by the weights' bytes on the DeepSeek-V3 grouped shapes
// (docs/perf/2026-12-02-h200-fp8-grouped-gemm.md). When 64 x 256 tiles would not give every SM
// one (a dense GEMM of a decode batch: 64 rows x 2112 columns are 9 tiles), 64 x 64 tiles spread
// the weights' bytes over 4x the blocks.
GroupedGemmFP8CudaConfig grouped_gemm_fp8_default_config(const GroupedGemmFP8Args& a) {
  const int64_t rows = rows_per_expert(a);
  if (a.max_m == 0 && rows > 64) {
    const int64_t n_tiles =
        (has_activation(a) ? a.N / 2 + 63 : a.N + 127) / (has_activation(a) ? 64 : 128);
    const int sms = sm_count();
    const double tall = wave_fill(a.E * ((rows + 255) / 256) * n_tiles, sms);
    const double square = wave_fill(a.E * ((rows + 127) / 128) * n_tiles, sms);
    return to_config(kEntries[rows >= 256 && tall >= 0.9 * square ? kTallEntry : kSquareEntry]);
  }
  const int64_t row_tiles = a.max_m > 0 ? a.E * ((a.max_m + 63) / 64) : (a.M + 63) / 64;
  const int64_t wide_tiles = row_tiles * ((a.N + 255) / 256);
  const bool narrow = !has_activation(a) && wide_tiles < sm_count();
  return to_config(kEntries[narrow ? kNarrowEntry : kWideRowsEntry]);
}

std::vector<GroupedGemmFP8CudaConfig> grouped_gemm_fp8_tuning_space(const GroupedGemmFP8Args& a) {
  std::vector<GroupedGemmFP8CudaConfig> out{grouped_gemm_fp8_default_config(a)};
  for (const Entry& e : kEntries) {
    const GroupedGemmFP8CudaConfig c = to_config(e);
    if (e.bn < 128 && has_activation(a)) continue;  // the narrow tiles have no activation epilogue
    if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  }
  return out;
}

void launch_grouped_gemm_fp8(const GroupedGemmFP8Args& a, const GroupedGemmFP8CudaConfig& config,
                             void* stream) {
  const std::string what = "grouped_gemm_fp8 (CUDA): ";
  if (a.M < 0 || a.N < 0 || a.K < 0 || a.E < 0 || a.max_m < 0)
    throw SignatureError(what + "negative size");
  if (const auto why = grouped_gemm_fp8_refusal(a)) throw SignatureError(what + *why);
  if (a.K % 128 != 0)
    throw SignatureError(what + "K = " + std::to_string(a.K) + " is not a multiple of 128");
  if (a.max_m > 0 && a.M != a.E * a.max_m)
    throw SignatureError(what + "the masked layout needs M = E x max_m");
  const bool gated = a.activation != MoEActivation::none;
  if (gated && a.N % 2 != 0) throw SignatureError(what + "a gated activation needs an even N");
  const Entry* entry = find_entry(config);
  if (entry == nullptr || config.blocks_per_sm < 0)
    throw SignatureError(what + "no kernel for config {" + config.str() + "}");
  if (gated && entry->bn < 128)
    throw SignatureError(what + "config {" + config.str() +
                         "} has no activation epilogue: a gated activation needs block_n >= 128");
  const int64_t n_out = gated ? a.N / 2 : a.N;
  if (a.M == 0 || n_out == 0) return;
  if (a.c == nullptr || a.offsets == nullptr)
    throw SignatureError(what + "c and the offsets (counts) must not be null");
  const auto st = static_cast<cudaStream_t>(stream);
  if (a.K == 0 || a.E == 0) {
    // Every element is an empty sum (or no expert covers a row): zeros.
    if (const cudaError_t err = cudaMemsetAsync(a.c, 0, static_cast<size_t>(a.M * n_out) * 2, st);
        err != cudaSuccess)
      moe_detail::throw_cuda(err, "cudaMemsetAsync");
    return;
  }
  if (a.a == nullptr || a.b == nullptr || a.a_scales == nullptr || a.b_scales == nullptr)
    throw SignatureError(what + "a, b and their scales must not be null");
  if (!aligned_to(a.a, 16) || !aligned_to(a.b, 16) || !aligned_to(a.a_scales, 4) ||
      !aligned_to(a.b_scales, 4) || !aligned_to(a.c, 2) || !aligned_to(a.offsets, 4))
    throw SignatureError(what + "a and b must be 16-byte aligned, the others to their element");
  int device = 0;
  if (const cudaError_t err = cudaGetDevice(&device); err != cudaSuccess)
    moe_detail::throw_cuda(err, "cudaGetDevice");
  const CudaDeviceProperties& props = cuda_device_properties(device);
  if (props.major != 9) throw SignatureError(what + "needs a Hopper GPU (compute capability 9.0)");

  FP8GemmParams p;
  p.a_scales = a.a_scales;
  p.b_scales = a.b_scales;
  const long long max_tiles =
      moe_detail::set_problem(p, a, a.offsets, config.block_m, config.block_n, "grouped_gemm_fp8");
  p.max_m = static_cast<int>(a.max_m);
  p.kblocks = static_cast<int>(a.K / 128);
  p.nblocks = static_cast<int>((a.N + 127) / 128);
  p.tma_store = aligned_to(a.c, 16) && n_out % 8 == 0 ? 1 : 0;
  entry->launch(p, a, config.blocks_per_sm, props.sm_count, max_tiles, st);
  if (const cudaError_t err = cudaGetLastError(); err != cudaSuccess)
    moe_detail::throw_cuda(err, "kernel launch");
}

}  // namespace tileops::cuda_kernels
