// The index arithmetic of expert-parallel dispatch and combine (expert_parallel_plan.h).
#include "comm/expert_parallel_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace tileops {

void ExpertPlacement::validate() const {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    throw UsageError(fmt::format("ExpertPlacement: rank {} is outside a group of world size {}",
                                 rank, world_size));
  }
  if (num_experts < 1 || num_experts % world_size != 0) {
    throw UsageError(fmt::format(
        "ExpertPlacement: {} experts cannot be split evenly over {} ranks (experts_per_rank = "
        "E / world_size must be a whole number)",
        num_experts, world_size));
  }
}

std::vector<std::int32_t> ExpertPlacement::expert_map() const {
  std::vector<std::int32_t> map(static_cast<std::size_t>(num_experts), -1);
  const std::int64_t first = rank * experts_per_rank();
  for (std::int64_t local = 0; local < experts_per_rank(); ++local) {
    map[static_cast<std::size_t>(first + local)] = static_cast<std::int32_t>(local);
  }
  return map;
}

namespace expert_parallel {

std::vector<std::int64_t> prefix_offsets(std::span<const std::int64_t> counts) {
  std::vector<std::int64_t> offsets(counts.size() + 1, 0);
  std::partial_sum(counts.begin(), counts.end(), offsets.begin() + 1);
  return offsets;
}

DispatchPlan plan_dispatch(std::span<const std::int32_t> ids, std::int64_t tokens,
                           std::int64_t top_k, const ExpertPlacement& placement) {
  placement.validate();
  const auto ranks = static_cast<std::size_t>(placement.world_size);
  // goes[t * ranks + p]: token t has at least one expert on rank p (a token is sent once per rank,
  // however many of its experts live there).
  std::vector<char> goes(static_cast<std::size_t>(tokens) * ranks, 0);
  for (std::int64_t t = 0; t < tokens; ++t) {
    for (std::int64_t k = 0; k < top_k; ++k) {
      const std::int32_t e = ids[static_cast<std::size_t>(t * top_k + k)];
      if (e < 0 || e >= placement.num_experts) {
        throw SignatureError(fmt::format(
            "ExpertParallelPrepareFinalize: topk_ids[{}, {}] = {} is not an expert id in [0, {})",
            t, k, e, placement.num_experts));
      }
      goes[static_cast<std::size_t>(t) * ranks + static_cast<std::size_t>(placement.owner(e))] = 1;
    }
  }
  DispatchPlan plan;
  plan.send_counts.assign(ranks, 0);
  for (std::size_t i = 0; i < goes.size(); ++i) plan.send_counts[i % ranks] += goes[i];
  plan.send_offsets = prefix_offsets(plan.send_counts);
  plan.send_tokens.resize(static_cast<std::size_t>(plan.send_offsets.back()));
  plan.token_offsets.assign(static_cast<std::size_t>(tokens) + 1, 0);
  plan.token_rows.reserve(plan.send_tokens.size());
  std::vector<std::int64_t> next(plan.send_offsets.begin(), plan.send_offsets.end() - 1);
  for (std::int64_t t = 0; t < tokens; ++t) {
    for (std::size_t p = 0; p < ranks; ++p) {
      if (goes[static_cast<std::size_t>(t) * ranks + p] == 0) continue;
      const std::int64_t row = next[p]++;
      plan.send_tokens[static_cast<std::size_t>(row)] = t;
      plan.token_rows.push_back(row);
    }
    plan.token_offsets[static_cast<std::size_t>(t) + 1] =
        static_cast<std::int64_t>(plan.token_rows.size());
  }
  return plan;
}

void combine_rows(std::span<const float> returned, std::int64_t hidden, const DispatchPlan& plan,
                  std::span<float> out) {
  std::fill(out.begin(), out.end(), 0.0f);
  const auto tokens = static_cast<std::int64_t>(plan.token_offsets.size()) - 1;
  for (std::int64_t t = 0; t < tokens; ++t) {
    float* const dst = out.data() + t * hidden;
    for (std::int64_t i = plan.token_offsets[t]; i < plan.token_offsets[t + 1]; ++i) {
      const float* const src = returned.data() + plan.token_rows[i] * hidden;
      for (std::int64_t h = 0; h < hidden; ++h) dst[h] += src[h];
    }
  }
}

}  // namespace expert_parallel
}  // namespace tileops
