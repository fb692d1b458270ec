// Internal: the thread's stack of running op calls (step 1 and step 7 of a call). A completed
// call reports its record to the enclosing call, which files it under a stage.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "tileops/base/signature_call.h"

namespace tileops {
class Op;
class Kernel;
}  // namespace tileops

namespace tileops::detail {

struct CallFrame {
  Op* op = nullptr;
  const SignatureCall* call = nullptr;  // valid while the body runs
  std::vector<std::pair<Op*, SignatureCallPtr>> subcalls;
  /// Entries kernel_for handed to this call: they live until the call ends, even when a failed
  /// call on another thread undoes the binding group and drops the caches' references.
  std::vector<std::shared_ptr<Kernel>> pinned;
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
