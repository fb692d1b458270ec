#include "base/call_stack.h"

#include <vector>

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
  if (!t_frames.empty() && t_frames.back() == &frame_) {
    t_frames.pop_back();
    return;
  }
  // An open call (Op::OpenCall) undone before a call opened after it: leave the others in place.
  std::erase(t_frames, &frame_);
}

void CallStackGuard::report_to_parent(SignatureCallPtr record) {
  if (t_frames.size() >= 2) {
    CallFrame* parent = t_frames[t_frames.size() - 2];
    parent->subcalls.emplace_back(frame_.op, std::move(record));
  }
}

}  // namespace tileops::detail
