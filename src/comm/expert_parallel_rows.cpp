// The row moves of expert-parallel dispatch and combine (expert_parallel_rows.h): host loops for
// the in-process group, the kernels of kernels/moe/expert_parallel_cuda.cu for a GPU transport.
#include "comm/expert_parallel_rows.h"

#include <cstring>

#include "comm/expert_parallel_plan.h"
#include "tileops/core/cuda.h"
#include "tileops/core/error.h"

namespace tileops::expert_parallel {

Tensor index_tensor(const std::vector<std::int64_t>& values, Device device) {
  Tensor host = Tensor::empty({static_cast<std::int64_t>(values.size())}, DType::int64);
  if (!values.empty()) std::memcpy(host.data_ptr(), values.data(), values.size() * 8);
  return host.to(device);
}

RowCopyArgs pack(Tensor& wire, PackedRow::Field f, const Tensor& src, std::int64_t bytes,
                 std::int64_t rows, const std::int64_t* order) {
  return {.dst = wire.data_ptr(),
          .dst_stride = f.stride,
          .dst_offset = f.offset,
          .src = src.data_ptr(),
          .src_stride = bytes,
          .src_offset = 0,
          .bytes = bytes,
          .index = order,
          .rows = rows};
}

RowCopyArgs unpack(Tensor& dst, const Tensor& wire, PackedRow::Field f, std::int64_t bytes,
                   std::int64_t rows) {
  return {.dst = dst.data_ptr(),
          .dst_stride = bytes,
          .dst_offset = 0,
          .src = wire.data_ptr(),
          .src_stride = f.stride,
          .src_offset = f.offset,
          .bytes = bytes,
          .index = nullptr,
          .rows = rows};
}

void copy_rows(const RowCopyArgs& args, Device device) {
  if (args.rows == 0 || args.bytes == 0) return;
  if (device.is_cuda()) {
#if TILEOPS_WITH_CUDA
    cuda_kernels::launch_copy_rows(args, cuda_current_stream(device.index));
    return;
#else
    throw UsageError("expert parallelism on a GPU: tileops was built without CUDA");
#endif
  }
  const auto* src = static_cast<const std::byte*>(args.src);
  auto* dst = static_cast<std::byte*>(args.dst);
  for (std::int64_t i = 0; i < args.rows; ++i) {
    const std::int64_t j = args.index != nullptr ? args.index[i] : i;
    std::memcpy(dst + i * args.dst_stride + args.dst_offset,
                src + j * args.src_stride + args.src_offset, static_cast<std::size_t>(args.bytes));
  }
}

void combine(const Tensor& returned, const DispatchPlan& plan, Tensor& y, Device device) {
  const std::int64_t tokens = y.size(0), hidden = y.size(1);
  if (device.is_cuda()) {
#if TILEOPS_WITH_CUDA
    const Tensor token_offsets = index_tensor(plan.token_offsets, device);
    const Tensor token_rows = index_tensor(plan.token_rows, device);
    cuda_kernels::launch_combine_rows({.partials = returned.data_ptr(),
                                       .token_offsets = token_offsets.data<std::int64_t>(),
                                       .token_rows = token_rows.data<std::int64_t>(),
                                       .y = y.data_ptr(),
                                       .tokens = tokens,
                                       .hidden = hidden,
                                       .dtype = y.dtype()},
                                      cuda_current_stream(device.index));
    return;
#else
    throw UsageError("expert parallelism on a GPU: tileops was built without CUDA");
#endif
  }
  const Tensor partials = returned.to(DType::float32);
  const Tensor sums = Tensor::empty({tokens, hidden}, DType::float32);
  combine_rows({partials.data<float>(), static_cast<std::size_t>(partials.numel())}, hidden, plan,
               {sums.data<float>(), static_cast<std::size_t>(sums.numel())});
  y.copy_(sums);
}

}  // namespace tileops::expert_parallel
