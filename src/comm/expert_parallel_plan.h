// Internal: the index arithmetic of expert-parallel dispatch and combine, on host vectors
// (docs/design/expert-parallel.md § Protocol). Pure functions, tested on hand-checked cases.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "tileops/ops/moe_expert_parallel.h"

namespace tileops::expert_parallel {

/// Which rows a rank sends where, and how the rows that come back combine per token.
struct DispatchPlan {
  /// Rows sent to each rank: one per (token, rank holding at least one of its experts).
  std::vector<std::int64_t> send_counts;
  /// [world_size + 1] prefix sums of send_counts: rank p's rows are [send_offsets[p], [p + 1]).
  std::vector<std::int64_t> send_offsets;
  /// The source token of each send row: grouped by destination rank, token order within.
  std::vector<std::int64_t> send_tokens;
  /// [tokens + 1]: token t's send rows are token_rows[token_offsets[t] .. token_offsets[t + 1]),
  /// in rank order. A returned row comes back at its send row's index.
  std::vector<std::int64_t> token_offsets;
  std::vector<std::int64_t> token_rows;
};

/// The plan for `ids` ([tokens, top_k] global expert ids, row-major). SignatureError for an id
/// outside [0, num_experts).
DispatchPlan plan_dispatch(std::span<const std::int32_t> ids, std::int64_t tokens,
                           std::int64_t top_k, const ExpertPlacement& placement);

/// [world_size + 1] prefix sums of `counts`.
std::vector<std::int64_t> prefix_offsets(std::span<const std::int64_t> counts);

/// Combine in float32: out[t] = sum over token t's rows r, in rank order, of returned[r]
/// ([send rows, hidden]); a token with no rows gets zeros.
void combine_rows(std::span<const float> returned, std::int64_t hidden, const DispatchPlan& plan,
                  std::span<float> out);

}  // namespace tileops::expert_parallel
