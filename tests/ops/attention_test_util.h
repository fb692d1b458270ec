// Helpers of the attention tests (CPU and GPU): offsets, slot mappings, packed keys laid into a
// paged cache, the visibility rule of the contract written out independently of the
// implementations, and kernel selection checked without a device.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "tileops/base/op_class.h"
#include "tileops/core/tensor.h"
#include "tileops/dispatch/kernel_table.h"

namespace tileops::attention_test {

/// An int32 tensor of the given values (cu_seqlens).
inline Tensor int32_values(const std::vector<std::int32_t>& values, Device device = Device::cpu()) {
  Tensor t = Tensor::empty({static_cast<std::int64_t>(values.size())}, DType::int32);
  for (std::size_t i = 0; i < values.size(); ++i) t.data<std::int32_t>()[i] = values[i];
  return t.to(device);
}

/// An int64 tensor of the given values (slot mappings).
inline Tensor int64_values(const std::vector<std::int64_t>& values, Device device = Device::cpu()) {
  Tensor t = Tensor::empty({static_cast<std::int64_t>(values.size())}, DType::int64);
  for (std::size_t i = 0; i < values.size(); ++i) t.data<std::int64_t>()[i] = values[i];
  return t.to(device);
}

/// The contract's rule, as issue 28 states it: query i of sq sees key j of sk.
inline bool sees(std::int64_t i, std::int64_t j, std::int64_t sq, std::int64_t sk, bool causal,
                 std::int64_t window_left) {
  return (!causal || j <= i + sk - sq) && (window_left < 0 || j >= i + sk - sq - window_left);
}

/// Every mask kind and score path, named, as the params of an attention op (`Params`: the op's
/// Params, which both attention ops spell alike).
template <class Params>
std::vector<std::pair<const char*, Params>> mask_kinds() {
  return {
      {"causal", {}},
      {"non-causal", {.causal = false}},
      {"causal window 100", {.window_left = 100}},
      {"non-causal window 50", {.causal = false, .window_left = 50}},
      {"causal window 0", {.window_left = 0}},
      {"causal softcap 30", {.softcap = 30.0}},
      {"scale 0.05", {.causal = false, .softmax_scale = 0.05}},
  };
}

/// Offsets [0, l0, l0 + l1, ...] of the given lengths.
inline std::vector<std::int32_t> offsets_of(const std::vector<std::int32_t>& lengths) {
  std::vector<std::int32_t> cu{0};
  for (const std::int32_t l : lengths) cu.push_back(cu.back() + l);
  return cu;
}

/// Installs op `op`'s implementations in `table` (raises std::invalid_argument for an unknown op).
inline void install_kernels_of(KernelTable& table, const std::string& op) {
  const OpClass* c = find_op_class(op);
  if (c == nullptr) throw std::invalid_argument("no op class " + op);
  table.install(c->name, c->interfaces, c->kernel_types, {});
}

/// A CUDA call spec on an H200's facts (no device read) with Llama-3-8B's heads (32 / 8, D 128).
template <class Call>
Call h200_call() {
  Call call;
  call.device = Device::cuda(0);
  call.facts = DeviceFacts{90, 132, 232448};
  call.heads_q = 32;
  call.heads_kv = 8;
  call.head_dim = 128;
  return call;
}

/// A named batch of sequences: query and key lengths per sequence.
struct NamedBatch {
  const char* name;
  std::vector<std::int32_t> q_lengths;
  std::vector<std::int32_t> k_lengths;
};

/// A paged cache holding the same keys as a packed k / v.
struct PagedCache {
  Tensor k_cache;      ///< [num_blocks, page_size, Hkv, D]
  Tensor v_cache;      ///< like k_cache
  Tensor seqused_k;    ///< [B] int32: the sequences' key counts
  Tensor block_table;  ///< [B, width] int32
  std::int64_t num_blocks = 0;
};

/// Lays the packed keys and values k, v ([Tk, Hkv, D], sequence b holding k_lengths[b] rows) into
/// pages of `page_size` rows: each sequence's pages are drawn from a shuffled list of every block
/// (`spare_blocks` more than the sequences need), its last page partial when page_size does not
/// divide its length; `width` table entries per sequence (at least the pages it needs), those
/// past its pages set to `unused_entry` (never read). Cache rows no sequence uses hold random
/// values, or `unused_value` when given (NaN: a kernel that weighs them shows it).
inline PagedCache to_pages(const Tensor& k, const Tensor& v,
                           const std::vector<std::int32_t>& k_lengths, std::int64_t page_size,
                           std::int64_t width, std::int64_t spare_blocks, std::uint64_t seed,
                           Device device = Device::cpu(), std::int32_t unused_entry = -1,
                           std::optional<double> unused_value = std::nullopt) {
  const Tensor kc = k.to(Device::cpu()).contiguous();
  const Tensor vc = v.to(Device::cpu()).contiguous();
  const std::int64_t heads = kc.size(1);
  const std::int64_t dim = kc.size(2);
  const auto batch = static_cast<std::int64_t>(k_lengths.size());
  std::int64_t needed = 0;
  for (const std::int32_t l : k_lengths) needed += (l + page_size - 1) / page_size;
  PagedCache c;
  c.num_blocks = needed + spare_blocks;
  const Sizes shape{c.num_blocks, page_size, heads, dim};
  c.k_cache = unused_value ? Tensor::full(shape, *unused_value, kc.dtype())
                           : Tensor::randn(shape, kc.dtype(), seed + 100);
  c.v_cache = unused_value ? Tensor::full(shape, *unused_value, kc.dtype())
                           : Tensor::randn(shape, kc.dtype(), seed + 101);
  std::vector<std::int32_t> order(static_cast<std::size_t>(c.num_blocks));
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<std::int32_t> table(static_cast<std::size_t>(batch * width), unused_entry);
  std::size_t next = 0;
  std::int64_t row = 0;
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::int64_t sk = k_lengths[static_cast<std::size_t>(b)];
    if ((sk + page_size - 1) / page_size > width) throw std::invalid_argument("to_pages: width");
    for (std::int64_t j = 0; j < sk; ++j, ++row) {
      if (j % page_size == 0)
        table[static_cast<std::size_t>(b * width + j / page_size)] = order[next++];
      const std::int64_t id = table[static_cast<std::size_t>(b * width + j / page_size)];
      c.k_cache.select(0, id).select(0, j % page_size).copy_(kc.select(0, row));
      c.v_cache.select(0, id).select(0, j % page_size).copy_(vc.select(0, row));
    }
  }
  c.seqused_k = int32_values(k_lengths, device);
  Tensor t = Tensor::empty({batch, width}, DType::int32);
  std::copy(table.begin(), table.end(), t.data<std::int32_t>());
  c.block_table = t.to(device);
  c.k_cache = c.k_cache.to(device);
  c.v_cache = c.v_cache.to(device);
  return c;
}

}  // namespace tileops::attention_test
