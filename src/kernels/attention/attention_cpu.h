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
#include <type_traits>
#include <vector>

#include "kernels/attention/attention_cpu_amx.h"
#include "kernels/attention/attention_cpu_tiles.h"
#include "kernels/cpu/elements.h"
#include "kernels/cpu/parallel.h"
#include "tileops/kernel/attention.h"

namespace tileops::cpu {

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

/// Query rows of one task: the (query, head) pairs of up to kTaskRows / group queries of one
/// sequence and the group of query heads that share one KV head, so that each K / V tile gathered
/// serves every head of the group (GQA packing, as the CUDA kernels pack them).
inline constexpr std::int64_t kTaskRows = 128;

/// The shapes of one attention call on the CPU: q / out [total_q, heads_q, dim], lse [heads_q,
/// total_q], `batch` sequences delimited by cu_q (checked before).
struct AttentionRows {
  std::int64_t total_q = 0;
  std::int64_t batch = 0;
  std::int64_t heads_q = 0;
  std::int64_t heads_kv = 0;
  std::int64_t dim = 0;
};

/// One task: queries [i0, i1) of sequence b with the query heads of KV head g.
struct AttentionTask {
  std::int64_t b = 0;
  std::int64_t g = 0;
  std::int64_t i0 = 0;
  std::int64_t i1 = 0;
};

/// The scratch of one thread: the task's scaled query rows, the tile's key and value rows (in the
/// inputs' dtype T), the transposed K tile and the V tile in float32, the scores, the output rows
/// and each row's running max, sum and visible keys; for the AMX products (bfloat16 inputs, head
/// dims that are multiples of 32) the query rows as given, the packed K and V tiles and the
/// weights in bfloat16.
template <class T>
struct AttentionScratch {
  static constexpr bool kAmxDType = std::is_same_v<T, BFloat16>;
  bool amx = false;
  std::vector<float> q;
  std::vector<const T*> key_rows;
  std::vector<const T*> value_rows;
  std::vector<float> k_t;
  std::vector<float> v;
  std::vector<float> s;
  std::vector<float> o;
  std::vector<float> m;
  std::vector<float> l;
  std::vector<KeySpan> spans;
  std::vector<BFloat16> q16;
  std::vector<BFloat16> k_packed;
  std::vector<BFloat16> v_packed;
  std::vector<BFloat16> p16;
  explicit AttentionScratch(std::int64_t dim)
      : amx(kAmxDType && dim % 32 == 0 && attention_amx_available()),
        q(static_cast<std::size_t>(kTaskRows * dim)),
        key_rows(static_cast<std::size_t>(kTileKeys)),
        value_rows(static_cast<std::size_t>(kTileKeys)),
        k_t(static_cast<std::size_t>(dim * kTileKeys)),
        v(static_cast<std::size_t>(kTileKeys * dim)),
        s(static_cast<std::size_t>(kTaskRows * kTileKeys)),
        o(static_cast<std::size_t>(kTaskRows * dim)),
        m(static_cast<std::size_t>(kTaskRows)),
        l(static_cast<std::size_t>(kTaskRows)),
        spans(static_cast<std::size_t>(kTaskRows)) {
    if (amx) {
      q16.resize(static_cast<std::size_t>(kTaskRows * dim));
      k_packed.resize(static_cast<std::size_t>(dim * kTileKeys));
      v_packed.resize(static_cast<std::size_t>(kTileKeys * dim));
      p16.resize(static_cast<std::size_t>(kTaskRows * kTileKeys));
    }
  }
};
static_assert(kTaskRows % kAmxRows == 0, "the AMX products compute whole blocks of task rows");

/// The K and V tiles of one (sequence, KV head) packed for the AMX products once, for every task
/// of the sequence's queries to share: tile t holds keys [64 t, 64 t + 64) (zeros past the
/// sequence's keys), `finite[t]` whether its values are all finite. Empty when the (sequence, KV
/// head) has one task (its tiles are packed as it visits them).
struct PackedTiles {
  std::vector<BFloat16> k;
  std::vector<BFloat16> v;
  std::vector<char> finite;
  bool empty() const { return finite.empty(); }
};

/// Row r's scores of the tile at key k0 (n keys) as the online softmax takes them: masked to its
/// span (-inf outside), capped; the tile's maximum folded into the running max m (the row's
/// output o and sum l rescaled), the scores replaced by their weights exp(s - m), all 0 when the
/// row sees no key of the tile.
inline void softmax_row(float* s, std::int64_t k0, std::int64_t n, KeySpan span, float softcap,
                        float& m, float& l, float* o, std::int64_t dim) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const std::int64_t jb = std::max<std::int64_t>(span.begin - k0, 0);
  const std::int64_t je = std::min<std::int64_t>(span.end - k0, n);
  if (jb >= je) {
    std::fill_n(s, kTileKeys, 0.0f);
    return;
  }
  std::fill_n(s, jb, kNegInf);
  std::fill(s + je, s + kTileKeys, kNegInf);
  if (softcap > 0.0f) {
    for (std::int64_t j = jb; j < je; ++j) s[j] = softcap * std::tanh(s[j] / softcap);
  }
  const float m_new = std::max(m, tile_max(s));  // NaN skipped
  // No finite score yet: every weight is exp(-inf) = 0 against 0, never NaN from -inf - -inf.
  const float shift = m_new == kNegInf ? 0.0f : m_new;
  const float alpha = std::exp(m - shift);
  if (alpha != 1.0f) {
    l *= alpha;
    for (std::int64_t d = 0; d < dim; ++d) o[d] *= alpha;
  }
  l += exp_shifted(s, kTileKeys, shift);
  m = m_new;
}

