// Op::OpenCall: a call whose body runs outside `forward` (the Python composites), with the same
// steps, record and undo as Op::run_call.
#include <fmt/format.h>

#include "base/call_stack.h"
#include "tileops/base/op.h"

namespace tileops {

Op::OpenCall::OpenCall(Op& op, std::span<const Tensor> inputs, std::span<const Tensor> outs)
    : op_(op), frame_(std::make_unique<detail::CallFrame>()) {
  const std::size_t n_inputs = op.schema().inputs.size();
  const std::size_t n_buffers = op.check_arity(inputs.size(), outs.size());
  // Owned copies (reference counts only): the tensors outlive the caller's spans.
  tensors_.reserve(n_inputs + n_buffers);
  tensors_.insert(tensors_.end(), inputs.begin(), inputs.end());
  tensors_.resize(n_inputs);
  tensors_.insert(tensors_.end(), outs.begin(), outs.end());
  tensors_.resize(n_inputs + n_buffers);
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    (i < n_inputs ? inputs_ : outs_).push_back(&tensors_[i]);
  }
  frame_->op = &op;
}

Op::OpenCall::~OpenCall() {
  // Not closed: undone as a failed call is (the record is dropped with the frame).
  if (!complete_ && bound_here_) op_.reset_binding();
}

const SignatureCall& Op::OpenCall::record() const {
  if (!call_) throw UsageError(fmt::format("{}: the open call is closed", op_.name()));
  return *call_;
}

std::unique_ptr<Op::OpenCall> Op::open_call(std::span<const Tensor> inputs,
                                            std::span<const Tensor> outs) {
  std::unique_ptr<OpenCall> open(new OpenCall(*this, inputs, outs));
  open->guard_ = std::make_unique<detail::CallStackGuard>(*open->frame_);  // (1) begin
  // An exception destroys `open`, which undoes what this call bound.
  open->call_ = std::make_unique<SignatureCall>(check_call(open->args()));  // (2)
  open->frame_->call = open->call_.get();
  if (auto outputs = run_without_body(*open->call_, open->args(), open->bound_here_)) {
    const std::unique_ptr<SignatureCall> call = std::move(open->call_);
    open->frame_->call = nullptr;
    open->outputs_ = finish_call(std::move(*call), open->args(), std::move(*outputs), *open->frame_,
                                 *open->guard_);
    open->complete_ = true;
    open->guard_.reset();
  } else {
    open->outputs_ = allocate_outputs(*open->call_, open->args());  // the body writes them
  }
  return open;
}

std::vector<Tensor> Op::OpenCall::close(std::vector<Tensor> outputs) {
  if (!call_) {
    throw UsageError(
        fmt::format("{}: close of a call that is complete or failed to close", op_.name()));
  }
  if (detail::current_frame() != frame_.get()) {
    throw UsageError(fmt::format(
        "{}: close of an open call that is not this thread's innermost running call (close the "
        "calls opened after it first, on the thread that opened them)",
        op_.name()));
  }
  // The body writes the outputs it was given, as forward does.
  const auto& decls = op_.schema().outputs;
  for (std::size_t i = 0; i < outputs_.size() && i < outputs.size(); ++i) {
    if (outputs[i].defined() && outputs[i].data_ptr() == outputs_[i].data_ptr() &&
        outputs[i].shares_storage_with(outputs_[i])) {
      continue;
    }
    throw SignatureError(
        fmt::format("{}: output '{}': the body did not return the output it "
                    "was given to write ({}), got {}",
                    op_.name(), decls[i].name, outputs_[i].str(), outputs[i].str()));
  }
  // The record moves into last_call; a failed check leaves the call to be undone.
  const std::unique_ptr<SignatureCall> call = std::move(call_);
  frame_->call = nullptr;
  std::vector<Tensor> result =
      op_.finish_call(std::move(*call), args(), std::move(outputs), *frame_, *guard_);
  complete_ = true;
  guard_.reset();
  return result;
}

}  // namespace tileops
