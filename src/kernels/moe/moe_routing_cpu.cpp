// The CPU implementation of top-k routing (moe_routing_impls.h): softmax or sigmoid scores, the
// correction bias, DeepSeek-V3's group-limited selection, renormalization and scaling, a token per
// thread chunk (manifest/moe.yaml, MoETopKRoutingFwdOp, defines the values).
#include "kernels/moe/moe_routing_impls.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "kernels/cpu/elements.h"
#include "kernels/cpu/parallel.h"
#include "kernels/moe/moe_routing_order.h"

namespace tileops {
namespace {

/// Clears `candidate` for the experts outside the call's kept groups (manifest/moe.yaml): a
/// group scores the sum of its two largest choice scores with a bias, its largest without;
/// the topk_group largest scores are kept, equal scores the smaller group index first.
void keep_best_groups(const MoERoutingCall& call, const std::vector<float>& choice,
                      std::vector<float>& group_score, std::vector<std::int32_t>& groups,
                      std::vector<char>& candidate) {
  const std::int64_t size = call.experts / call.n_group;
  for (std::int64_t g = 0; g < call.n_group; ++g) {
    float first = -INFINITY;
    float second = -INFINITY;
    for (std::int64_t e = g * size; e < (g + 1) * size; ++e) {
      if (moe_routing::ranks_before(choice[e], first)) {
        second = first;
        first = choice[e];
      } else if (moe_routing::ranks_before(choice[e], second)) {
        second = choice[e];
      }
    }
    group_score[g] = call.has_bias ? first + second : first;
  }
  std::iota(groups.begin(), groups.end(), 0);
  std::partial_sort(groups.begin(), groups.begin() + call.topk_group, groups.end(),
                    [&](std::int32_t a, std::int32_t b) {
                      return moe_routing::ranks_before(group_score[a], group_score[b]) ||
                             (!moe_routing::ranks_before(group_score[b], group_score[a]) && a < b);
                    });
  std::fill(candidate.begin(), candidate.end(), char{0});
  for (std::int64_t i = 0; i < call.topk_group; ++i) {
    std::fill_n(candidate.begin() + groups[i] * size, size, char{1});
  }
}

/// The logits dtype's storage types: float32, float16, bfloat16.
template <class T>
void routing_rows(const Tensor& logits, const float* bias, float* weights, std::int32_t* ids,
                  const MoERoutingCall& call, float scale) {
  const std::int64_t experts = call.experts;
  const std::int64_t top_k = call.top_k;
  const T* lp = logits.data<T>();
  cpu::parallel_for(call.tokens, call.tokens * experts, [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> score(static_cast<std::size_t>(experts));
    std::vector<float> choice(static_cast<std::size_t>(experts));
    std::vector<std::int32_t> order(static_cast<std::size_t>(experts));
    const bool grouped = call.n_group > 1;
    std::vector<float> group_score(static_cast<std::size_t>(call.n_group));
    std::vector<std::int32_t> groups(static_cast<std::size_t>(call.n_group));
    std::vector<char> candidate(static_cast<std::size_t>(experts), char{1});
    for (std::int64_t t = begin; t < end; ++t) {
      const T* row = lp + t * experts;
      if (call.scoring == MoEScoring::sigmoid) {
        for (std::int64_t e = 0; e < experts; ++e) {
          score[e] = 1.0f / (1.0f + std::exp(-cpu::to_float(row[e])));
        }
      } else {
        float peak = -INFINITY;
        for (std::int64_t e = 0; e < experts; ++e) peak = std::max(peak, cpu::to_float(row[e]));
        float sum = 0;
        for (std::int64_t e = 0; e < experts; ++e) {
          score[e] = std::exp(cpu::to_float(row[e]) - peak);
          sum += score[e];
        }
        for (std::int64_t e = 0; e < experts; ++e) score[e] /= sum;
      }
      for (std::int64_t e = 0; e < experts; ++e) {
        choice[e] = score[e] + (bias != nullptr ? bias[e] : 0.0f);
      }
      // Candidates in id order; without groups, every expert.
      auto last = order.begin();
      if (grouped) {
        keep_best_groups(call, choice, group_score, groups, candidate);
        for (std::int32_t e = 0; e < experts; ++e) {
          if (candidate[e] != 0) *last++ = e;
        }
      } else {
        std::iota(order.begin(), order.end(), 0);
        last = order.end();
      }
      // Descending choice score (NaN first); equal scores: the smaller id first.
      std::partial_sort(order.begin(), order.begin() + top_k, last,
                        [&](std::int32_t a, std::int32_t b) {
                          return moe_routing::ranks_before(choice[a], choice[b]) ||
                                 (!moe_routing::ranks_before(choice[b], choice[a]) && a < b);
                        });
      float total = 0;
      for (std::int64_t k = 0; k < top_k; ++k) total += score[order[k]];
      for (std::int64_t k = 0; k < top_k; ++k) {
        float w = score[order[k]];
        if (call.renormalize) w /= total;
        weights[t * top_k + k] = w * scale;
        ids[t * top_k + k] = order[k];
      }
    }
  });
}

}  // namespace

void MoERoutingCpu::forward(const Tensor& logits, const Tensor* bias, const Tensor& weights,
                            const Tensor& ids, double routed_scaling_factor) {
  const float* bp = bias != nullptr ? bias->data<float>() : nullptr;
  cpu::dispatch_float(call_.logits_dtype, "moe_routing_cpu", [&](auto tag) {
    routing_rows<decltype(tag)>(logits, bp, weights.data<float>(), ids.data<std::int32_t>(), call_,
                                static_cast<float>(routed_scaling_factor));
  });
}

}  // namespace tileops
