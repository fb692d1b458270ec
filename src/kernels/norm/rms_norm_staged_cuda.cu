// Shared-memory-staged RMSNorm kernel (sm_90a): a persistent block streams its rows through a ring
// of shared-memory stages filled by 1D TMA bulk copies. The plain default for many rows of 16 KB
// and more that the re-reading kernel does not take (rms_norm_policy.cpp).
//
// Staged kernel (RMSNormStagedConfig::stages = D >= 2, sm_90a): rows of a multiple of 16 bytes,
// every pointer and row stride 16-byte aligned (checked by rms_norm_staged_refusal: no scalar
// tail here; the op's kernel runs rms_norm_fallback_config on arguments it refuses).
//
// Each block of a persistent grid walks its rows (blockIdx.x, + gridDim.x, ...) one at a time,
// all its threads on one row. The rows wait in a ring of D shared-memory stages (x, then the
// residual when fused), each filled by 1D bulk copies (cp.async.bulk, the TMA engine) that thread
// 0 issues with mbarrier.arrive.expect_tx on the stage's "full" mbarrier; the weight is copied
// once, into its own slot, before the first row. Per row every thread:
//   1. waits on the stage's full barrier (phase parity flips each lap of the ring);
//   2. reads its 16-byte vectors of the stage (thread t: vectors t, t + threads, ...), fused adds
//      the residual and rounds to T (written back to global), and sums the squares in fp32;
//   3. reduces over the block: warp shuffles, one float per warp into red[row & 1], __syncthreads,
//      then every warp sums the warps' floats by shuffles (the same order in every warp);
//   4. reads the stage again (and the weight slot) and stores y with 16-byte st.global.
// No "empty" barriers: the __syncthreads of step 3 of row i is passed by every thread only after
// it finished row i - 1, so right after it thread 0 refills row i - 1's stage with row i - 1 + D.
// The same barrier protects red: red[i & 1] is rewritten at row i + 2, after the barrier of row
// i + 1, which no thread passes before it has read red[i & 1] at row i. The stages are only ever
// written by the async proxy and read by the generic one, so no proxy fence is needed (the
// refill of a stage follows the generic reads of it through the barrier, as in TMA pipelines).
// y == x is fine: row r of y is written only after its bulk copy completed (the full barrier).

// Shared memory of a block, in bytes from the base of the dynamic shared memory: the weight slot,
// D stages (x slot, then the residual slot when fused; slots are the row rounded to 128 bytes),
#include "kernels/norm/rms_norm_kernels.cuh"

#include "kernels/common/mbarrier.cuh"

#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <tuple>

#include "tileops/core/cuda.h"
#include "tileops/core/error.h"

