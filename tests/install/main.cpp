// Uses an installed tileops the way a user's program would: the dynamic path (make_op by
// manifest name) and, when the generated headers are installed, the typed op class of the
// README. Exits non-zero on any mismatch.
#include <cmath>
#include <cstdio>
#include <exception>
#include <vector>

#include <tileops/base/op.h>
#include <tileops/base/op_class.h>
#include <tileops/base/schema.h>
#include <tileops/core/tensor.h>

#if __has_include(<tileops/gen/norm.h>)
#include <tileops/ops/norm.h>
#define CONSUMER_HAS_TYPED_NORM 1
#endif

namespace {

/// Each row of y must have mean(y^2) close to 1 (weight is all ones).
bool rows_normalized(const tileops::Tensor& y) {
  const std::vector<double> v = y.to(tileops::Device::cpu()).to_vector();
  const auto rows = y.size(0);
  const auto cols = y.size(1);
  for (std::int64_t r = 0; r < rows; ++r) {
    double ms = 0;
    for (std::int64_t c = 0; c < cols; ++c) ms += v[r * cols + c] * v[r * cols + c];
    ms /= static_cast<double>(cols);
    if (std::fabs(ms - 1.0) > 1e-3) {
      std::fprintf(stderr, "row %lld: mean(y^2) = %g, expected 1\n", static_cast<long long>(r), ms);
      return false;
    }
  }
  return true;
}

}  // namespace

int main() {
  try {
    std::printf("tileops installed: %zu op schemas\n", tileops::all_schemas().size());
    if (tileops::all_schemas().empty()) return 1;
    if (tileops::find_op_class("RMSNormFwdOp") == nullptr) {
      std::printf("RMSNormFwdOp has no registered class: schemas only\n");
      return 0;
    }
    const tileops::Tensor x = tileops::Tensor::randn({4, 64}, tileops::DType::float32, 7);
    const tileops::Tensor w = tileops::Tensor::full({64}, 1.0, tileops::DType::float32);

    // The dynamic path.
    const tileops::ParamMap params{{"normalized_shape", tileops::Sizes{64}}, {"eps", 1e-6}};
    auto op = tileops::make_op("RMSNormFwdOp", params);
    const std::vector<tileops::Tensor> inputs{x, w};
    const std::vector<tileops::Tensor> out = op->call(inputs);
    if (out.size() != 1 || out[0].sizes() != tileops::Sizes{4, 64} || !rows_normalized(out[0])) {
      std::fprintf(stderr, "make_op(\"RMSNormFwdOp\") gave a wrong result\n");
      return 1;
    }
    const tileops::Roofline roof = op->eval_roofline();
    std::printf("RMSNormFwdOp (make_op): y %s, roofline %.0f flops, %.0f bytes\n",
                out[0].str().c_str(), roof.flops, roof.bytes);

#ifdef CONSUMER_HAS_TYPED_NORM
    // The typed path, as the README shows it.
    tileops::RMSNormFwdOp typed({.normalized_shape = {64}, .eps = 1e-6});
    const tileops::Tensor y = typed(x, w);
    if (!rows_normalized(y)) {
      std::fprintf(stderr, "RMSNormFwdOp (typed) gave a wrong result\n");
      return 1;
    }
    const auto [flops, bytes] = typed.eval_roofline();
    std::printf("RMSNormFwdOp (typed): roofline %.0f flops, %.0f bytes\n", flops, bytes);
#endif
    std::printf("install consumer: OK\n");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "install consumer: %s\n", e.what());
    return 1;
  }
}