/// One task's rows (attend_sequences): their scaled queries and spans, then the keys some row
/// sees in tiles of kTileKeys, then out and lse.
template <class T, class Keys>
void attend_task(const AttentionTask& task, const T* q, T* out, float* lse,
                 const std::int32_t* cu_q, const AttentionRows& shape,
                 const AttentionScores& scores, const Keys& keys, const PackedTiles& packed,
                 AttentionScratch<T>& x) {
  const std::int64_t dim = shape.dim;
  const std::int64_t group = shape.heads_q / shape.heads_kv;
  const std::int64_t q0 = cu_q[task.b];
  const std::int64_t sq = cu_q[task.b + 1] - q0;
  const std::int64_t sk = keys.length(task.b);
  const std::int64_t rows = (task.i1 - task.i0) * group;
  // Row r is query i0 + r / group with head g * group + r % group; at (token, head) in q and out.
  const auto at = [&](std::int64_t r) {
    return ((q0 + task.i0 + r / group) * shape.heads_q + task.g * group + r % group) * dim;
  };
  std::int64_t lo = sk;
  std::int64_t hi = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* src = q + at(r);
    if constexpr (AttentionScratch<T>::kAmxDType) {
      if (x.amx) std::copy_n(src, dim, x.q16.begin() + r * dim);  // scaled after the product
    }
    if (!x.amx) {
      for (std::int64_t d = 0; d < dim; ++d) {
        x.q[r * dim + d] = to_float(src[d]) * scores.softmax_scale;
      }
    }
    x.spans[r] = visible_keys(task.i0 + r / group, sq, sk, scores);
    if (x.spans[r].begin < x.spans[r].end) {
      lo = std::min(lo, x.spans[r].begin);
      hi = std::max(hi, x.spans[r].end);
    }
  }
  std::fill_n(x.o.begin(), rows * dim, 0.0f);
  std::fill_n(x.m.begin(), rows, -std::numeric_limits<float>::infinity());
  std::fill_n(x.l.begin(), rows, 0.0f);
  // With the sequence's tiles packed already, the tiles start at multiples of kTileKeys (the
  // masks drop the keys outside the rows' spans).
  const bool shared = x.amx && !packed.empty();
  if (shared) lo = lo / kTileKeys * kTileKeys;
  for (std::int64_t k0 = lo; k0 < hi; k0 += kTileKeys) {
    const std::int64_t n = std::min(kTileKeys, hi - k0);
    for (std::int64_t j = 0; j < n; ++j) {
      x.key_rows[j] = keys.key(task.b, k0 + j, task.g);
      x.value_rows[j] = keys.value(task.b, k0 + j, task.g);
    }
    bool values_finite = true;
    // AMX without a softcap: the scale, mask, exp and rounding to bfloat16 in one pass per row.
    const bool fused = x.amx && scores.softcap == 0.0f;
    const BFloat16* k_tile = nullptr;
    const BFloat16* v_tile = nullptr;
    if constexpr (AttentionScratch<T>::kAmxDType) {
      if (shared) {
        const std::int64_t t = k0 / kTileKeys;
        k_tile = packed.k.data() + t * dim * kTileKeys;
        v_tile = packed.v.data() + t * kTileKeys * dim;
        values_finite = packed.finite[static_cast<std::size_t>(t)] != 0;
      } else if (x.amx) {
        pack_keys_amx(x.key_rows.data(), n, dim, x.k_packed.data());
        values_finite = pack_values_amx(x.value_rows.data(), n, dim, x.v_packed.data());
        k_tile = x.k_packed.data();
        v_tile = x.v_packed.data();
      }
      if (x.amx) {
        score_tile_amx(x.q16.data(), rows, dim, k_tile, fused ? 1.0f : scores.softmax_scale,
                       x.s.data());
      }
    }
    if (!x.amx) {
      transpose_keys(x.key_rows.data(), n, dim, x.k_t.data());
      gather_values(x.value_rows.data(), n, dim, x.v.data());
      values_finite = all_finite(x.v.data(), n * dim);
      score_tile(x.q.data(), rows, dim, x.k_t.data(), x.s.data());
    }
    if (fused) {
      softmax_tile_amx(x.s.data(), rows, k0, n, x.spans.data(), scores.softmax_scale, x.m.data(),
                       x.l.data(), x.o.data(), dim, x.p16.data());
    } else {
      for (std::int64_t r = 0; r < rows; ++r) {
        softmax_row(x.s.data() + r * kTileKeys, k0, n, x.spans[r], scores.softcap, x.m[r], x.l[r],
                    x.o.data() + r * dim, dim);
      }
      if (x.amx) round_weights_amx(x.s.data(), rows, x.p16.data());
    }
    if (x.amx && values_finite) {
      accumulate_values_amx(x.p16.data(), rows, v_tile, dim, x.o.data());
    } else if (values_finite) {
      accumulate_values(x.s.data(), rows, x.v.data(), n, dim, x.o.data());
    } else {
      if (x.amx) gather_values(x.value_rows.data(), n, dim, x.v.data());
      accumulate_visible_values(x.s.data(), rows, x.v.data(), n, dim, x.o.data());
    }
  }
  for (std::int64_t r = 0; r < rows; ++r) {
    const float sum = x.l[r];
    T* dst = out + at(r);
    float& lse_row = lse[(task.g * group + r % group) * shape.total_q + q0 + task.i0 + r / group];
    if (sum == 0.0f) {  // no key
      std::fill_n(dst, dim, from_float<T>(0.0f));
      lse_row = -std::numeric_limits<float>::infinity();
      continue;
    }
    const float inv = 1.0f / sum;
    for (std::int64_t d = 0; d < dim; ++d) dst[d] = from_float<T>(x.o[r * dim + d] * inv);
    lse_row = x.m[r] + std::log(sum);
  }
}

