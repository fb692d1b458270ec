// The launch of every RMSNorm kernel (rms_norm_cuda.h): the common checks of the arguments, the
// kernel of the configuration's family (or the scalar streaming kernel for unaligned arguments),
// and the grid. The kernels are in the rms_norm_<family>_cuda.cu files.
#include <algorithm>
#include <climits>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <variant>

#include "kernels/common/cluster_launch.h"
#include "kernels/norm/rms_norm_kernels.cuh"
#include "tileops/core/cuda.h"
#include "tileops/core/error.h"

namespace tileops::cuda_kernels {
namespace rms {

[[noreturn]] void throw_cuda(cudaError_t err, const char* what) {
  throw UsageError(std::string("rms_norm (CUDA): ") + what + ": " + cudaGetErrorName(err) + ": " +
                   cudaGetErrorString(err));
}

int sm_count(int device) {
  return cuda_device_properties(device).sm_count;
}

// The kernels' parameters for `a`, with tpr threads on each of rows_per_block rows of a block.
RMSNormParams make_params(const RMSNormArgs& a, int tpr, int rows_per_block) {
  return {a, tpr, rows_per_block, static_cast<float>(1.0 / static_cast<double>(a.cols))};
}

namespace {

int max_blocks_per_sm(KernelFn fn, int threads, int device) {
  static std::mutex mutex;
  static std::map<std::tuple<const void*, int, int>, int> cache;
  const auto key = std::make_tuple(reinterpret_cast<const void*>(fn), threads, device);
  {
    std::lock_guard<std::mutex> lock(mutex);
    const auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  int blocks = 0;
  const cudaError_t err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, fn, threads, 0);
  if (err != cudaSuccess) throw_cuda(err, "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  std::lock_guard<std::mutex> lock(mutex);
  cache[key] = blocks;
  return blocks;
}

bool aligned_to(const void* p, int64_t align) {
  return reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(align) == 0;
}

// What the grid of a launch reads of any configuration.
struct BlockShape {
  int threads;
  int rows_per_block;
  int blocks_per_sm;
  RMSNormGrid grid;
  int vec_bytes;
  int cluster_size;
};

BlockShape block_shape(const RMSNormConfig& config) {
  return std::visit(
      [](const auto& c) {
        using C = std::decay_t<decltype(c)>;
        BlockShape s{c.threads, 1, c.blocks_per_sm, c.grid, 16, 1};
        if constexpr (!std::is_same_v<C, RMSNormRereadConfig> &&
                      !std::is_same_v<C, RMSNormStagedConfig>)
          s.rows_per_block = c.rows_per_block;
        if constexpr (std::is_same_v<C, RMSNormStreamingConfig>) s.vec_bytes = c.vec_bytes;
        if constexpr (std::is_same_v<C, RMSNormResidentConfig>) s.cluster_size = c.cluster_size;
        return s;
      },
      config.kernel);
}

// The kernel of the configuration's family, on 16-byte vectors.
KernelFn vector_kernel(const RMSNormConfig& config, DType dtype, bool fused) {
  if (const auto* c = config.as<RMSNormResidentConfig>())
    return c->pipelined()
               ? resident_pipelined_kernel(dtype, fused, *c)
               : resident_kernel(dtype, fused, c->vecs_per_thread, c->weight_in_registers);
  if (config.as<RMSNormStreamingConfig>() != nullptr) return streaming_kernel(dtype, fused, true);
  if (const auto* c = config.as<RMSNormHighOccupancyStreamingConfig>())
    return high_occupancy_streaming_kernel(dtype, fused, c->vectors_in_flight, c->cache_hint);
  if (const auto* c = config.as<RMSNormRereadConfig>())
    return reread_kernel(dtype, fused, c->threads, c->vecs_per_thread);
  return nullptr;
}

}  // namespace
}  // namespace rms

using namespace rms;  // NOLINT(google-build-using-namespace): this family's own internals

RMSNormDevice rms_norm_device(int device) {
  const CudaDeviceProperties& props = cuda_device_properties(device);
  return {.major = props.major, .sm_count = props.sm_count};
}

RMSNormConfig rms_norm_default_config(int64_t rows, int64_t cols, DType dtype, bool fused,
                                      int device) {
  return rms_norm_default_config(rows, cols, dtype, fused, rms_norm_device(device));
}

RMSNormConfig rms_norm_fallback_config(int64_t rows, int64_t cols, DType dtype, bool fused,
                                       int device) {
  return rms_norm_fallback_config(rows, cols, dtype, fused, rms_norm_device(device));
}

std::vector<RMSNormConfig> rms_norm_tuning_space(int64_t rows, int64_t cols, DType dtype,
                                                 bool fused, int device) {
  return rms_norm_tuning_space(rows, cols, dtype, fused, rms_norm_device(device));
}

void launch_rms_norm(const RMSNormArgs& a, const RMSNormConfig& config, void* stream) {
  const DType dtype = a.dtype;
  if (dtype != DType::float32 && dtype != DType::float16 && dtype != DType::bfloat16)
    throw SignatureError("rms_norm (CUDA): dtype must be float32, float16 or bfloat16, got " +
                         std::string(dtype_name(dtype)));
  if (a.rows < 0 || a.cols < 0)
    throw SignatureError("rms_norm (CUDA): negative shape [" + std::to_string(a.rows) + ", " +
                         std::to_string(a.cols) + "]");
  if (a.cols > INT_MAX / 2)
    throw SignatureError("rms_norm (CUDA): cols too large: " + std::to_string(a.cols));
  if (const std::string why = rms_norm_config_refusal(config, dtype, a.cols); !why.empty())
    throw SignatureError("rms_norm (CUDA): config {" + config.str() +
                         "} cannot serve cols = " + std::to_string(a.cols) + ": " + why);
  if (const auto* reread = config.as<RMSNormRereadConfig>();
      reread != nullptr && reread->vecs_per_thread == 4 && a.residual != nullptr)
    throw SignatureError("rms_norm (CUDA): config {" + config.str() +
                         "}: reread with a residual takes vecs_per_thread 1 or 2 (4 vectors of x "
                         "and 4 of the residual do not fit 32 registers)");
  if (a.rows == 0 || a.cols == 0) return;
  const bool fused = a.residual != nullptr;
  if (a.x == nullptr || a.weight == nullptr || a.y == nullptr)
    throw SignatureError("rms_norm (CUDA): x, weight and y must not be null");
  if (a.rows > 1 && (a.x_row_stride < a.cols || a.y_row_stride < a.cols ||
                     (fused && a.residual_row_stride < a.cols)))
    throw SignatureError("rms_norm (CUDA): a row stride is smaller than cols");
  const auto es = static_cast<int64_t>(element_size(dtype));
  if (!aligned_to(a.x, es) || !aligned_to(a.y, es) || !aligned_to(a.weight, es) ||
      (fused && !aligned_to(a.residual, es)))
    throw SignatureError("rms_norm (CUDA): a pointer is not aligned to its element size");
  if (const auto* staged = config.as<RMSNormStagedConfig>()) {
    launch_staged(a, *staged, stream);
    return;
  }

  // 16-byte vectors only when every row of every tensor starts on a 16-byte boundary; otherwise
  // the scalar streaming kernel, with the same threads per row (at most 512).
  const BlockShape shape = block_shape(config);
  const int64_t vec = 16 / es;
  const bool strides_ok = a.rows == 1 || (a.x_row_stride % vec == 0 && a.y_row_stride % vec == 0 &&
                                          (!fused || a.residual_row_stride % vec == 0));
  const bool vector_path = shape.vec_bytes == 16 && strides_ok && aligned_to(a.x, 16) &&
                           aligned_to(a.y, 16) && aligned_to(a.weight, 16) &&
                           (!fused || aligned_to(a.residual, 16));
  int tpr = shape.threads / shape.rows_per_block;
  int rows_per_block = shape.rows_per_block;
  int cluster = shape.cluster_size;
  if (!vector_path) {
    cluster = 1;  // scalar streaming, one block per row group
    tpr = std::min(tpr, kStreamingMaxThreads);
    rows_per_block = std::max(1, std::min(rows_per_block, kStreamingMaxThreads / tpr));
  }
  const int threads = tpr * rows_per_block;
  const KernelFn fn =
      vector_path ? vector_kernel(config, dtype, fused) : streaming_kernel(dtype, fused, false);
  if (fn == nullptr) throw SignatureError("rms_norm (CUDA): no kernel for {" + config.str() + "}");

  int device = 0;
  if (const cudaError_t err = cudaGetDevice(&device); err != cudaSuccess)
    throw_cuda(err, "cudaGetDevice");
  const int sms = sm_count(device);
  int per_sm = shape.blocks_per_sm;
  if (per_sm == 0) per_sm = std::max(1, max_blocks_per_sm(fn, threads, device));
  // Row groups go to blocks, or to clusters of `cluster` blocks that share them.
  const int64_t groups = ceil_div(a.rows, rows_per_block);
  const int64_t slots = std::max<int64_t>(1, static_cast<int64_t>(sms) * per_sm / cluster);
  int64_t units = std::min(groups, slots);
  if (shape.grid == RMSNormGrid::balanced) {
    units = ceil_div(groups, ceil_div(groups, slots));
  } else if (shape.grid == RMSNormGrid::all) {
    units = std::min<int64_t>(groups, INT_MAX / 2);
  }
  const int grid = static_cast<int>(units * cluster);

  const RMSNormParams p = make_params(a, tpr, rows_per_block);
  if (cluster == 1) {
    fn<<<grid, threads, 0, static_cast<cudaStream_t>(stream)>>>(p);
    if (const cudaError_t err = cudaGetLastError(); err != cudaSuccess)
      throw_cuda(err, "kernel launch");
  } else {
    const hopper::ClusterLaunch launch(grid, threads, 0, cluster,
                                       static_cast<cudaStream_t>(stream));
    if (const cudaError_t err = cudaLaunchKernelEx(launch.config(), fn, p); err != cudaSuccess)
      throw_cuda(err, "kernel launch (cluster)");
    if (const cudaError_t err = cudaGetLastError(); err != cudaSuccess)
      throw_cuda(err, "kernel launch (cluster)");
  }
}

}  // namespace tileops::cuda_kernels