namespace tileops::cuda_kernels::rms {
namespace {

// target (such as the compute_90a PTX also embedded) gets a trapping stub.
#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TILEOPS_RMS_STAGED_BODY 1
#else
#define TILEOPS_RMS_STAGED_BODY 0
#endif

using mbarrier::smem_u32;

// A 16-byte st.global (st.global.wb.v4: the plain store; a cast store came out as 4 x 32 bits
// from this kernel's loops).
__device__ __forceinline__ void store16(void* p, const uint4& v) {
  __stwb(reinterpret_cast<uint4*>(p), v);
}

// Vector j of a staged row: x, or fused T(x + residual) (fp32 sum, one rounding), packed.
template <typename T, bool kFused>
__device__ __forceinline__ Raw<T, 16 / sizeof(T)> staged_vec(const unsigned char* stage,
                                                             uint32_t slot_bytes, int j) {
  constexpr int VEC = 16 / static_cast<int>(sizeof(T));
  using V = Raw<T, VEC>;
  const V x = *reinterpret_cast<const V*>(stage + 16 * j);
  if constexpr (!kFused) {
    return x;
  } else {
    const V r = *reinterpret_cast<const V*>(stage + slot_bytes + 16 * j);
    float a[VEC];
    float b[VEC];
    unpack<T, VEC>(x, a);
    unpack<T, VEC>(r, b);
#pragma unroll
    for (int e = 0; e < VEC; ++e) a[e] += b[e];
    return pack<T, VEC>(a);
  }
}

// The sum over the block of every thread's v, in the same order for every thread (see above for
// when `red` may be reused). One barrier; `after_barrier` runs on every thread right after it.
template <typename F>
__device__ __forceinline__ float block_sum(float v, float* red, F&& after_barrier) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = static_cast<int>(threadIdx.x) & 31;
  if (lane == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  after_barrier();
  float s = lane < static_cast<int>(blockDim.x >> 5) ? red[lane] : 0.f;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  return s;
}

template <typename T, bool kFused>
__global__ void __launch_bounds__(1024)
    rms_norm_staged_kernel(const RMSNormParams p, const StagedLayout l) {
#if !TILEOPS_RMS_STAGED_BODY
  // Compiled for a target without the sm_90 features: never launched there (the host checks the
  // device's compute capability).
  __trap();
#else
  constexpr int VEC = 16 / static_cast<int>(sizeof(T));
  using V = Raw<T, VEC>;
  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t base = smem_u32(smem);
  const uint32_t full_bar = base + l.bar_off;  // stage s: full_bar + 8 * s
  const uint32_t weight_bar = full_bar + 8 * l.stages;
  float* const red = reinterpret_cast<float*>(smem + l.red_off);
  const unsigned char* const wsm = smem;

  const int tid = static_cast<int>(threadIdx.x);
  const int nthreads = static_cast<int>(blockDim.x);
  const int nvec = static_cast<int>(l.row_bytes / 16);
  const int stages = static_cast<int>(l.stages);
  const int64_t first = blockIdx.x;
  const int64_t step = gridDim.x;
  const int64_t count = (p.rows - first + step - 1) / step;  // >= 1: the grid has <= rows blocks
  const auto* const x = static_cast<const unsigned char*>(p.x);
  const auto* const res = static_cast<const unsigned char*>(p.residual);
  const int64_t x_pitch = p.x_row_stride * static_cast<int64_t>(sizeof(T));
  const int64_t r_pitch = p.residual_row_stride * static_cast<int64_t>(sizeof(T));

  // Thread 0: copies the block's local row i into stage s.
  const auto fill = [&](int s, int64_t i) {
    const int64_t row = first + i * step;
    const uint32_t bar = full_bar + 8 * s;
    const uint32_t dst = base + l.stage_off + static_cast<uint32_t>(s) * l.stage_bytes;
    mbarrier::arrive_expect_tx(bar, kFused ? 2 * l.row_bytes : l.row_bytes);
    mbarrier::bulk_load(dst, x + row * x_pitch, l.row_bytes, bar);
    if constexpr (kFused)
      mbarrier::bulk_load(dst + l.slot_bytes, res + row * r_pitch, l.row_bytes, bar);
  };

  if (tid == 0) {
    for (int s = 0; s <= stages; ++s) mbarrier::init(full_bar + 8 * s, 1);  // s == stages: weight
    mbarrier::fence_init();
    mbarrier::arrive_expect_tx(weight_bar, l.row_bytes);
    mbarrier::bulk_load(base, p.weight, l.row_bytes, weight_bar);
    const int64_t ahead = count < stages ? count : stages;
    for (int64_t i = 0; i < ahead; ++i) fill(static_cast<int>(i), i);
  }
  __syncthreads();  // the barriers are initialized before anyone waits on them
  mbarrier::wait(weight_bar, 0);

  int s = 0;
  uint32_t parity = 0;
  int prev_s = stages - 1;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t row = first + i * step;
    const unsigned char* const st = smem + l.stage_off + static_cast<uint32_t>(s) * l.stage_bytes;
    mbarrier::wait(full_bar + 8 * s, parity);

    T* const rrow = kFused ? static_cast<T*>(p.residual) + row * p.residual_row_stride : nullptr;
    float ss = 0.f;
#pragma unroll 4
    for (int j = tid; j < nvec; j += nthreads) {
      const V v = staged_vec<T, kFused>(st, l.slot_bytes, j);
      if constexpr (kFused) store16(rrow + j * VEC, v);
      float f[VEC];
      unpack<T, VEC>(v, f);
#pragma unroll
      for (int e = 0; e < VEC; ++e) ss = fmaf(f[e], f[e], ss);
    }
    // Past the barrier every thread has finished row i - 1: its stage takes row i - 1 + D.
    const int64_t refill = i - 1 + stages;
    ss = block_sum(ss, red + 32 * (i & 1), [&] {
      if (tid == 0 && i >= 1 && refill < count) fill(prev_s, refill);
    });
    const float inv = rsqrtf(ss * p.inv_cols + p.eps);

    T* const yrow = static_cast<T*>(p.y) + row * p.y_row_stride;
#pragma unroll 4
    for (int j = tid; j < nvec; j += nthreads) {
      float f[VEC];
      float g[VEC];
      unpack<T, VEC>(staged_vec<T, kFused>(st, l.slot_bytes, j), f);
      unpack<T, VEC>(*reinterpret_cast<const V*>(wsm + 16 * j), g);
#pragma unroll
      for (int e = 0; e < VEC; ++e) f[e] = f[e] * inv * g[e];
      store16(yrow + j * VEC, pack<T, VEC>(f));
    }

    prev_s = s;
    if (++s == stages) {
      s = 0;
      parity ^= 1u;
    }
  }
#endif
}

using StagedFn = void (*)(RMSNormParams, StagedLayout);

template <typename T>
StagedFn staged_kernel(bool fused) {
  return fused ? rms_norm_staged_kernel<T, true> : rms_norm_staged_kernel<T, false>;
}

StagedFn staged_kernel(DType dtype, bool fused) {
  switch (dtype) {
    case DType::float32:
      return staged_kernel<float>(fused);
    case DType::float16:
      return staged_kernel<__half>(fused);
    case DType::bfloat16:
      return staged_kernel<__nv_bfloat16>(fused);
    default:
      return nullptr;
  }
}

// Lets `fn` take up to `optin` bytes of dynamic shared memory on `device` (once per kernel and
// device: one limit for every launch, whatever its stages), and returns how many of its blocks of
// `threads` threads and `smem_bytes` bytes fit a multiprocessor.
int staged_prepare(StagedFn fn, int threads, int smem_bytes, int optin, int device) {
  static std::mutex mutex;
  static std::set<std::tuple<const void*, int>> allowed;
  static std::map<std::tuple<const void*, int, int, int>, int> cache;
  const void* const key_fn = reinterpret_cast<const void*>(fn);
  std::lock_guard<std::mutex> lock(mutex);
  if (allowed.insert(std::make_tuple(key_fn, device)).second) {
    const cudaError_t err =
        cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, optin);
    if (err != cudaSuccess) {
      allowed.erase(std::make_tuple(key_fn, device));
      throw_cuda(err, "cudaFuncSetAttribute(MaxDynamicSharedMemorySize)");
    }
  }
  const auto key = std::make_tuple(key_fn, threads, smem_bytes, device);
  if (const auto it = cache.find(key); it != cache.end()) return it->second;
  int blocks = 0;
  const cudaError_t err =
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, fn, threads, smem_bytes);
  if (err != cudaSuccess) throw_cuda(err, "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  cache[key] = blocks;
  return blocks;
}

}  // namespace

