// Expert parallelism for FusedMoE (docs/design/expert-parallel.md): the experts are split over
// the ranks of a group in contiguous blocks; prepare sends each token to the ranks that hold its
// experts, finalize brings the ranks' partial results back and sums them per token. The bytes move
// through an ExpertParallelTransport (NCCL on GPUs: tileops/ops/moe_nccl.h; an in-process group in
// tests).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tileops/core/device.h"
#include "tileops/core/dtype.h"
#include "tileops/core/error.h"
#include "tileops/ops/moe.h"

namespace tileops {

/// The ranks of an expert-parallel group disagree on their configuration (expert count, top_k,
/// hidden size, dtype, world size), found when the prepare/finalize is constructed.
class ExpertParallelConfigError : public UsageError {
 public:
  using UsageError::UsageError;
};

/// A collective could not complete: a peer failed (aborted the group) or did not arrive within the
/// transport's timeout. The group is unusable afterwards; every later collective raises it too.
class ExpertParallelCommError : public Error {
 public:
  using Error::Error;
};

/// Where the experts live: rank r holds the global experts [r * per_rank, (r + 1) * per_rank).
struct ExpertPlacement {
  std::int64_t num_experts = 0;
  std::int64_t world_size = 1;
  std::int64_t rank = 0;

  /// UsageError unless 0 <= rank < world_size and world_size divides num_experts.
  void validate() const;
  std::int64_t experts_per_rank() const { return num_experts / world_size; }
  std::int64_t owner(std::int64_t expert) const { return expert / experts_per_rank(); }
  /// [num_experts] global id -> local index on this rank, -1 for the experts of other ranks (the
  /// expert_map MoEPrePermuteFwdOp takes).
  std::vector<std::int32_t> expert_map() const;
};

/// The collectives expert parallelism needs, over byte buffers. Every rank of the group calls each
/// one in the same order; a failure raises ExpertParallelCommError on every rank, never a hang.
class ExpertParallelTransport {
 public:
  virtual ~ExpertParallelTransport() = default;
  virtual std::string name() const = 0;
  virtual std::int64_t rank() const = 0;
  virtual std::int64_t world_size() const = 0;
  /// Where all_to_all's buffers live (host memory by default; a GPU transport's device). The
  /// prepare/finalize packs and combines rows there.
  virtual Device device() const { return Device::cpu(); }
  /// Every rank's `mine` (equal lengths), concatenated in rank order.
  virtual std::vector<std::int64_t> all_gather(std::span<const std::int64_t> mine) = 0;
  /// `send_counts[p]` is what this rank sends to p; returns recv[p], what p sends to this rank.
  virtual std::vector<std::int64_t> exchange_counts(std::span<const std::int64_t> send_counts) = 0;
  /// All-to-all-v: the bytes for peer p are `send` at the prefix sum of send_bytes, those from
  /// peer p land in `recv` at the prefix sum of recv_bytes (which must match p's send_bytes).
  virtual void all_to_all(std::span<const std::byte> send, std::span<const std::int64_t> send_bytes,
                          std::span<std::byte> recv, std::span<const std::int64_t> recv_bytes) = 0;
};

/// What every rank of the group must agree on; checked collectively at construction.
struct ExpertParallelConfig {
  std::int64_t num_experts = 0;
  std::int64_t top_k = 0;
  std::int64_t hidden = 0;
  DType dtype = DType::bfloat16;
};

/// Dispatch and combine over a transport. prepare hands the experts the tokens this rank received
/// (every rank's, in rank then token order) with their global ids, weights and the local expert
/// map; finalize returns each received row's partial result to its source and sums the partials
/// of each token in rank order (float32, rounded to the dtype once). Both are collective, so
/// every rank calls them once per layer, with or without tokens. One layer call at a time.
class ExpertParallelPrepareFinalize final : public MoEPrepareFinalize {
 public:
  /// Collective: exchanges the configuration; ExpertParallelConfigError when the ranks disagree.
  ExpertParallelPrepareFinalize(std::shared_ptr<ExpertParallelTransport> transport,
                                ExpertParallelConfig config);
  ~ExpertParallelPrepareFinalize() override;

  std::string name() const override { return "expert_parallel"; }
  const ExpertPlacement& placement() const { return placement_; }
  MoEPreparedTokens prepare(const Tensor& x, const Tensor& topk_weights,
                            const Tensor& topk_ids) override;
  void finalize(const Tensor& expert_output, const Tensor& y) override;

 private:
  struct Pending;  // the dispatch plan between prepare and finalize
  std::shared_ptr<ExpertParallelTransport> transport_;
  ExpertParallelConfig config_;
  ExpertPlacement placement_;
  Tensor expert_map_;
  std::unique_ptr<Pending> pending_;
};

}  // namespace tileops
