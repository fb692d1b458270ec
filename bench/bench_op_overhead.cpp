// Host cost of the Op base-class path: an RMSNormFwdOp call whose kernel does nothing, on a
// cache hit (signature check, target already selected, kernel_for hit, output allocation or the
// caller's `out`, result check, record). The kernel is a registered kernel type preferred over
// the in-tree CPU one, so the whole in-tree path runs except the arithmetic.
#include <benchmark/benchmark.h>

#include "tileops/ops/norm.h"

namespace {

using namespace tileops;

class NoopRmsNorm final : public Kernel, public RmsNormInterface {
 public:
  using Interface = RmsNormInterface;
  static std::vector<Device::Type> devices() { return {Device::Type::cpu}; }
  static std::vector<std::string> preferred_over() { return {"rms_norm_cpu"}; }
  explicit NoopRmsNorm(const RmsNormCall&) {}
  void forward(const Tensor&, const Tensor*, const Tensor&, const Tensor& y, double) override {
    benchmark::DoNotOptimize(y.data_ptr());
  }
};

[[maybe_unused]] const bool registered = [] {
  register_kernel_type("RMSNormFwdOp", implementation<NoopRmsNorm>("noop", "NoopRmsNorm"));
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

}  // namespace

BENCHMARK_MAIN();
