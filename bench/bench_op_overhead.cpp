// Host cost of the Op base-class path: an RMSNormFwdOp call whose kernel does nothing, on a
// cache hit (signature check, target already selected, kernel_for hit, output allocation or the
// caller's `out`, result check, record). The kernel is a registered kernel type preferred over
// the in-tree CPU one, so the whole in-tree path runs except the arithmetic.
#include <benchmark/benchmark.h>

#include <chrono>

#include "tileops/core/cuda.h"
#include "tileops/ops/norm.h"
#if TILEOPS_WITH_CUDA
#include "kernels/norm/rms_norm_cuda.h"
#endif

namespace {

using namespace tileops;

class NoopRMSNorm final : public Kernel, public RMSNormInterface {
 public:
  using Interface = RMSNormInterface;
  static std::vector<Device::Type> devices() { return {Device::Type::cpu}; }
  static std::vector<std::string> preferred_over() { return {"rms_norm_cpu"}; }
  explicit NoopRMSNorm(const RMSNormCall&) {}
  void forward(const Tensor&, const Tensor*, const Tensor&, const Tensor& y, double) override {
    benchmark::DoNotOptimize(y.data_ptr());
  }
};

[[maybe_unused]] const bool registered = [] {
  register_kernel_type("RMSNormFwdOp", implementation<NoopRMSNorm>("noop", "NoopRMSNorm"));
  return true;
}();

void BM_RmsNormCallAllocatingOutput(benchmark::State& state) {
  RMSNormFwdOp op({.normalized_shape = {4096}});
  const Tensor x = Tensor::randn({1, 4096}, DType::bfloat16, 1);
  const Tensor w = Tensor::randn({4096}, DType::bfloat16, 2);
  op(x, w);  // warm: target selected, kernel built
  for (auto _ : state) {
    Tensor y = op(x, w);
    benchmark::DoNotOptimize(y);
  }
}
BENCHMARK(BM_RmsNormCallAllocatingOutput);

void BM_RmsNormCallWithOut(benchmark::State& state) {
  RMSNormFwdOp op({.normalized_shape = {4096}});
  const Tensor x = Tensor::randn({1, 4096}, DType::bfloat16, 1);
  const Tensor w = Tensor::randn({4096}, DType::bfloat16, 2);
  const Tensor out = Tensor::empty({1, 4096}, DType::bfloat16);
  op(x, w, out);
  for (auto _ : state) {
    Tensor y = op(x, w, out);
    benchmark::DoNotOptimize(y);
  }
}
BENCHMARK(BM_RmsNormCallWithOut);

void BM_EmptyTensorAllocation(benchmark::State& state) {
  for (auto _ : state) {
    Tensor y = Tensor::empty({1, 4096}, DType::bfloat16);
    benchmark::DoNotOptimize(y);
  }
}
BENCHMARK(BM_EmptyTensorAllocation);

#if TILEOPS_WITH_CUDA
// Host time per call on the GPU: `kBatch` calls are enqueued and timed on the host clock, then
// the device is synchronised outside the timed region (the queue never fills, so the time is the
// host's). The counter `host_time_per_call` is the batch time over kBatch. The same tiny RMSNorm
// ([1, 4096] bf16) through the whole Op path, and as a bare launch of the same kernel with the same
// configuration.
constexpr int kBatch = 200;

template <class Body>
void time_host_batches(benchmark::State& state, Body&& body) {
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kBatch; ++i) body();
    const auto stop = std::chrono::steady_clock::now();
    state.SetIterationTime(std::chrono::duration<double>(stop - start).count());
    cuda_synchronize(0);
  }
  state.counters["host_time_per_call"] = benchmark::Counter(
      kBatch, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void BM_CudaRmsNormOpCall(benchmark::State& state) {
  if (!cuda_available()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  RMSNormFwdOp op({.normalized_shape = {4096}}, Target::builtin());
  const Device gpu = Device::cuda(0);
  const Tensor x = Tensor::randn({1, 4096}, DType::bfloat16, 1, gpu);
  const Tensor w = Tensor::randn({4096}, DType::bfloat16, 2, gpu);
  const Tensor out = Tensor::empty({1, 4096}, DType::bfloat16, gpu);
  op(x, w, out);
  cuda_synchronize(0);
  time_host_batches(state, [&] { benchmark::DoNotOptimize(op(x, w, out)); });
}
BENCHMARK(BM_CudaRmsNormOpCall)->UseManualTime();

void BM_CudaRmsNormBareLaunch(benchmark::State& state) {
  if (!cuda_available()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  const Device gpu = Device::cuda(0);
  const Tensor x = Tensor::randn({1, 4096}, DType::bfloat16, 1, gpu);
  const Tensor w = Tensor::randn({4096}, DType::bfloat16, 2, gpu);
  const Tensor out = Tensor::empty({1, 4096}, DType::bfloat16, gpu);
  cuda_kernels::RMSNormArgs args;
  args.x = x.data_ptr();
  args.x_row_stride = 4096;
  args.weight = w.data_ptr();
  args.y = out.data_ptr();
  args.y_row_stride = 4096;
  args.rows = 1;
  args.cols = 4096;
  args.dtype = DType::bfloat16;
  const auto config = cuda_kernels::rms_norm_default_config(1, 4096, DType::bfloat16, false, 0);
  void* stream = cuda_current_stream(0);
  cuda_kernels::launch_rms_norm(args, config, stream);
  cuda_synchronize(0);
  time_host_batches(state, [&] { cuda_kernels::launch_rms_norm(args, config, stream); });
}
BENCHMARK(BM_CudaRmsNormBareLaunch)->UseManualTime();
#endif

}  // namespace

BENCHMARK_MAIN();
