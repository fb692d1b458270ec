// Compile check of the C++ tileops-gen emits for tests/manifest/golden/mini.yaml, against the
// library headers. Built into an object library that is never linked: op classes written the
// way src/ops/ writes them, every member of the generated bases instantiated, and typical uses
// (designated initializers for the parameters, the typed call) spelled out.
#include <tuple>

#include "tileops/gen/mini.h"

namespace golden {

using tileops::SignatureCall;
using tileops::Tensor;

// forward taking the typed indices (what src/ops/ writes) ...
class MiniMatmulFwdOp final : public tileops::gen::MiniMatmulFwdOpBase<MiniMatmulFwdOp> {
 public:
  using MiniMatmulFwdOpBase::MiniMatmulFwdOpBase;
  void forward(const Indices& call, const Tensor& x, const Tensor& w, const Tensor& bias,
               const Tensor& y) {
    const SignatureCall& record = call;
    (void)record, (void)call.device, (void)x, (void)w, (void)bias, (void)y;
  }
};

// ... or the record, which the indices convert to; a composite's delegate_types comes from its
// composition.
class MiniSplitFwdOp final : public tileops::gen::MiniSplitFwdOpBase<MiniSplitFwdOp> {
 public:
  using MiniSplitFwdOpBase::MiniSplitFwdOpBase;
  static_assert(tileops::detail::HasDelegateTypes<MiniSplitFwdOpBase>);

 private:
  friend class tileops::gen::MiniSplitFwdOpBase<MiniSplitFwdOp>;
  void forward(const SignatureCall& call, const Tensor& x, const Tensor& acc, const Tensor& lo,
               const Tensor& hi) {
    (void)call, (void)x, (void)acc, (void)lo, (void)hi;
  }
};

Tensor use_matmul(const Tensor& x, const Tensor& w, const Tensor& bias) {
  MiniMatmulFwdOp op({.transpose = true, .alpha = 0.5, .tile = {32, 32}});
  const MiniMatmulFwdOp::Params& p = op.params();
  (void)p;
  return op(x, w, bias);
}

std::tuple<Tensor, Tensor> use_split(const Tensor& scale, const Tensor& x, const Tensor& acc,
                                     const Tensor& out) {
  MiniSplitFwdOp op({.mode = "max", .scale = scale}, tileops::Target::builtin());
  return op(x, acc, out);
}

}  // namespace golden

template class tileops::gen::MiniMatmulFwdOpBase<golden::MiniMatmulFwdOp>;
template class tileops::gen::MiniSplitFwdOpBase<golden::MiniSplitFwdOp>;
