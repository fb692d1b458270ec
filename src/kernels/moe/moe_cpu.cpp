#include "kernels/moe/moe_cpu.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "kernels/cpu/elements.h"
#include "kernels/cpu/parallel.h"

namespace tileops {
namespace {

/// The logits dtype's storage types: float32, float16, bfloat16.
template <class T>
void routing_rows(const Tensor& logits, const float* bias, float* weights, std::int32_t* ids,
                  const MoeRoutingCall& call, float scale) {
  const std::int64_t experts = call.experts;
  const std::int64_t top_k = call.top_k;
  const T* lp = logits.data<T>();
  cpu::parallel_for(call.tokens, call.tokens * experts, [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> score(static_cast<std::size_t>(experts));
    std::vector<float> choice(static_cast<std::size_t>(experts));
    std::vector<std::int32_t> order(static_cast<std::size_t>(experts));
    for (std::int64_t t = begin; t < end; ++t) {
      const T* row = lp + t * experts;
      if (call.sigmoid) {
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
      std::iota(order.begin(), order.end(), 0);
      // Descending choice score; equal scores: the smaller id first.
      std::partial_sort(order.begin(), order.begin() + top_k, order.end(),
                        [&](std::int32_t a, std::int32_t b) {
                          return choice[a] > choice[b] || (choice[a] == choice[b] && a < b);
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

void MoeRoutingCpu::forward(const Tensor& logits, const Tensor* bias, const Tensor& weights,
                            const Tensor& ids, double routed_scaling_factor) {
  const float* bp = bias != nullptr ? bias->data<float>() : nullptr;
  cpu::dispatch_float(call_.logits_dtype, "moe_routing_cpu", [&](auto tag) {
    routing_rows<decltype(tag)>(logits, bp, weights.data<float>(), ids.data<std::int32_t>(), call_,
                                static_cast<float>(routed_scaling_factor));
  });
}

void MoePrePermuteCpu::forward(const Tensor& x, const Tensor& ids, const Tensor* map,
                               const Tensor& permuted, const Tensor& offsets,
                               const Tensor& inverse) {
  const std::int64_t tokens = call_.tokens;
  const std::int64_t top_k = call_.top_k;
  const std::int64_t experts = call_.num_experts;
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
        throw SignatureError(fmt::format(
            "MoEPrePermuteFwdOp: topk_ids[{}, {}] = {} is outside the expert map of {} experts",
            p / top_k, p % top_k, g, map_size));
      }
      e = mp[g];
      if (e < -1 || e >= experts) {
        throw SignatureError(fmt::format(
            "MoEPrePermuteFwdOp: expert_map[{}] = {} is neither -1 nor a local expert in [0, {})",
            g, e, experts));
      }
    } else if (g < 0 || g >= experts) {
      throw SignatureError(
          fmt::format("MoEPrePermuteFwdOp: topk_ids[{}, {}] = {} is outside [0, {}) (num_experts)",
                      p / top_k, p % top_k, g, experts));
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
                       const Tensor& y, const MoePermuteCall& call, float scale) {
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

void MoePostPermuteCpu::forward(const Tensor& expert_out, const Tensor& weights,
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

namespace {

float silu(float g) {
  return g / (1.0f + std::exp(-g));
}
float gelu_tanh(float g) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * g * (1.0f + std::tanh(kSqrt2OverPi * (g + 0.044715f * g * g * g)));
}

template <class T>
void grouped_gemm_rows(const Tensor& a, const std::int32_t* offsets, const Tensor& b,
                       const Tensor& c, const GroupedGemmCall& call) {
  const std::int64_t rows = call.rows;
  const std::int64_t n = call.n;
  const std::int64_t k = call.k;
  const bool gated = call.activation != MoeActivation::none;
  const std::int64_t n_out = gated ? n / 2 : n;
  const T* ap = a.data<T>();
  const T* bp = b.data<T>();
  T* cp = c.data<T>();
  const std::int32_t* end_of_groups = offsets + call.experts + 1;
  cpu::parallel_for(
      rows, rows * n * std::max<std::int64_t>(k, 1), [&](std::int64_t begin, std::int64_t end) {
        std::vector<float> arow(static_cast<std::size_t>(k));
        std::vector<float> acc(static_cast<std::size_t>(n));
        for (std::int64_t r = begin; r < end; ++r) {
          T* crow = cp + r * n_out;
          // The expert of row r: the last e with offsets[e] <= r < offsets[e+1].
          const auto it = std::upper_bound(offsets, end_of_groups, static_cast<std::int32_t>(r));
          const std::int64_t e = (it - offsets) - 1;
          if (e < 0 || e >= call.experts) {
            std::fill_n(crow, n_out, cpu::from_float<T>(0.0f));
            continue;
          }
          for (std::int64_t i = 0; i < k; ++i) arow[i] = cpu::to_float(ap[r * k + i]);
          const T* be = bp + e * n * k;
          for (std::int64_t j = 0; j < n; ++j) {
            const T* brow = be + j * k;
            float s = 0;
            for (std::int64_t i = 0; i < k; ++i) s += arow[i] * cpu::to_float(brow[i]);
            acc[j] = s;
          }
          for (std::int64_t j = 0; j < n_out; ++j) {
            float v = acc[j];
            if (call.activation == MoeActivation::silu_and_mul) {
              v = silu(acc[j]) * acc[j + n_out];
            } else if (call.activation == MoeActivation::gelu_and_mul) {
              v = gelu_tanh(acc[j]) * acc[j + n_out];
            }
            crow[j] = cpu::from_float<T>(v);
          }
        }
      });
}

}  // namespace

void GroupedGemmCpu::forward(const Tensor& a, const Tensor& offsets, const Tensor& b,
                             const Tensor& c) {
  const std::int32_t* op = offsets.data<std::int32_t>();
  const std::int64_t experts = call_.experts;
  for (std::int64_t e = 0; e <= experts; ++e) {
    const bool bad = op[e] < 0 || op[e] > call_.rows || (e > 0 && op[e] < op[e - 1]);
    if (bad) {
      throw SignatureError(fmt::format(
          "MoEGroupedGemmFwdOp: expert_offsets[{}] = {} breaks 0 <= offsets[0] <= ... <= "
          "offsets[{}] <= {} (rows of a)",
          e, op[e], experts, call_.rows));
    }
  }
  cpu::dispatch_float(call_.dtype, "moe_grouped_gemm_cpu",
                      [&](auto tag) { grouped_gemm_rows<decltype(tag)>(a, op, b, c, call_); });
}

}  // namespace tileops