/// The packed K / V tiles of every (sequence, KV head) whose queries make more than one task
/// (`per_task` queries each), indexed b * heads_kv + g; empty where AMX does not serve the call
/// (T not bfloat16, a head dim not a multiple of 32, no AMX) or no sequence has two tasks. Each
/// task would otherwise pack the tiles it visits again (the K transpose and the V interleave: 12%
/// of a causal 1k prefill's time with 32 tasks per KV head).
template <class T, class Keys>
std::vector<PackedTiles> pack_shared_tiles(const std::int32_t* cu_q, const AttentionRows& shape,
                                           const Keys& keys, std::int64_t per_task) {
  std::vector<PackedTiles> packed;
  if constexpr (AttentionScratch<T>::kAmxDType) {
    if (shape.dim % 32 != 0 || !attention_amx_available()) return packed;
    std::vector<std::int64_t> units;  // b * heads_kv + g of the (sequence, KV head)s to pack
    std::int64_t tiles_total = 0;
    for (std::int64_t b = 0; b < shape.batch; ++b) {
      const std::int64_t sk = keys.length(b);
      if (cu_q[b + 1] - cu_q[b] <= per_task || sk <= 0) continue;
      for (std::int64_t g = 0; g < shape.heads_kv; ++g) units.push_back(b * shape.heads_kv + g);
      tiles_total += shape.heads_kv * ((sk + kTileKeys - 1) / kTileKeys);
    }
    if (units.empty()) return packed;
    packed.resize(static_cast<std::size_t>(shape.batch * shape.heads_kv));
    const std::int64_t dim = shape.dim;
    const auto n_units = static_cast<std::int64_t>(units.size());
    parallel_for(n_units, tiles_total * kTileKeys * dim, [&](std::int64_t u0, std::int64_t u1) {
      std::vector<const BFloat16*> key_rows(static_cast<std::size_t>(kTileKeys));
      std::vector<const BFloat16*> value_rows(static_cast<std::size_t>(kTileKeys));
      for (std::int64_t u = u0; u < u1; ++u) {
        const std::int64_t unit = units[static_cast<std::size_t>(u)];
        const std::int64_t b = unit / shape.heads_kv;
        const std::int64_t g = unit % shape.heads_kv;
        const std::int64_t sk = keys.length(b);
        const std::int64_t tiles = (sk + kTileKeys - 1) / kTileKeys;
        PackedTiles& p = packed[static_cast<std::size_t>(unit)];
        p.k.resize(static_cast<std::size_t>(tiles * kTileKeys * dim));
        p.v.resize(static_cast<std::size_t>(tiles * kTileKeys * dim));
        p.finite.resize(static_cast<std::size_t>(tiles));
        for (std::int64_t t = 0; t < tiles; ++t) {
          const std::int64_t k0 = t * kTileKeys;
          const std::int64_t n = std::min(kTileKeys, sk - k0);
          for (std::int64_t j = 0; j < n; ++j) {
            key_rows[static_cast<std::size_t>(j)] = keys.key(b, k0 + j, g);
            value_rows[static_cast<std::size_t>(j)] = keys.value(b, k0 + j, g);
          }
          pack_keys_amx(key_rows.data(), n, dim, p.k.data() + k0 * dim);
          p.finite[static_cast<std::size_t>(t)] =
              pack_values_amx(value_rows.data(), n, dim, p.v.data() + k0 * dim) ? 1 : 0;
        }
      }
    });
  }
  return packed;
}