void launch_staged(const RMSNormArgs& a, const RMSNormStagedConfig& config, void* stream) {
  const bool fused = a.residual != nullptr;
  const int64_t row_bytes = a.cols * static_cast<int64_t>(element_size(a.dtype));
  const auto refuse = [&](const std::string& why) {
    throw SignatureError("rms_norm (CUDA): config {" + RMSNormConfig{config}.str() +
                         "} cannot serve [" + std::to_string(a.rows) + ", " +
                         std::to_string(a.cols) + "]" + (fused ? " fused" : "") + ": " + why);
  };
  if (const std::string why = rms_norm_staged_refusal(a, RMSNormConfig{config}); !why.empty())
    refuse(why);
  int device = 0;
  if (const cudaError_t err = cudaGetDevice(&device); err != cudaSuccess)
    throw_cuda(err, "cudaGetDevice");
  const CudaDeviceProperties& props = cuda_device_properties(device);
  if (props.major != 9)
    refuse("the staged kernel needs a device of compute capability 9.x, not " +
           std::to_string(props.major) + ".x");
  const int optin = static_cast<int>(props.shared_mem_per_block_optin);
  const int64_t smem = staged_smem_bytes(row_bytes, config.stages, fused);
  if (smem > optin)
    refuse(std::to_string(smem) + " bytes of shared memory, the device allows " +
           std::to_string(optin) + " a block");

  const StagedLayout layout = staged_layout(row_bytes, config.stages, fused);
  const StagedFn fn = staged_kernel(a.dtype, fused);
  if (fn == nullptr) refuse("no staged kernel for the dtype");
  const int smem_bytes = static_cast<int>(layout.total);
  const int fit = staged_prepare(fn, config.threads, smem_bytes, optin, device);
  if (fit < 1)
    refuse("a block of " + std::to_string(config.threads) + " threads and " +
           std::to_string(smem_bytes) + " bytes of shared memory does not fit");
  const int per_sm = config.blocks_per_sm > 0 ? config.blocks_per_sm : fit;
  // Blocks beyond what fits still run correctly (they do not wait on each other), only later.
  const int64_t slots = std::max<int64_t>(1, static_cast<int64_t>(sm_count(device)) * per_sm);
  int64_t blocks = std::min(a.rows, slots);
  if (config.grid == RMSNormGrid::balanced) blocks = ceil_div(a.rows, ceil_div(a.rows, slots));

  const RMSNormParams p = make_params(a, config.threads, 1);
  fn<<<static_cast<unsigned>(blocks), config.threads, static_cast<size_t>(smem_bytes),
       static_cast<cudaStream_t>(stream)>>>(p, layout);
  if (const cudaError_t err = cudaGetLastError(); err != cudaSuccess)
    throw_cuda(err, "kernel launch (staged)");
}

}  // namespace tileops::cuda_kernels::rms
