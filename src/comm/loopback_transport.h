// Internal: an in-process expert-parallel group for tests. N ranks, one thread each, exchange
// through host buffers; a rank that fails aborts the group, and a collective that waits longer
// than the timeout fails the group, so every rank raises ExpertParallelCommError instead of
// hanging (the behaviour the NCCL transport gets from its watchdog, expert-parallel.md).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "tileops/ops/moe_expert_parallel.h"

namespace tileops {

class LoopbackGroup {
 public:
  LoopbackGroup(std::int64_t world_size, std::chrono::milliseconds timeout);
  ~LoopbackGroup();
  LoopbackGroup(const LoopbackGroup&) = delete;
  LoopbackGroup& operator=(const LoopbackGroup&) = delete;

  /// The transport of `rank` (one per rank; the group must outlive it).
  std::shared_ptr<ExpertParallelTransport> transport(std::int64_t rank);
  /// Marks the group failed on behalf of `rank`: every waiting and later collective raises
  /// ExpertParallelCommError naming the rank and `reason`.
  void abort(std::int64_t rank, const std::string& reason);

  struct State;  // shared with the transports

 private:
  std::shared_ptr<State> state_;
};

}  // namespace tileops
