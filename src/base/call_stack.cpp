#include "base/call_stack.h"

namespace tileops::detail {
namespace {
thread_local std::vector<CallFrame*> t_frames;
}  // namespace

CallFrame* current_frame() noexcept {
  return t_frames.empty() ? nullptr : t_frames.back();
}

CallStackGuard::CallStackGuard(CallFrame& frame) : frame_(frame) {
  t_frames.push_back(&frame_);
}

CallStackGuard::~CallStackGuard() {
  t_frames.pop_back();
}

void CallStackGuard::report_to_parent(SignatureCallPtr record) {
  if (t_frames.size() >= 2) {
    CallFrame* parent = t_frames[t_frames.size() - 2];
    parent->subcalls.emplace_back(frame_.op, std::move(record));
  }
}

}  // namespace tileops::detail
