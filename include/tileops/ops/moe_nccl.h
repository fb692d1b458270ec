// The NCCL transport of expert parallelism (docs/design/expert-parallel.md § Which NCCL): one
// process per GPU, a communicator from a unique id that rank 0 creates and hands to the others
// (scripts/ep-launch.sh names the file it goes through), point-to-point all-to-all-v with the
// counts exchanged first, and a bounded wait on every collective so that a failed or silent peer
// raises ExpertParallelCommError instead of hanging.
//
//   // rank 0: auto id = tileops::nccl_unique_id(); share id.hex() with the other ranks
//   auto transport = tileops::make_nccl_transport(id, {.world_size = 8, .rank = r, .device = r});
//   auto pf = std::make_shared<tileops::ExpertParallelPrepareFinalize>(transport, config);
//
// In a build without NCCL (TILEOPS_NCCL off, or no NCCL found) every function but
// nccl_available() raises OpNotAvailableError.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "tileops/ops/moe_expert_parallel.h"

namespace tileops {

/// Whether this build of tileops has the NCCL transport.
bool nccl_available() noexcept;

/// The 128 bytes that name one NCCL communicator (ncclUniqueId), as text for a launcher.
struct NcclUniqueId {
  std::array<std::byte, 128> bytes{};

  /// 256 lowercase hex digits.
  std::string hex() const;
  /// The inverse of hex(); UsageError for text that is not 256 hex digits.
  static NcclUniqueId from_hex(std::string_view text);
};

/// A new id (ncclGetUniqueId): called once, by rank 0, before any rank connects. NCCL's bootstrap
/// root runs in the calling process, so that process must live until every rank has connected
/// (an id printed by a process that then exits is useless).
NcclUniqueId nccl_unique_id();

struct NcclTransportOptions {
  std::int64_t world_size = 1;
  std::int64_t rank = 0;
  int device = 0;  ///< the CUDA device of this rank
  /// The longest a rank waits for a collective (connecting included) before it aborts the
  /// communicator and raises ExpertParallelCommError.
  std::chrono::milliseconds timeout{std::chrono::seconds(120)};
};

/// Connects this rank to the group named by `id` (collective: every rank calls it with the same
/// id and world size). The transport enqueues on tileops' current stream of `options.device` and
/// waits for each collective to complete (the counts must reach the host), polling NCCL's
/// asynchronous error state against the timeout. ExpertParallelCommError when the group cannot
/// form or a peer fails; UsageError for options out of range.
std::shared_ptr<ExpertParallelTransport> make_nccl_transport(const NcclUniqueId& id,
                                                             const NcclTransportOptions& options);

/// As above, from the launcher's environment: WORLD_SIZE, RANK, LOCAL_RANK (the device) and
/// TILEOPS_EP_ID_FILE, a path on a file system every rank sees: rank 0 creates the id and writes
/// it there (atomically), the other ranks wait for it within the timeout
/// (ExpertParallelCommError after). TILEOPS_EP_UNIQUE_ID (NcclUniqueId::hex(), from a process
/// that stays alive) replaces the file; TILEOPS_EP_TIMEOUT_S overrides the timeout. UsageError
/// naming the variable that is missing or malformed.
std::shared_ptr<ExpertParallelTransport> make_nccl_transport_from_env();

}  // namespace tileops
