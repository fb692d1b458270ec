#include "base/toy_op.h"

namespace toy {

namespace {
Roofline toy_roofline(const SignatureCall& call) {
  return Roofline{static_cast<double>(call.dim("N")), call.traffic_bytes()};
}
}  // namespace

const OpSchema& toy_schema() {
  static const OpSchema schema = [] {
    OpSchema s;
    s.name = "ToyScaleFwdOp";
    s.family = "testing";
    s.status = "implemented";
    s.indices = {{"N", "Dim"}, {"T", "DType[float32 | float16]"}};
    s.params = {ParamInfo{"scale", "float", true, Value{1.0}}};
    s.inputs = {TensorDecl{"x", "T", "[N]"}};
    s.outputs = {TensorDecl{"y", "T", "[N]", false, false, false, true}};
    s.roofline_flops = "N";
    // As tileops-gen would name its compile boundary (a tensor input, no composition).
    s.compile_op_names = {"tileops::testing_toy_scale_fwd", "tileops::testing_toy_scale_fwd_out"};
    s.compile_op_schemas = {"(str key, Tensor x) -> Tensor",
                            "(str key, Tensor x, Tensor(a!) out) -> ()"};
    s.eval_roofline = &toy_roofline;
    return s;
  }();
  return schema;
}

SignatureCall toy_check_call(const CallArgs& a) {
  const Tensor& x = *a.inputs[0];
  if (!x.defined()) throw SignatureError("ToyScaleFwdOp: input 'x' is required");
  if (x.dim() != 1) {
    throw SignatureError(
        fmt::format("ToyScaleFwdOp: input 'x' declared [N]: expected rank 1, got {}", x.str()));
  }
  if (x.dtype() != DType::float32 && x.dtype() != DType::float16) {
    throw SignatureError(
        fmt::format("ToyScaleFwdOp: input 'x' declared T in DType[float32 | float16], got {}",
                    dtype_name(x.dtype())));
  }
  SignatureCall call(&toy_schema());
  call.indices = {Value{x.size(0)}, Value{x.dtype()}};
  call.device = x.device();
  call.present = {true};
  call.tensors.push_back(TensorRecord{"x", x.sizes(), x.dtype(), 1, 0, TensorRecord::Role::input});
  call.tensors.push_back(TensorRecord{"y", x.sizes(), x.dtype(), 0, 1, TensorRecord::Role::output});
  const Tensor& out = *a.outs[0];
  call.has_out = out.defined();
  if (out.defined() && (out.sizes() != x.sizes() || out.dtype() != x.dtype())) {
    throw SignatureError("ToyScaleFwdOp: out must match output 'y'");
  }
  return call;
}

}  // namespace toy
