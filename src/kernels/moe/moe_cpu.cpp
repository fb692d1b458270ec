#include "kernels/moe/moe_impls.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <type_traits>
#include <vector>

#include "kernels/cpu/elements.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/parallel.h"
#include "kernels/moe/moe_activation_cpu.h"
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

void MoEPrePermuteCpu::forward(const Tensor& x, const Tensor& ids, const Tensor* map,
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
        throw SignatureError(
            fmt::format("{}: topk_ids[{}, {}] = {} is outside the expert map of {} experts",
                        op_name_, p / top_k, p % top_k, g, map_size));
      }
      e = mp[g];
      if (e < -1 || e >= experts) {
        throw SignatureError(
            fmt::format("{}: expert_map[{}] = {} is neither -1 nor a local expert in [0, {})",
                        op_name_, g, e, experts));
      }
    } else if (g < 0 || g >= experts) {
      throw SignatureError(fmt::format("{}: topk_ids[{}, {}] = {} is outside [0, {}) (num_experts)",
                                       op_name_, p / top_k, p % top_k, g, experts));
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

namespace {

using moe_cpu::gelu_tanh;
using moe_cpu::silu;

/// Groups of fewer rows than this multiply their expert's weights row by row, converting each
/// weight row once into a small buffer: a converted copy of the weights for OpenBLAS would move
/// several times the weights' bytes for little arithmetic.
constexpr std::int64_t kBlasMinRows = 16;

/// dst[i] = float(src[i]) for rows [0, rows) of `cols` elements (leading dimension ld_src),
/// threaded over rows.
template <class T>
void to_float_rows(const T* src, std::int64_t ld_src, std::int64_t rows, std::int64_t cols,
                   float* dst) {
  cpu::parallel_for(rows, rows * cols, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const T* s = src + r * ld_src;
      float* d = dst + r * cols;
      for (std::int64_t i = 0; i < cols; ++i) d[i] = cpu::to_float(s[i]);
    }
  });
}

[[gnu::always_inline]] inline float dot(const float* a, const float* b, std::int64_t k) {
  // Eight independent sums, which the compiler keeps in vector registers.
  float acc[8] = {};
  std::int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    for (int l = 0; l < 8; ++l) acc[l] += a[i + l] * b[i + l];
  }
  for (; i < k; ++i) acc[0] += a[i] * b[i];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/// acc[r * n] = a[r] . float(bj) for the m rows of a; brow is scratch of k floats.
template <class T>
[[gnu::always_inline]] inline void weight_row_dots(const float* a, std::int64_t m, const T* bj,
                                                   std::int64_t k, float* brow, float* acc,
                                                   std::int64_t n) {
  for (std::int64_t i = 0; i < k; ++i) brow[i] = cpu::to_float(bj[i]);
  for (std::int64_t r = 0; r < m; ++r) acc[r * n] = dot(a + r * k, brow, k);
}

TILEOPS_CPU_CLONES void dots_of(const float* a, std::int64_t m, const Half* bj, std::int64_t k,
                                float* brow, float* acc, std::int64_t n) {
  weight_row_dots(a, m, bj, k, brow, acc, n);
}
TILEOPS_CPU_CLONES void dots_of(const float* a, std::int64_t m, const BFloat16* bj, std::int64_t k,
                                float* brow, float* acc, std::int64_t n) {
  weight_row_dots(a, m, bj, k, brow, acc, n);
}
TILEOPS_CPU_CLONES void dots_of(const float* a, std::int64_t m, const float* bj, std::int64_t k,
                                float* brow, float* acc, std::int64_t n) {
  weight_row_dots(a, m, bj, k, brow, acc, n);
}

/// acc[m, n] = a[m, k] * b[n, k]^T for a few rows: threaded over the weight rows, each converted
/// to float once.
template <class T>
void few_rows_gemm(const float* a, std::int64_t m, const T* b, std::int64_t n, std::int64_t k,
                   float* acc) {
  cpu::parallel_for(n, m * n * k, [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> brow(static_cast<std::size_t>(k));
    for (std::int64_t j = begin; j < end; ++j) dots_of(a, m, b + j * k, k, brow.data(), acc + j, n);
  });
}

/// c rows = the activation of the accumulators acc[m, n], in T.
template <class T>
void finish_rows(const float* acc, std::int64_t m, std::int64_t n, MoEActivation activation, T* c) {
  const bool gated = activation != MoEActivation::none;
  const std::int64_t n_out = gated ? n / 2 : n;
  cpu::parallel_for(m, m * n, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const float* ar = acc + r * n;
      T* cr = c + r * n_out;
      for (std::int64_t j = 0; j < n_out; ++j) {
        float v = ar[j];
        if (activation == MoEActivation::silu_and_mul) {
          v = silu(ar[j]) * ar[j + n_out];
        } else if (activation == MoEActivation::gelu_and_mul) {
          v = gelu_tanh(ar[j]) * ar[j + n_out];
        }
        cr[j] = cpu::from_float<T>(v);
      }
    }
  });
}

/// Expert by expert: the group's rows times the expert's weights, by OpenBLAS's sgemm (inputs
/// converted to float first when they are 16-bit) or, for a group of a few rows, by
/// few_rows_gemm; then the activation. Rows outside every group are zero.
template <class T>
void grouped_gemm_rows(const Tensor& a, const std::int32_t* offsets, const Tensor& b,
                       const Tensor& c, const GroupedGemmCall& call) {
  const std::int64_t n = call.n;
  const std::int64_t k = call.k;
  const std::int64_t n_out = call.activation != MoEActivation::none ? n / 2 : n;
  const T* ap = a.data<T>();
  const T* bp = b.data<T>();
  T* cp = c.data<T>();
  std::fill_n(cp, offsets[0] * n_out, cpu::from_float<T>(0.0f));
  std::fill_n(cp + offsets[call.experts] * n_out, (call.rows - offsets[call.experts]) * n_out,
              cpu::from_float<T>(0.0f));
  std::vector<float> a_float;
  std::vector<float> b_float;
  std::vector<float> acc;
  for (std::int64_t e = 0; e < call.experts; ++e) {
    const std::int64_t first = offsets[e];
    const std::int64_t m = offsets[e + 1] - first;
    if (m == 0) continue;
    acc.resize(static_cast<std::size_t>(m * n));
    const float* a_rows = nullptr;
    if constexpr (std::is_same_v<T, float>) {
      a_rows = ap + first * k;
    } else {
      a_float.resize(static_cast<std::size_t>(m * k));
      to_float_rows(ap + first * k, k, m, k, a_float.data());
      a_rows = a_float.data();
    }
    const T* be = bp + e * n * k;
    if (k == 0) {
      std::fill(acc.begin(), acc.end(), 0.0f);
    } else if (m < kBlasMinRows) {
      few_rows_gemm(a_rows, m, be, n, k, acc.data());
    } else {
      const float* b_rows = nullptr;
      if constexpr (std::is_same_v<T, float>) {
        b_rows = be;
      } else {
        b_float.resize(static_cast<std::size_t>(n * k));
        to_float_rows(be, k, n, k, b_float.data());
        b_rows = b_float.data();
      }
      cpu::gemm_abt(m, n, k, a_rows, k, b_rows, k, acc.data(), n);
    }
    finish_rows(acc.data(), m, n, call.activation, cp + first * n_out);
  }
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
