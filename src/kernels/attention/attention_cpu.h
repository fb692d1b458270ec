// Internal: the attention arithmetic of the CPU implementations, shared by the varlen and the
// paged ops (keys are read through accessors, so a paged cache serves as well as a packed
// tensor): which keys a query sees, the online softmax over them, the loop over every sequence
// and query head (attend_sequences), and the check of the cu_seqlens contents.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string_view>
#include <vector>

#include "kernels/cpu/elements.h"
#include "kernels/cpu/parallel.h"
#include "tileops/kernel/attention.h"

namespace tileops::cpu {

/// Keys [begin, end) of a sequence.
struct KeySpan {
  std::int64_t begin = 0;
  std::int64_t end = 0;
};

/// The keys query i of a sequence of sq queries over sk keys sees (the contract's mask, causal
/// aligned bottom-right): an empty span when it sees none.
inline KeySpan visible_keys(std::int64_t i, std::int64_t sq, std::int64_t sk,
                            const AttentionScores& scores) {
  const std::int64_t diagonal = i + sk - sq;
  const std::int64_t end = scores.causal ? std::min(sk, diagonal + 1) : sk;
  const std::int64_t begin =
      scores.window_left >= 0 ? std::max<std::int64_t>(0, diagonal - scores.window_left) : 0;
  return {begin, std::max(begin, end)};
}

/// a . b over n floats, with eight partial sums (vectorized without reassociation flags).
inline float dot(const float* a, const float* b, std::int64_t n) {
  float s[8] = {};
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l) s[l] += a[i + l] * b[i + l];
  }
  float tail = 0.0f;
  for (; i < n; ++i) tail += a[i] * b[i];
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])) + tail;
}

/// Keys scored at once by attend_row: the online softmax rescales once per block.
inline constexpr std::int64_t kKeyBlock = 64;

/// One query row over the keys `keys`: q_scaled is the query times softmax_scale (float32,
/// head_dim), key(j) and value(j) return float32 rows of head_dim. Scores in float32, the running
/// max, the sum of exponentials and the weighted values in double (acc: head_dim doubles of
/// scratch). Writes out(d, value) for each d and returns the lse: -inf, and out 0, when the span
/// is empty.
template <class KeyRow, class ValueRow, class Out>
double attend_row(const float* q_scaled, std::int64_t head_dim, KeySpan keys, float softcap,
                  KeyRow&& key, ValueRow&& value, double* acc, Out&& out) {
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  std::fill_n(acc, head_dim, 0.0);
  double running_max = kNegInf;
  double sum = 0.0;
  float block[kKeyBlock];
  for (std::int64_t start = keys.begin; start < keys.end; start += kKeyBlock) {
    const std::int64_t n = std::min(kKeyBlock, keys.end - start);
    float block_max = -std::numeric_limits<float>::infinity();
    for (std::int64_t j = 0; j < n; ++j) {
      float s = dot(q_scaled, key(start + j), head_dim);
      if (softcap > 0.0f) s = softcap * std::tanh(s / softcap);
      block[j] = s;
      block_max = std::max(block_max, s);
    }
    if (block_max > running_max) {
      const double rescale = std::exp(running_max - static_cast<double>(block_max));
      sum *= rescale;
      for (std::int64_t d = 0; d < head_dim; ++d) acc[d] *= rescale;
      running_max = block_max;
    }
    for (std::int64_t j = 0; j < n; ++j) {
      const double p = std::exp(static_cast<double>(block[j]) - running_max);
      sum += p;
      const float* v = value(start + j);
      for (std::int64_t d = 0; d < head_dim; ++d) acc[d] += p * static_cast<double>(v[d]);
    }
  }
  if (sum == 0.0) {  // no key (a NaN score propagates instead)
    for (std::int64_t d = 0; d < head_dim; ++d) out(d, 0.0);
    return kNegInf;
  }
  for (std::int64_t d = 0; d < head_dim; ++d) out(d, acc[d] / sum);
  return running_max + std::log(sum);
}

/// The shapes of one attention call on the CPU: q / out [total_q, heads_q, dim], lse [heads_q,
/// total_q], `batch` sequences delimited by cu_q (checked before).
struct AttentionRows {
  std::int64_t total_q = 0;
  std::int64_t batch = 0;
  std::int64_t heads_q = 0;
  std::int64_t heads_kv = 0;
  std::int64_t dim = 0;
};

/// Every query row of every sequence over its keys: one task per (sequence, query head) over the
/// hardware threads, each row an online softmax (attend_row). `keys` gives the float32 rows:
/// keys.length(b) keys in sequence b, keys.key(b, j, g) and keys.value(b, j, g) the rows of key j
/// for KV head g (head_dim floats each). `work_keys` estimates the keys of a row (for the
/// parallel split only).
template <class T, class Keys>
void attend_sequences(const T* q, T* out, float* lse, const std::int32_t* cu_q,
                      const AttentionRows& shape, const AttentionScores& scores, const Keys& keys,
                      std::int64_t work_keys) {
  const std::int64_t dim = shape.dim;
  const std::int64_t heads_q = shape.heads_q;
  const std::int64_t group = heads_q / shape.heads_kv;
  const std::int64_t work = shape.total_q * heads_q * dim * std::max<std::int64_t>(1, work_keys);
  parallel_for(shape.batch * heads_q, work, [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> q_scaled(static_cast<std::size_t>(dim));
    std::vector<double> acc(static_cast<std::size_t>(dim));
    for (std::int64_t task = begin; task < end; ++task) {
      const std::int64_t b = task / heads_q;
      const std::int64_t h = task % heads_q;
      const std::int64_t g = h / group;
      const std::int64_t q0 = cu_q[b];
      const std::int64_t sq = cu_q[b + 1] - q0;
      const std::int64_t sk = keys.length(b);
      const auto key = [&](std::int64_t j) { return keys.key(b, j, g); };
      const auto value = [&](std::int64_t j) { return keys.value(b, j, g); };
      for (std::int64_t i = 0; i < sq; ++i) {
        const std::int64_t row = ((q0 + i) * heads_q + h) * dim;
        for (std::int64_t d = 0; d < dim; ++d) {
          q_scaled[d] = to_float(q[row + d]) * scores.softmax_scale;
        }
        T* out_row = out + row;
        const double l = attend_row(
            q_scaled.data(), dim, visible_keys(i, sq, sk, scores), scores.softcap, key, value,
            acc.data(),
            [&](std::int64_t d, double x) { out_row[d] = from_float<T>(static_cast<float>(x)); });
        lse[h * shape.total_q + q0 + i] = static_cast<float>(l);
      }
    }
  });
}

/// The n values at p as float32.
template <class T>
std::vector<float> as_float(const T* p, std::int64_t n) {
  std::vector<float> f(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) f[static_cast<std::size_t>(i)] = to_float(p[i]);
  return f;
}

/// Throws SignatureError unless cu (entries = batch + 1 values) starts at 0, never decreases and
/// ends at `total`; the message names the first offending entry, e.g.
/// "GroupedQueryAttentionVarlenFwdOp: cu_seqlens_q[2] = 3 breaks 0 = cu_seqlens_q[0] <= ... <=
/// cu_seqlens_q[3] = 8 (Tq, the tokens of q)".
void check_cu_seqlens(std::string_view op, std::string_view name, const std::int32_t* cu,
                      std::int64_t entries, std::int64_t total, std::string_view total_name);

}  // namespace tileops::cpu
