// Internal: the thread's stack of running op calls (step 1 and step 7 of a call). A completed
// call reports its record to the enclosing call, which files it under a stage.
#pragma once

#include <utility>
#include <vector>

#include "tileops/op/signature_call.h"

namespace tileops {
class Op;
}

namespace tileops::detail {

struct CallFrame {
  Op* op = nullptr;
  const SignatureCall* call = nullptr;  // valid while the body runs
  std::vector<std::pair<Op*, SignatureCallPtr>> subcalls;
};

/// The innermost running call of this thread, or nullptr.
CallFrame* current_frame() noexcept;

/// Pushes a frame for its lifetime.
class CallStackGuard {
 public:
  explicit CallStackGuard(CallFrame& frame);
  ~CallStackGuard();
  CallStackGuard(const CallStackGuard&) = delete;
  CallStackGuard& operator=(const CallStackGuard&) = delete;
  /// Reports a completed call to the enclosing frame, if any.
  void report_to_parent(SignatureCallPtr record);

 private:
  CallFrame& frame_;
};

}  // namespace tileops::detail
