// CUDA kernels of the copy engine: strided, converting copies and fills on one device.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/cuda_copy.h"
#include "core/element_convert.h"
#include "tileops/core/cuda.h"

namespace tileops::detail {

namespace {

constexpr int kThreads = 256;

// Kernel parameters: the plan without host-only parts.
struct Geometry {
  int ndim;
  std::int64_t sizes[kCudaCopyMaxDims];
  std::int64_t dst_strides[kCudaCopyMaxDims];
  std::int64_t src_strides[kCudaCopyMaxDims];
};

__device__ inline void offsets_of(const Geometry& g, std::int64_t linear, std::int64_t& dst,
                                  std::int64_t& src) {
  dst = 0;
  src = 0;
  for (int d = g.ndim - 1; d >= 0; --d) {
    const std::int64_t i = linear % g.sizes[d];
    linear /= g.sizes[d];
    dst += i * g.dst_strides[d];
    src += i * g.src_strides[d];
  }
}

template <class D, class S>
__global__ void copy_kernel(D* __restrict__ dst, const S* __restrict__ src, Geometry g,
                            std::int64_t numel) {
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < numel;
       i += step) {
    std::int64_t od = 0;
    std::int64_t os = 0;
    offsets_of(g, i, od, os);
    dst[od] = convert_element<D>(src[os]);
  }
}

template <class D, class S>
__global__ void copy_contiguous_kernel(D* __restrict__ dst, const S* __restrict__ src,
                                       std::int64_t numel) {
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < numel;
       i += step) {
    dst[i] = convert_element<D>(src[i]);
  }
}

template <class T>
__global__ void fill_kernel(T* __restrict__ dst, T value, Geometry g, std::int64_t numel) {
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < numel;
       i += step) {
    std::int64_t od = 0;
    std::int64_t os = 0;
    offsets_of(g, i, od, os);
    dst[od] = value;
  }
}

unsigned blocks_for(std::int64_t numel) {
  const std::int64_t blocks = (numel + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65536 ? blocks : 65536);
}

}  // namespace

void launch_cuda_copy(const CudaCopyPlan& plan, void* stream_ptr) {
  if (plan.numel == 0) return;
  auto stream = static_cast<cudaStream_t>(stream_ptr);
  Geometry g{};
  g.ndim = plan.ndim;
  bool contiguous = plan.ndim <= 1;
  for (int d = 0; d < plan.ndim; ++d) {
    g.sizes[d] = plan.sizes[d];
    g.dst_strides[d] = plan.dst_strides[d];
    g.src_strides[d] = plan.src_strides[d];
  }
  if (plan.ndim == 1) contiguous = plan.dst_strides[0] == 1 && plan.src_strides[0] == 1;
  const unsigned blocks = blocks_for(plan.numel);

  if (plan.src == nullptr) {  // fill
    visit_element_size(element_size(plan.dst_dtype), [&](auto tag) {
      using T = typename decltype(tag)::type;
      T value;
      __builtin_memcpy(&value, &plan.fill_bits, sizeof(T));
      fill_kernel<T>
          <<<blocks, kThreads, 0, stream>>>(static_cast<T*>(plan.dst), value, g, plan.numel);
    });
    check_cuda(static_cast<int>(cudaGetLastError()), "Tensor.fill_: kernel launch");
    return;
  }

  const auto launch = [&](auto dtag, auto stag) {
    using D = typename decltype(dtag)::type;
    using S = typename decltype(stag)::type;
    auto* dst = static_cast<D*>(plan.dst);
    const auto* src = static_cast<const S*>(plan.src);
    if (contiguous) {
      copy_contiguous_kernel<D, S><<<blocks, kThreads, 0, stream>>>(dst, src, plan.numel);
    } else {
      copy_kernel<D, S><<<blocks, kThreads, 0, stream>>>(dst, src, g, plan.numel);
    }
  };
  if (plan.dst_dtype == plan.src_dtype) {
    visit_element_size(element_size(plan.dst_dtype), [&](auto tag) { launch(tag, tag); });
  } else {
    visit_dtype(plan.dst_dtype, [&](auto dtag) {
      visit_dtype(plan.src_dtype, [&](auto stag) {
        using D = typename decltype(dtag)::type;
        using S = typename decltype(stag)::type;
        if constexpr (kConvertible<D, S> && !std::is_same_v<D, S>) launch(dtag, stag);
      });
    });
  }
  check_cuda(static_cast<int>(cudaGetLastError()), "Tensor.copy_: kernel launch");
}

}  // namespace tileops::detail
