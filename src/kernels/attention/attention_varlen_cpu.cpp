// The varlen attention forward on the CPU: the cu_seqlens contents checked, then one task per
// (sequence, query head) over the hardware threads, each query row an online softmax
// (attention_cpu.h). Keys and values are converted to float32 once per call.
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "kernels/attention/attention_cpu.h"
#include "kernels/attention/attention_impls.h"
#include "kernels/cpu/elements.h"
#include "kernels/cpu/parallel.h"

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

/// The n values at p as float32.
template <class T>
std::vector<float> as_float(const T* p, std::int64_t n) {
  std::vector<float> f(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) f[static_cast<std::size_t>(i)] = cpu::to_float(p[i]);
  return f;
}

template <class T>
void attention_varlen_rows(const Tensor& q, const Tensor& k, const Tensor& v,
                           const std::int32_t* cu_q, const std::int32_t* cu_k, std::int64_t batch,
                           const Tensor& out, const Tensor& lse, const AttentionVarlenCall& call,
                           const AttentionScores& scores) {
  const std::int64_t total_q = q.size(0);
  const std::int64_t heads_q = call.heads_q;
  const std::int64_t heads_kv = call.heads_kv;
  const std::int64_t dim = call.head_dim;
  const std::int64_t group = heads_q / heads_kv;
  std::vector<float> k_converted;
  std::vector<float> v_converted;
  const float* kf = nullptr;
  const float* vf = nullptr;
  if constexpr (std::is_same_v<T, float>) {
    kf = k.data<float>();
    vf = v.data<float>();
  } else {
    k_converted = as_float(k.data<T>(), k.numel());
    v_converted = as_float(v.data<T>(), v.numel());
    kf = k_converted.data();
    vf = v_converted.data();
  }
  const T* qp = q.data<T>();
  T* op = out.data<T>();
  float* lp = lse.data<float>();
  const float scale = scores.softmax_scale;
  const float softcap = scores.softcap;
  // Work: every query row against at most all its sequence's keys.
  const std::int64_t work = total_q * heads_q * dim *
                            std::max<std::int64_t>(1, k.size(0) / std::max<std::int64_t>(batch, 1));
  cpu::parallel_for(batch * heads_q, work, [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> q_scaled(static_cast<std::size_t>(dim));
    std::vector<double> acc(static_cast<std::size_t>(dim));
    for (std::int64_t task = begin; task < end; ++task) {
      const std::int64_t b = task / heads_q;
      const std::int64_t h = task % heads_q;
      const std::int64_t g = h / group;
      const std::int64_t q0 = cu_q[b];
      const std::int64_t k0 = cu_k[b];
      const std::int64_t sq = cu_q[b + 1] - q0;
      const std::int64_t sk = cu_k[b + 1] - k0;
      const auto key = [&](std::int64_t j) { return kf + ((k0 + j) * heads_kv + g) * dim; };
      const auto value = [&](std::int64_t j) { return vf + ((k0 + j) * heads_kv + g) * dim; };
      for (std::int64_t i = 0; i < sq; ++i) {
        const std::int64_t row = ((q0 + i) * heads_q + h) * dim;
        for (std::int64_t d = 0; d < dim; ++d) q_scaled[d] = cpu::to_float(qp[row + d]) * scale;
        T* out_row = op + row;
        const double l =
            cpu::attend_row(q_scaled.data(), dim, cpu::visible_keys(i, sq, sk, scores), softcap,
                            key, value, acc.data(), [&](std::int64_t d, double x) {
                              out_row[d] = cpu::from_float<T>(static_cast<float>(x));
                            });
        lp[h * total_q + q0 + i] = static_cast<float>(l);
      }
    }
  });
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
