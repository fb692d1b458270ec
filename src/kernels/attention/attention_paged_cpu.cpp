// The paged attention forward on the CPU: the contents of cu_seqlens_q, seqused_k and the used
// block table entries checked, then the varlen op's loop over the sequences and query heads
// (attention_cpu.h, attend_sequences) with the keys read through the block table (and converted
// to float32 tile by tile).
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

#include "kernels/attention/attention_cpu.h"
#include "kernels/attention/attention_impls.h"

namespace tileops {
namespace {

constexpr std::string_view kOp = "GroupedQueryAttentionPagedFwdOp";

std::int64_t pages_for(std::int64_t keys, std::int64_t page_size) {
  return (keys + page_size - 1) / page_size;
}

/// SignatureError unless every seqused_k[b] lies in [0, width * page_size] and every block id a
/// sequence uses (its first ceil(seqused_k[b] / page_size) entries) names a block of the caches.
void check_block_table(const std::int32_t* seqused, const std::int32_t* table, std::int64_t batch,
                       std::int64_t width, std::int64_t page_size, std::int64_t blocks) {
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::int64_t sk = seqused[b];
    if (sk < 0) throw SignatureError(fmt::format("{}: seqused_k[{}] = {} is negative", kOp, b, sk));
    const std::int64_t pages = pages_for(sk, page_size);
    if (pages > width) {
      throw SignatureError(fmt::format(
          "{}: seqused_k[{}] = {} keys need {} pages of {}, more than the block table's {} "
          "(max_blocks_per_seq)",
          kOp, b, sk, pages, page_size, width));
    }
    for (std::int64_t p = 0; p < pages; ++p) {
      const std::int64_t id = table[b * width + p];
      if (id < 0 || id >= blocks) {
        throw SignatureError(
            fmt::format("{}: block_table[{}][{}] = {} is not a block of the caches (num_blocks = "
                        "{})",
                        kOp, b, p, id, blocks));
      }
    }
  }
}

/// The keys of sequence b through the block table: key j is row j % page_size of page
/// table[b][j / page_size].
template <class T>
struct PagedKeys {
  const T* k;
  const T* v;
  const std::int32_t* table;
  const std::int32_t* seqused;
  std::int64_t width;
  std::int64_t page_size;
  std::int64_t heads_kv;
  std::int64_t dim;
  std::int64_t length(std::int64_t b) const { return seqused[b]; }
  std::int64_t row(std::int64_t b, std::int64_t j, std::int64_t g) const {
    const std::int64_t page = table[b * width + j / page_size];
    return ((page * page_size + j % page_size) * heads_kv + g) * dim;
  }
  const T* key(std::int64_t b, std::int64_t j, std::int64_t g) const { return k + row(b, j, g); }
  const T* value(std::int64_t b, std::int64_t j, std::int64_t g) const { return v + row(b, j, g); }
};

template <class T>
void attention_paged_rows(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                          const std::int32_t* cu_q, const std::int32_t* seqused,
                          const std::int32_t* table, std::int64_t batch, std::int64_t width,
                          const Tensor& out, const Tensor& lse, const AttentionPagedCall& call,
                          const AttentionScores& scores) {
  std::int64_t total_keys = 0;
  for (std::int64_t b = 0; b < batch; ++b) total_keys += seqused[b];
  const cpu::AttentionRows shape{q.size(0), batch, call.heads_q, call.heads_kv, call.head_dim};
  const PagedKeys<T> keys{k_cache.data<T>(), v_cache.data<T>(), table,        seqused, width,
                          k_cache.size(1),   call.heads_kv,     call.head_dim};
  cpu::attend_sequences(q.data<T>(), out.data<T>(), lse.data<float>(), cu_q, shape, scores, keys,
                        total_keys / std::max<std::int64_t>(batch, 1));
}

}  // namespace

void AttentionPagedCpu::forward(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                                const Tensor& cu_seqlens_q, const Tensor& seqused_k,
                                const Tensor& block_table, const Tensor& out, const Tensor& lse,
                                const AttentionScores& scores) {
  const std::int64_t batch = seqused_k.numel();
  const std::int64_t width = block_table.size(1);
  const auto* cu_q = cu_seqlens_q.data<std::int32_t>();
  const auto* seqused = seqused_k.data<std::int32_t>();
  const auto* table = block_table.data<std::int32_t>();
  cpu::check_cu_seqlens(kOp, "cu_seqlens_q", cu_q, batch + 1, q.size(0), "Tq, the tokens of q");
  check_block_table(seqused, table, batch, width, k_cache.size(1), k_cache.size(0));
  cpu::dispatch_float(call_.dtype, "attention_paged_cpu", [&](auto tag) {
    attention_paged_rows<decltype(tag)>(q, k_cache, v_cache, cu_q, seqused, table, batch, width,
                                        out, lse, call_, scores);
  });
}

}  // namespace tileops
