// Inputs of the attention workload cases (tileops bench): offsets of equal-length sequences (what
// the roofline assumes), block tables of randomly chosen pages, slot mappings of tokens filling
// randomly chosen pages, merge states with -inf on either side. Everything is drawn from the case's
// seed.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "tileops/base/reference.h"
#include "tileops/ops/attention.h"

namespace tileops {
namespace {

const InstantiatedCase::InputSpec& spec(const InstantiatedCase& c, std::size_t i) {
  return *c.inputs.at(i);
}

Tensor normal(const InstantiatedCase& c, std::size_t i, std::uint64_t seed, Device device) {
  return Tensor::randn(spec(c, i).shape, spec(c, i).dtype, seed + i, device);
}

/// [batch + 1] int32: cu[b] = floor(b * total / batch), sequences whose lengths differ by at
/// most 1.
Tensor equal_offsets(std::int64_t total, std::int64_t batch, Device device) {
  Tensor cu = Tensor::empty({batch + 1}, DType::int32);
  for (std::int64_t b = 0; b <= batch; ++b) {
    cu.data<std::int32_t>()[b] = static_cast<std::int32_t>(batch > 0 ? b * total / batch : 0);
  }
  return cu.to(device);
}

/// Sequences of equal length (Tq / B queries over Tk / B keys each, the remainder spread over the
/// first ones), as the roofline assumes.
std::vector<Tensor> varlen_inputs(const InstantiatedCase& c, std::uint64_t seed, Device device) {
  const std::int64_t batch = spec(c, 3).shape[0] - 1;
  return {normal(c, 0, seed, device), normal(c, 1, seed, device), normal(c, 2, seed, device),
          equal_offsets(spec(c, 0).shape[0], batch, device),
          equal_offsets(spec(c, 1).shape[0], batch, device)};
}

/// Every sequence over the whole width of its block table (seqused_k = max_blocks_per_seq *
/// page_size, as the roofline assumes), its pages a random choice of the cache's blocks (as a
/// serving engine hands them out; shared round-robin when the cache has fewer blocks than the
/// tables). Queries: Tq / B per sequence when B divides Tq (decoding when Tq = B); otherwise a
/// mixed batch: one query per sequence, the others filling the last sequences 511 at a time
/// (prefill chunks of 512 queries).
std::vector<Tensor> paged_inputs(const InstantiatedCase& c, std::uint64_t seed, Device device) {
  const std::int64_t total_q = spec(c, 0).shape[0];
  const std::int64_t blocks = spec(c, 1).shape[0];
  const std::int64_t page = spec(c, 1).shape[1];
  const std::int64_t batch = spec(c, 4).shape[0];
  const std::int64_t width = spec(c, 5).shape[1];
  // Queries: equal sequences when batch divides them; else one each, the others filling the last
  // sequences 511 at a time (prefill chunks of 512 among decoding queries).
  Tensor cu = equal_offsets(total_q, batch, Device::cpu());
  if (batch > 0 && total_q % batch != 0 && total_q > batch) {
    constexpr std::int64_t kChunkExtra = 511;
    std::vector<std::int64_t> lengths(static_cast<std::size_t>(batch), 1);
    std::int64_t extra = total_q - batch;
    for (std::int64_t b = batch - 1; b >= 0 && extra > 0; --b) {
      const std::int64_t take = b == 0 ? extra : std::min(extra, kChunkExtra);
      lengths[static_cast<std::size_t>(b)] += take;
      extra -= take;
    }
    for (std::int64_t b = 0; b < batch; ++b) {
      cu.data<std::int32_t>()[b + 1] =
          cu.data<std::int32_t>()[b] +
          static_cast<std::int32_t>(lengths[static_cast<std::size_t>(b)]);
    }
  }
  // Every sequence over its whole block table; pages a random permutation of the blocks.
  std::vector<std::int32_t> order(static_cast<std::size_t>(blocks));
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(seed + 6);
  std::shuffle(order.begin(), order.end(), rng);
  Tensor used = Tensor::empty({batch}, DType::int32);
  Tensor table = Tensor::empty({batch, width}, DType::int32);
  for (std::int64_t b = 0; b < batch; ++b) {
    used.data<std::int32_t>()[b] = static_cast<std::int32_t>(width * page);
    for (std::int64_t p = 0; p < width; ++p) {
      table.data<std::int32_t>()[b * width + p] =
          blocks > 0 ? order[static_cast<std::size_t>((b * width + p) % blocks)] : 0;
    }
  }
  return {normal(c, 0, seed, device),
          normal(c, 1, seed, device),
          normal(c, 2, seed, device),
          cu.to(device),
          used.to(device),
          table.to(device)};
}

/// Tokens filling pages in order, the pages a random choice of the cache's blocks (as a serving
/// engine hands them out): distinct slots, all within the cache.
std::vector<Tensor> kv_cache_write_inputs(const InstantiatedCase& c, std::uint64_t seed,
                                          Device device) {
  const std::int64_t tokens = spec(c, 0).shape[0];
  const std::int64_t blocks = spec(c, 2).shape[0];
  const std::int64_t page = spec(c, 2).shape[1];
  std::vector<std::int64_t> order(static_cast<std::size_t>(blocks));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  std::mt19937_64 rng(seed + 4);
  std::shuffle(order.begin(), order.end(), rng);
  // Token t fills position t % page of the (t / page)-th page handed out; tokens beyond the
  // cache are padding (-1).
  Tensor slots = Tensor::empty({tokens}, DType::int64);
  for (std::int64_t t = 0; t < tokens; ++t) {
    const std::int64_t p = page > 0 ? t / page : blocks;
    slots.data<std::int64_t>()[t] =
        p < blocks ? order[static_cast<std::size_t>(p)] * page + t % page : -1;
  }
  return {normal(c, 0, seed, device), normal(c, 1, seed, device), normal(c, 2, seed, device),
          normal(c, 3, seed, device), slots.to(device)};
}

/// Random states with some -inf lse on either side and on both (queries that saw no key).
std::vector<Tensor> merge_states_inputs(const InstantiatedCase& c, std::uint64_t seed,
                                        Device device) {
  // lse about log(keys) of a few thousand keys, spread so that both sides matter; every 17th
  // entry of lse_a and every 13th of lse_b is -inf (a side that saw no key), some entries both.
  const auto lse = [&](std::size_t i, std::int64_t every) {
    Tensor l = Tensor::randn(spec(c, i).shape, DType::float32, seed + i, Device::cpu(), 8.0, 2.0);
    float* p = l.data<float>();
    for (std::int64_t e = 0; e < l.numel(); e += every) {
      p[e] = -std::numeric_limits<float>::infinity();
    }
    return l.to(device);
  };
  return {normal(c, 0, seed, device), lse(1, 17), normal(c, 2, seed, device), lse(3, 13)};
}

}  // namespace

TILEOPS_REGISTER_WORKLOAD_INPUTS(GroupedQueryAttentionVarlenFwdOp, varlen_inputs)
TILEOPS_REGISTER_WORKLOAD_INPUTS(GroupedQueryAttentionPagedFwdOp, paged_inputs)
TILEOPS_REGISTER_WORKLOAD_INPUTS(KVCacheWriteFwdOp, kv_cache_write_inputs)
TILEOPS_REGISTER_WORKLOAD_INPUTS(AttentionMergeStatesFwdOp, merge_states_inputs)

}  // namespace tileops
