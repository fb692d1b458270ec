// The CPU implementations of the pre-permute (group the (token, k) pairs by expert, gather the
// rows) and the post-permute (weighted sum back to the tokens) (moe_permute_impls.h); they check
// the ids, the map and the inverse they read (manifest/moe.yaml defines the values).
#include "kernels/moe/moe_permute_impls.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/cpu/elements.h"
#include "kernels/cpu/parallel.h"

namespace tileops {

std::vector<std::int64_t> pre_permute_rows_cpu(const MoEPermuteCall& call, std::string_view op_name,
                                               const Tensor& ids, const Tensor* map,
                                               const Tensor& offsets, const Tensor& inverse) {
  const std::int64_t tokens = call.tokens;
  const std::int64_t top_k = call.top_k;
  const std::int64_t experts = call.num_experts;
  const std::int64_t pairs = tokens * top_k;
  const std::int32_t* idp = ids.data<std::int32_t>();
  const std::int32_t* mp = map != nullptr ? map->data<std::int32_t>() : nullptr;
  const std::int64_t map_size = map != nullptr ? map->numel() : 0;
  // Local expert of every pair (-1: dropped), checked.
  std::vector<std::int32_t> local(static_cast<std::size_t>(pairs));
  std::vector<std::int64_t> count(static_cast<std::size_t>(experts) + 1, 0);
  for (std::int64_t p = 0; p < pairs; ++p) {
    const std::int32_t g = idp[p];
    std::int32_t e = g;
    if (mp != nullptr) {
      if (g < 0 || g >= map_size) {
        throw SignatureError(
            fmt::format("{}: topk_ids[{}, {}] = {} is outside the expert map of {} experts",
                        op_name, p / top_k, p % top_k, g, map_size));
      }
      e = mp[g];
      if (e < -1 || e >= experts) {
        throw SignatureError(
            fmt::format("{}: expert_map[{}] = {} is neither -1 nor a local expert in [0, {})",
                        op_name, g, e, experts));
      }
    } else if (g < 0 || g >= experts) {
      throw SignatureError(fmt::format("{}: topk_ids[{}, {}] = {} is outside [0, {}) (num_experts)",
                                       op_name, p / top_k, p % top_k, g, experts));
    }
    local[p] = e;
    if (e >= 0) ++count[e + 1];
  }
  std::int32_t* op = offsets.data<std::int32_t>();
  std::vector<std::int64_t> next(static_cast<std::size_t>(experts));
  std::int64_t running = 0;
  for (std::int64_t e = 0; e < experts; ++e) {
    op[e] = static_cast<std::int32_t>(running);
    next[e] = running;
    running += count[e + 1];
  }
  op[experts] = static_cast<std::int32_t>(running);
  // Stable: pairs are visited in flat order, each taking the next row of its expert.
  std::int32_t* ip = inverse.data<std::int32_t>();
  std::vector<std::int64_t> source(static_cast<std::size_t>(running));
  for (std::int64_t p = 0; p < pairs; ++p) {
    if (local[p] < 0) {
      ip[p] = -1;
      continue;
    }
    const std::int64_t row = next[local[p]]++;
    ip[p] = static_cast<std::int32_t>(row);
    source[row] = p / top_k;
  }
  return source;
}

void MoEPrePermuteCpu::forward(const Tensor& x, const Tensor& ids, const Tensor* map,
                               const Tensor& permuted, const Tensor& offsets,
                               const Tensor& inverse) {
  const std::vector<std::int64_t> source =
      pre_permute_rows_cpu(call_, op_name_, ids, map, offsets, inverse);
  const auto running = static_cast<std::int64_t>(source.size());
  const std::int64_t pairs = call_.tokens * call_.top_k;
  const std::int64_t hidden = call_.hidden;
  const std::size_t row_bytes = static_cast<std::size_t>(hidden) * element_size(x.dtype());
  const auto* xp = static_cast<const std::byte*>(x.data_ptr());
  auto* pp = static_cast<std::byte*>(permuted.data_ptr());
  cpu::parallel_for(pairs, pairs * hidden, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      if (r < running) {
        std::copy_n(xp + source[r] * row_bytes, row_bytes, pp + r * row_bytes);
      } else {
        std::fill_n(pp + r * row_bytes, row_bytes, std::byte{0});
      }
    }
  });
}

namespace {

template <class T>
void post_permute_rows(const Tensor& expert_out, const float* wp, const std::int32_t* ip,
                       const Tensor& y, const MoEPermuteCall& call, float scale) {
  const std::int64_t hidden = call.hidden;
  const std::int64_t top_k = call.top_k;
  const T* ep = expert_out.data<T>();
  T* yp = y.data<T>();
  cpu::parallel_for(call.tokens, call.tokens * top_k * hidden,
                    [&](std::int64_t begin, std::int64_t end) {
                      std::vector<float> acc(static_cast<std::size_t>(hidden));
                      for (std::int64_t t = begin; t < end; ++t) {
                        std::fill(acc.begin(), acc.end(), 0.0f);
                        for (std::int64_t k = 0; k < top_k; ++k) {
                          const std::int32_t r = ip[t * top_k + k];
                          if (r < 0) continue;
                          const float w = wp[t * top_k + k];
                          const T* src = ep + static_cast<std::int64_t>(r) * hidden;
                          for (std::int64_t h = 0; h < hidden; ++h) {
                            acc[h] += w * cpu::to_float(src[h]);
                          }
                        }
                        for (std::int64_t h = 0; h < hidden; ++h) {
                          yp[t * hidden + h] = cpu::from_float<T>(scale * acc[h]);
                        }
                      }
                    });
}

}  // namespace

void MoEPostPermuteCpu::forward(const Tensor& expert_out, const Tensor& weights,
                                const Tensor& inverse, const Tensor& y, double scale) {
  const std::int32_t* ip = inverse.data<std::int32_t>();
  const std::int64_t pairs = call_.tokens * call_.top_k;
  for (std::int64_t p = 0; p < pairs; ++p) {
    if (ip[p] < -1 || ip[p] >= call_.rows) {
      throw SignatureError(fmt::format(
          "MoEPostPermuteFwdOp: inverse[{}, {}] = {} is neither -1 nor a row of expert_out in "
          "[0, {})",
          p / call_.top_k, p % call_.top_k, ip[p], call_.rows));
    }
  }
  cpu::dispatch_float(call_.dtype, "moe_post_permute_cpu", [&](auto tag) {
    post_permute_rows<decltype(tag)>(expert_out, weights.data<float>(), ip, y, call_,
                                     static_cast<float>(scale));
  });
}

}  // namespace tileops
