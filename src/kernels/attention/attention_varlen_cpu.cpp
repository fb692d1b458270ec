// The varlen attention forward on the CPU: the cu_seqlens contents checked, then the shared loop
// over the sequences and query heads (attention_cpu.h, attend_sequences) over the packed keys,
// which it converts to float32 tile by tile.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

#include "kernels/attention/attention_cpu.h"
#include "kernels/attention/attention_impls.h"

namespace tileops {

void cpu::check_cu_seqlens(std::string_view op, std::string_view name, const std::int32_t* cu,
                           std::int64_t entries, std::int64_t total, std::string_view total_name) {
  const std::int64_t last = entries - 1;
  for (std::int64_t e = 0; e <= last; ++e) {
    const bool bad = (e == 0 && cu[0] != 0) || (e > 0 && cu[e] < cu[e - 1]) || cu[e] > total ||
                     (e == last && cu[e] != total);
    if (bad) {
      throw SignatureError(
          fmt::format("{}: {}[{}] = {} breaks 0 = {}[0] <= ... <= {}[{}] = {} ({})", op, name, e,
                      cu[e], name, name, last, total, total_name));
    }
  }
}

namespace {

constexpr std::string_view kOp = "GroupedQueryAttentionVarlenFwdOp";

/// The keys of sequence b: rows cu_k[b] .. cu_k[b + 1] of the packed k and v.
template <class T>
struct PackedKeys {
  const T* k;
  const T* v;
  const std::int32_t* cu_k;
  std::int64_t heads_kv;
  std::int64_t dim;
  std::int64_t length(std::int64_t b) const { return cu_k[b + 1] - cu_k[b]; }
  const T* key(std::int64_t b, std::int64_t j, std::int64_t g) const {
    return k + ((cu_k[b] + j) * heads_kv + g) * dim;
  }
  const T* value(std::int64_t b, std::int64_t j, std::int64_t g) const {
    return v + ((cu_k[b] + j) * heads_kv + g) * dim;
  }
};

template <class T>
void attention_varlen_rows(const Tensor& q, const Tensor& k, const Tensor& v,
                           const std::int32_t* cu_q, const std::int32_t* cu_k, std::int64_t batch,
                           const Tensor& out, const Tensor& lse, const AttentionVarlenCall& call,
                           const AttentionScores& scores) {
  const cpu::AttentionRows shape{q.size(0), batch, call.heads_q, call.heads_kv, call.head_dim};
  const PackedKeys<T> keys{k.data<T>(), v.data<T>(), cu_k, call.heads_kv, call.head_dim};
  cpu::attend_sequences(q.data<T>(), out.data<T>(), lse.data<float>(), cu_q, shape, scores, keys,
                        k.size(0) / std::max<std::int64_t>(batch, 1));
}

}  // namespace

void AttentionVarlenCpu::forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                 const Tensor& cu_seqlens_q, const Tensor& cu_seqlens_k,
                                 const Tensor& out, const Tensor& lse,
                                 const AttentionScores& scores) {
  const std::int64_t entries = cu_seqlens_q.numel();
  const auto* cu_q = cu_seqlens_q.data<std::int32_t>();
  const auto* cu_k = cu_seqlens_k.data<std::int32_t>();
  cpu::check_cu_seqlens(kOp, "cu_seqlens_q", cu_q, entries, q.size(0), "Tq, the tokens of q");
  cpu::check_cu_seqlens(kOp, "cu_seqlens_k", cu_k, entries, k.size(0), "Tk, the tokens of k");
  cpu::dispatch_float(call_.dtype, "attention_varlen_cpu", [&](auto tag) {
    attention_varlen_rows<decltype(tag)>(q, k, v, cu_q, cu_k, entries - 1, out, lse, call_, scores);
  });
}

}  // namespace tileops