/// Every query row of every sequence over its keys, in tasks of query rows x 64-key tiles over
/// the hardware threads: scores and weighted values in float32 (score_tile, accumulate_values),
/// the online softmax per row. `keys` gives the rows in the inputs' dtype T, converted tile by
/// tile: keys.length(b) keys in sequence b, keys.key(b, j, g) and keys.value(b, j, g) the rows of
/// key j for KV head g (head_dim elements each). `work_keys` estimates the keys of a row (for the
/// parallel split only). A row that sees no key gets out 0 and lse -inf; a NaN score makes its row
/// NaN.
template <class T, class Keys>
void attend_sequences(const T* q, T* out, float* lse, const std::int32_t* cu_q,
                      const AttentionRows& shape, const AttentionScores& scores, const Keys& keys,
                      std::int64_t work_keys) {
  const std::int64_t per_task =
      std::max<std::int64_t>(1, kTaskRows / (shape.heads_q / shape.heads_kv));
  std::vector<AttentionTask> tasks;
  for (std::int64_t b = 0; b < shape.batch; ++b) {
    const std::int64_t sq = cu_q[b + 1] - cu_q[b];
    for (std::int64_t g = 0; g < shape.heads_kv; ++g) {
      for (std::int64_t i0 = 0; i0 < sq; i0 += per_task) {
        tasks.push_back({b, g, i0, std::min(sq, i0 + per_task)});
      }
    }
  }
  const auto n_tasks = static_cast<std::int64_t>(tasks.size());
  const std::int64_t work =
      shape.total_q * shape.heads_q * shape.dim * std::max<std::int64_t>(1, work_keys);
  const std::vector<PackedTiles> packed = pack_shared_tiles<T>(cu_q, shape, keys, per_task);
  const PackedTiles none;
  const auto packed_for = [&](const AttentionTask& task) -> const PackedTiles& {
    return packed.empty() ? none
                          : packed[static_cast<std::size_t>(task.b * shape.heads_kv + task.g)];
  };
  // Lane k takes tasks k, k + lanes, ...: the threads' shares mix cheap and costly tasks (a causal
  // sequence's late queries see more keys than its early ones).
  const std::int64_t lanes = std::min<std::int64_t>(64, n_tasks);
  parallel_for(lanes, work, [&](std::int64_t lane_begin, std::int64_t lane_end) {
    AttentionScratch<T> x(shape.dim);
    for (std::int64_t lane = lane_begin; lane < lane_end; ++lane) {
      for (std::int64_t t = lane; t < n_tasks; t += lanes) {
        const AttentionTask& task = tasks[static_cast<std::size_t>(t)];
        attend_task(task, q, out, lse, cu_q, shape, scores, keys, packed_for(task), x);
      }
    }
  });
}

/// Throws SignatureError unless cu (entries = batch + 1 values) starts at 0, never decreases and
/// ends at `total`; the message names the first offending entry, e.g.
/// "GroupedQueryAttentionVarlenFwdOp: cu_seqlens_q[2] = 3 breaks 0 = cu_seqlens_q[0] <= ... <=
/// cu_seqlens_q[3] = 8 (Tq, the tokens of q)".
void check_cu_seqlens(std::string_view op, std::string_view name, const std::int32_t* cu,
                      std::int64_t entries, std::int64_t total, std::string_view total_name);

}  // namespace tileops::cpu
