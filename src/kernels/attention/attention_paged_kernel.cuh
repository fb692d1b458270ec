// Internal: the split-KV kernel of the paged attention forward (attention_paged_cuda.h); the merge
// of its splits is attention_paged_merge_kernel.cuh. Included by the per-head-dim files
// (attention_paged_d{64,128,256}_cuda.cu), through attention_paged_instances.cuh, only.
//
// Split-KV kernel: a block of 128 threads takes (row tile, KV head g, split). Its ROWS query rows
// are consecutive (query, head) pairs of one sequence's queries and g's group of query heads,
// row r being query r / group, head g * group + r % group; the block's slot is mapped to
// (sequence, row tile) on the device from cu_seqlens_q (warp 0, a prefix sum over 32 sequences at
// a time). The block visits the keys some row of the tile sees (causal, window), cut into
// `splits` ranges of whole 64-key tiles, the block's split's range: 64-key K and V tiles flow
// through a STAGES-deep cp.async pipeline in shared memory (16-byte copies, each key's row found
// through the block table, rows outside the range zero-filled and never read), rows of D elements
// whose 16-byte chunks are XOR-swizzled by (row & 7). S = Q K^T and O += P V run on mma.sync
// m16n8k16 with fp32 accumulators (fragments by ldmatrix, P from the S registers); the online
// softmax in log2 units in registers. ROWS 16 (decode-shaped): the four warps take 16 keys of each
// tile each and merge their states through shared memory at the end; ROWS 64 (prefill-shaped): each
// warp takes 16 rows over every key. The result goes to out / lse (one split) or to the split's
// partial state in the workspace (normalized out in float32, lse), merged by the merge kernel,
// launched as a programmatic dependent of this one.
// CONTIGUOUS (cu_k set): the keys are rows of contiguous K / V tensors (the varlen op's
// decode-shaped calls), one "page" per sequence whose entry is cu_k[b], no table read; a template
// option so that the paged instances carry none of its branches.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/attention/attention_mma.cuh"
#include "kernels/common/fast_divide.h"

namespace tileops::cuda_kernels::paged_detail {

constexpr int kThreads = 128;
constexpr int kWarps = 4;
constexpr int kKeys = 64;  // keys per K / V tile (one stage); the splits' unit
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

struct PagedParams {
  const void* q;
  const void* k_cache;
  const void* v_cache;
  void* out;
  float* lse;
  float* part_out;  // splits > 1: [splits, total_q, heads_q, D] float32
  float* part_lse;  // splits > 1: [splits, heads_q, total_q]
  const int32_t* cu_q;
  const int32_t* seqused;
  const int32_t* table;
  // Contiguous keys (the varlen op's K / V) when set: key j of sequence b is row cu_k[b] + j of
  // [num_blocks rows, heads_kv, D]; seqused and table are unused, page_shift is 30, width 1.
  const int32_t* cu_k;
  int batch;
  int heads_q;
  int heads_kv;
  int group;  // heads_q / heads_kv
  int total_q;
  int width;  // block table entries per sequence
  int num_blocks;
  int page_shift;  // log2(page_size)
  int splits;
  float scale_log2;  // softmax_scale * log2(e)
  float scale;       // softmax_scale (softcap path)
  float softcap;     // > 0: softcap * tanh(scale * s / softcap)
  float inv_softcap;
  int causal;
  int window_left;  // < 0: none (clamped to 2^30 on the host)
  // The divisors of the blocks' index arithmetic, as multiplies: an integer division is a long
  // call on the dependent chain a decoding block runs before its first copy.
  kernels::FastDivide by_splits;
  kernels::FastDivide by_heads_kv;
  kernels::FastDivide by_group;
  kernels::FastDivide by_heads_q;
};

// Query row r of a sequence (r < 2^30) is query r / group of head r % group of the KV head's group.
__device__ __forceinline__ int query_of_row(const PagedParams& p, int r) {
  return static_cast<int>(p.by_group.quotient(static_cast<uint32_t>(r)));
}

/// K / V stages per head dim: 4 x 16 KB (D 64), 3 x 32 KB (D 128), 2 x 64 KB (D 256).
template <int D>
constexpr int kStages = D == 64    ? 4
                        : D == 128 ? 3
                                   : 2;

template <int D, int ROWS>
struct PagedShape {
  static constexpr int kStages = paged_detail::kStages<D>;
  static constexpr int kRowWarps = ROWS / 16;                // warps along the rows: 1 or 4
  static constexpr int kKeyWarps = kWarps / kRowWarps;       // warps along each tile's keys: 4 or 1
  static constexpr int kWarpKeys = kKeys / kKeyWarps;        // keys of a tile per warp: 16 or 64
  static constexpr int kChunks = D / 8;                      // 16-byte chunks per row
  static constexpr int kTileElems = kKeys * D;               // of K (and of V) per stage
  static constexpr int kLoads = kKeys * kChunks / kThreads;  // chunks per thread per tile
  static constexpr int kRowStep = kThreads / kChunks;        // rows between a thread's chunks
  static constexpr int kQLoads = ROWS * kChunks / kThreads;
  static constexpr int kSmem = (ROWS * D + 2 * kStages * kTileElems) * 2;
  static constexpr int kMergeStride = D + 4;  // floats per row of the warps' merge
  static constexpr int kMergeBytes = kKeyWarps * 16 * (kMergeStride + 2) * 4;
  static_assert(ROWS == 16 || ROWS == 64, "16 or 64 rows per tile");
  static_assert(D == 64 || D == 128 || D == 256, "head dims 64, 128, 256");
  static_assert(kKeyWarps == 1 || kMergeBytes <= 2 * kStages * kTileElems * 2, "merge fits");
  static_assert(kThreads % kChunks == 0 && (ROWS * kChunks) % kThreads == 0, "loads per thread");
};

// Where a block's row tile lies: its sequence, the tile's index in it, the sequence's first
// query, queries and keys (seqused_k clamped at 0), and with contiguous keys the first key's row.
struct TileSite {
  int b;
  int tile;
  int q0;
  int sq;
  int sk;
  int k0;
};

// The tile of slot `slot` (tiles in batch order, ceil(sq * group / ROWS) per sequence), with the
// sequence's seqused_k (or its cu_k rows, clipped to the tensors' rows so that no caller's offset
// reads outside them) loaded beside cu_seqlens_q so that one round trip to memory finds both.
// Run by the 32 lanes of one warp; false when the slot is past the last tile.
template <int ROWS, bool CONTIGUOUS>
__device__ __forceinline__ bool find_tile(const PagedParams& p, int slot, TileSite& site) {
  const int lane = static_cast<int>(threadIdx.x & 31u);
  int before = 0;
  for (int base = 0; base < p.batch; base += 32) {
    const int b = base + lane;
    int own = 0;
    int q0 = 0;
    int sq = 0;
    int sk = 0;
    int k0 = 0;
    if (b < p.batch) {
      q0 = __ldg(p.cu_q + b);
      sq = __ldg(p.cu_q + b + 1) - q0;
      if constexpr (CONTIGUOUS) {
        k0 = min(max(__ldg(p.cu_k + b), 0), p.num_blocks);
        sk = min(max(__ldg(p.cu_k + b + 1), k0), p.num_blocks) - k0;
      } else {
        sk = max(__ldg(p.seqused + b), 0);
      }
      if (sq > 0) own = static_cast<int>((static_cast<long long>(sq) * p.group + ROWS - 1) / ROWS);
    }
    int incl = own;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const int v = __shfl_up_sync(0xffffffffu, incl, d);
      if (lane >= d) incl += v;
    }
    const int rel = slot - before;
    const unsigned hit = __ballot_sync(0xffffffffu, incl > rel);
    if (hit != 0u) {
      const int f = __ffs(static_cast<int>(hit)) - 1;
      site.b = base + f;
      site.tile = rel - __shfl_sync(0xffffffffu, incl - own, f);
      site.q0 = __shfl_sync(0xffffffffu, q0, f);
      site.sq = __shfl_sync(0xffffffffu, sq, f);
      site.sk = __shfl_sync(0xffffffffu, sk, f);
      site.k0 = __shfl_sync(0xffffffffu, k0, f);
      return true;
    }
    before += __shfl_sync(0xffffffffu, incl, 31);
  }
  return false;
}

// Split `split`'s keys [ks, ke) of the visible keys [lo, hi): whole 64-key units,
// ceil(units / splits) each, clipped to [lo, hi) (empty when ks >= ke). In 32 bits (hi < 2^31),
// the unit products in 64.
struct SplitKeys {
  int ks;
  int ke;
};
__device__ __forceinline__ SplitKeys split_keys(const PagedParams& p, int lo, int hi, int split) {
  const int u0 = lo / kKeys;
  const int units = static_cast<int>((static_cast<unsigned>(hi) + kKeys - 1) / kKeys) - u0;
  const int per =
      static_cast<int>(p.by_splits.quotient(static_cast<uint32_t>(units + p.splits - 1)));
  return SplitKeys{static_cast<int>(max(static_cast<long long>(lo),
                                        static_cast<long long>(u0 + split * per) * kKeys)),
                   static_cast<int>(min(static_cast<long long>(hi),
                                        static_cast<long long>(u0 + (split + 1) * per) * kKeys))};
}

// A decoding block's guess of its table entries, prefetched into L2 while warp 0 finds the
// block's tile: with one query per sequence and the group at most 16 rows, slot `slot` is
// sequence `slot`, and a sequence filling its table row cuts into the splits as the kernel cuts
// it. A wrong guess (other packings, shorter sequences) only costs the prefetch.
template <int ROWS>
__device__ __forceinline__ void prefetch_table_guess(const PagedParams& p, int slot, int split) {
  if constexpr (ROWS == 16) {
    const SplitKeys range = split_keys(p, 0, p.width << p.page_shift, split);
    if (range.ks >= range.ke) return;
    const int32_t* row = p.table + static_cast<long long>(slot) * p.width;
    const uintptr_t first =
        reinterpret_cast<uintptr_t>(row + (range.ks >> p.page_shift)) & ~uintptr_t{127};
    const uintptr_t last = reinterpret_cast<uintptr_t>(row + ((range.ke - 1) >> p.page_shift));
    const uintptr_t line = first + 128u * (threadIdx.x & 31u);
    if (line <= last) asm volatile("prefetch.L2 [%0];" ::"l"(line));
  }
}

template <typename T, int D, int ROWS, bool CONTIGUOUS>
__global__ void __launch_bounds__(kThreads) attention_paged_kernel(const PagedParams p) {
  using S = PagedShape<D, ROWS>;
  constexpr int kNB = S::kWarpKeys / 8;  // 8-key blocks of S per warp
  constexpr int kDN = D / 8;             // 8-column blocks of O
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ TileSite s_site;
  const uint32_t sq_addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const uint32_t sk_addr = sq_addr + ROWS * D * 2;
  const uint32_t sv_addr = sk_addr + S::kStages * S::kTileElems * 2;

  // The merge kernel, when there is one, may start launching; it waits for this grid to finish.
  launch_dependents();
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31;
  const int warp = tid >> 5;
  // Block x is (slot, KV head, split) with the split fastest and the slot slowest, so that the
  // blocks of the first slots, which hold tiles, start first and the bound's spare slots last.
  const uint32_t rest = p.by_splits.quotient(blockIdx.x);
  const int split = static_cast<int>(p.by_splits.remainder(blockIdx.x, rest));
  const uint32_t slot_index = p.by_heads_kv.quotient(rest);
  const int g = static_cast<int>(p.by_heads_kv.remainder(rest, slot_index));
  const int slot = static_cast<int>(slot_index);
  if (warp == 0) {
    TileSite site{};
    if (!find_tile<ROWS, CONTIGUOUS>(p, slot, site)) site.b = -1;
    if (lane == 0) s_site = site;
  } else if (!CONTIGUOUS && warp == 1 && slot < p.batch) {
    prefetch_table_guess<ROWS>(p, slot, split);
  }
  __syncthreads();
  const int b = s_site.b;
  if (b < 0) return;  // a slot past the last tile
  const int tile = s_site.tile;
  const int q0 = s_site.q0;
  const int sq = s_site.sq;
  const int sk = s_site.sk;
  const int k0 = s_site.k0;
  const int rows = sq * p.group;
  const int r0 = tile * ROWS;
  const int r_last = min(rows, r0 + ROWS) - 1;
  const int off = sk - sq;  // query i's diagonal key is i + off

  // The keys some row of the tile sees, then this split's whole 64-key tiles of them. In 32 bits
  // (a query's token is below sq, so r / group + off < sk; window_left is at most 2^30).
  int lo = 0;
  int hi = sk;
  if (p.window_left >= 0) lo = max(0, query_of_row(p, r0) + off - p.window_left);
  if (p.causal) hi = min(hi, query_of_row(p, r_last) + off + 1);
  if (hi < lo) hi = lo;
  const SplitKeys range = split_keys(p, lo, hi, split);
  const int ks = range.ks;
  const int ke = range.ke;
  const int t_begin = ks / kKeys;
  const int n_tiles = ke > ks ? (ke + kKeys - 1) / kKeys - t_begin : 0;

  // The pages of this block's sequence; this thread's chunk of each row it copies.
  const T* kc = static_cast<const T*>(p.k_cache);
  const T* vc = static_cast<const T*>(p.v_cache);
  constexpr bool contiguous = CONTIGUOUS;
  const int32_t* table = contiguous ? nullptr : p.table + static_cast<long long>(b) * p.width;
  const int page_mask = (1 << p.page_shift) - 1;
  // A page's elements fit an int: heads_kv <= 65535, D <= 256, page_size <= 128 (the host checks).
  const int row_elems = p.heads_kv * D;
  const int page_elems = contiguous ? 0 : row_elems << p.page_shift;
  const int chunk = tid % S::kChunks;
  const int row0 = tid / S::kChunks;
  const int head_offset = g * D + chunk * 8;
  // The pages of [ks, ke): the only table entries read.
  const int page_lo = ks >> p.page_shift;
  const int page_hi = min((ke - 1) >> p.page_shift, p.width - 1);
  // The table entries of tiles [t, t + count): a tile's 64 keys span at most kKeys / 16 pages,
  // lane l of each warp reads the entry of the tiles' page l. Loaded a tile ahead of their use
  // (the whole pipeline fill at once) so that the table's latency stays off the copies' chain.
  // Contiguous keys are one page whose entry is the sequence's first row.
  const auto load_entries = [&](int t, int count) {
    const int page = (((t_begin + t) * kKeys) >> p.page_shift) + lane;
    int entry = -1;
    if (lane < count * (kKeys / 16) && n_tiles > 0 && page >= page_lo && page <= page_hi)
      entry = contiguous ? k0 : __ldg(table + page);
    return entry;
  };
  // The block ids of this thread's rows of tile t (-1: a zero row) from the entries of tiles
  // [t0, ...): row i takes its page's entry by shuffle (row i's page is the same in every thread:
  // row0 < kRowStep, which divides the page size).
  const auto block_ids = [&](int t, int t0, int entry, int(&ids)[S::kLoads]) {
    const int kt = (t_begin + t) * kKeys;
    const int first_page = ((t_begin + t0) * kKeys) >> p.page_shift;
    entry = entry >= 0 && entry < p.num_blocks ? entry : -1;
#pragma unroll
    for (int i = 0; i < S::kLoads; ++i) {
      // Keys past the table's width and ids outside the cache (the caller's error) read as zero
      // rows: never memory outside the table and the caches.
      const int j = kt + row0 + i * S::kRowStep;
      const int id = __shfl_sync(0xffffffffu, entry, (j >> p.page_shift) - first_page);
      ids[i] = j >= ks && j < ke ? id : -1;
    }
  };
  // K and V tile t into stage `stage`: this thread's kLoads chunks of each.
  const auto issue = [&](int t, int stage, const int(&ids)[S::kLoads]) {
    const int kt = (t_begin + t) * kKeys;
    const uint32_t kdst = sk_addr + stage * S::kTileElems * 2;
    const uint32_t vdst = sv_addr + stage * S::kTileElems * 2;
#pragma unroll
    for (int i = 0; i < S::kLoads; ++i) {
      const int j = kt + row0 + i * S::kRowStep;
      const bool valid = ids[i] >= 0;
      long long src = 0;
      if (valid) {
        src = contiguous ? static_cast<long long>(ids[i] + j) * row_elems + head_offset
                         : static_cast<long long>(ids[i]) * page_elems +
                               ((j & page_mask) * row_elems + head_offset);
      }
      const uint32_t at = static_cast<uint32_t>(swizzled<D>(row0 + i * S::kRowStep, chunk) * 2);
      cp_async16(kdst + at, kc + src, valid);
      cp_async16(vdst + at, vc + src, valid);
    }
  };
  // The tile's query rows into shared memory (zeros past the sequence's rows), copied before the
  // first table lookup so that their latency overlaps it; they join tile 0's group of copies.
  {
    const T* q = static_cast<const T*>(p.q);
#pragma unroll
    for (int i = 0; i < S::kQLoads; ++i) {
      const int c = tid + i * kThreads;
      const int m = c / S::kChunks;
      const int ch = c % S::kChunks;
      const int r = r0 + m;
      const bool valid = r < rows;
      const T* src = q;
      if (valid) {
        const int qi = query_of_row(p, r);
        const long long head = static_cast<long long>(g) * p.group + (r - qi * p.group);
        src = q + ((static_cast<long long>(q0) + qi) * p.heads_q + head) * D + ch * 8;
      }
      cp_async16(sq_addr + static_cast<uint32_t>(swizzled<D>(m, ch) * 2), src, valid);
    }
  }
  int ids[S::kLoads];
  {
    const int fill = load_entries(0, S::kStages - 1);
#pragma unroll
    for (int t = 0; t < S::kStages - 1; ++t) {
      if (t < n_tiles) {
        block_ids(t, 0, fill, ids);
        issue(t, t, ids);
      }
      cp_async_commit();
    }
  }
  int entry = load_entries(S::kStages - 1, 1);  // of the next tile to issue

  // This thread's rows (lane / 4 and lane / 4 + 8 of its warp's 16) and the keys each sees in
  // this split.
  const int rw = warp % S::kRowWarps;
  const int kw = warp / S::kRowWarps;
  int row_lo[2];
  int row_hi[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int r = r0 + 16 * rw + (lane >> 2) + 8 * i;
    row_lo[i] = 0;
    row_hi[i] = 0;
    if (r < rows) {
      // In 32 bits: off > -2^30 (sq < 2^30), window_left <= 2^30, d < sk.
      const int d = query_of_row(p, r) + off;
      row_lo[i] = p.window_left >= 0 ? max(ks, d - p.window_left) : ks;
      row_hi[i] = p.causal ? min(ke, d + 1) : ke;
    }
  }
  const bool warp_rows = r0 + 16 * rw < rows;  // some row of this warp is a query row

  float o[kDN][4];
#pragma unroll
  for (int dn = 0; dn < kDN; ++dn) o[dn][0] = o[dn][1] = o[dn][2] = o[dn][3] = 0.0f;
  float m_run[2] = {-INFINITY, -INFINITY};
  float l_run[2] = {0.0f, 0.0f};

  for (int t = 0; t < n_tiles; ++t) {
    const int next = t + S::kStages - 1;
    if (next < n_tiles) {
      block_ids(next, next, entry, ids);
      issue(next, next % S::kStages, ids);
      entry = load_entries(next + 1, 1);  // lands while this tile is computed
    }
    cp_async_commit();
    cp_async_wait<S::kStages - 1>();
    __syncthreads();  // tile t (and the query rows) visible to every warp
    if (warp_rows) {
      const int stage = t % S::kStages;
      const uint32_t kst = sk_addr + stage * S::kTileElems * 2;
      const uint32_t vst = sv_addr + stage * S::kTileElems * 2;
      const int kt = (t_begin + t) * kKeys + kw * S::kWarpKeys;  // this warp's first key
      float s[kNB][4];
#pragma unroll
      for (int nb = 0; nb < kNB; ++nb) s[nb][0] = s[nb][1] = s[nb][2] = s[nb][3] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        uint32_t a[4];
        ldmatrix_x4(a, sq_addr + swizzled<D>(16 * rw + (lane & 15), 2 * kk + (lane >> 4)) * 2);
#pragma unroll
        for (int nb2 = 0; nb2 < kNB / 2; ++nb2) {
          uint32_t bk[4];
          const int key = kw * S::kWarpKeys + 16 * nb2 + ((lane >> 4) << 3) + (lane & 7);
          ldmatrix_x4(bk, kst + swizzled<D>(key, 2 * kk + ((lane >> 3) & 1)) * 2);
          mma16816<T>(s[2 * nb2], a, bk[0], bk[1]);
          mma16816<T>(s[2 * nb2 + 1], a, bk[2], bk[3]);
        }
      }
      // Scores in log2 units, masked; the online softmax per row.
      float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
      for (int nb = 0; nb < kNB; ++nb) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int j = kt + 8 * nb + 2 * (lane & 3) + (e & 1);
          const int i = e >> 1;
          float x = s[nb][e];
          x = p.softcap > 0.0f ? p.softcap * tanhf(x * p.scale * p.inv_softcap) * kLog2e
                               : x * p.scale_log2;
          if (j < row_lo[i] || j >= row_hi[i]) x = -INFINITY;
          s[nb][e] = x;
          mx[i] = fmaxf(mx[i], x);
        }
      }
      float m_use[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
        mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
        const float m_new = fmaxf(m_run[i], mx[i]);
        m_use[i] = m_new == -INFINITY ? 0.0f : m_new;  // no key yet: every term is 0, never NaN
        const float alpha = exp2f(m_run[i] - m_use[i]);
        m_run[i] = m_new;
        l_run[i] *= alpha;
#pragma unroll
        for (int dn = 0; dn < kDN; ++dn) {
          o[dn][2 * i] *= alpha;
          o[dn][2 * i + 1] *= alpha;
        }
      }
#pragma unroll
      for (int nb = 0; nb < kNB; ++nb) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          s[nb][e] = exp2f(s[nb][e] - m_use[e >> 1]);
          l_run[e >> 1] += s[nb][e];
        }
      }
      // O += P V, P from the S registers (rounded to T once).
#pragma unroll
      for (int k16 = 0; k16 < S::kWarpKeys / 16; ++k16) {
        const uint32_t pa[4] = {pack2<T>(s[2 * k16][0], s[2 * k16][1]),
                                pack2<T>(s[2 * k16][2], s[2 * k16][3]),
                                pack2<T>(s[2 * k16 + 1][0], s[2 * k16 + 1][1]),
                                pack2<T>(s[2 * k16 + 1][2], s[2 * k16 + 1][3])};
        const int key = kw * S::kWarpKeys + 16 * k16 + (lane & 15);
#pragma unroll
        for (int dn2 = 0; dn2 < kDN / 2; ++dn2) {
          uint32_t bv[4];
          ldmatrix_x4_trans(bv, vst + swizzled<D>(key, 2 * dn2 + (lane >> 4)) * 2);
          mma16816<T>(o[2 * dn2], pa, bv[0], bv[1]);
          mma16816<T>(o[2 * dn2 + 1], pa, bv[2], bv[3]);
        }
      }
    }
    __syncthreads();  // every warp is done with the stage the next iteration refills
  }
  cp_async_wait<0>();

#pragma unroll
  for (int i = 0; i < 2; ++i) {
    l_run[i] += __shfl_xor_sync(0xffffffffu, l_run[i], 1);
    l_run[i] += __shfl_xor_sync(0xffffffffu, l_run[i], 2);
  }

  // Where row m of the tile goes: its query token and head, or false past the sequence's rows.
  const auto locate = [&](int m, int& token, int& head) {
    const int r = r0 + m;
    if (r >= rows) return false;
    const int qi = query_of_row(p, r);
    token = q0 + qi;
    head = g * p.group + (r - qi * p.group);
    return true;
  };
  const bool one_split = p.splits == 1;
  const auto write_lse = [&](int token, int head, float value) {
    if (one_split) {
      p.lse[static_cast<long long>(head) * p.total_q + token] = value;
    } else {
      p.part_lse[(static_cast<long long>(split) * p.heads_q + head) * p.total_q + token] = value;
    }
  };
  const auto out_index = [&](int token, int head) {
    return (static_cast<long long>(token) * p.heads_q + head) * D;
  };
  const long long part_base = static_cast<long long>(split) * p.total_q * p.heads_q * D;

  if constexpr (S::kKeyWarps == 1) {
    // Each warp holds whole rows: normalize and write them from the registers.
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      int token = 0;
      int head = 0;
      if (!locate(16 * rw + (lane >> 2) + 8 * i, token, head)) continue;
      const float inv = l_run[i] > 0.0f ? 1.0f / l_run[i] : 0.0f;
      const long long at = out_index(token, head) + 2 * (lane & 3);
#pragma unroll
      for (int dn = 0; dn < kDN; ++dn) {
        const float x0 = o[dn][2 * i] * inv;
        const float x1 = o[dn][2 * i + 1] * inv;
        if (one_split) {
          *reinterpret_cast<uint32_t*>(static_cast<T*>(p.out) + at + 8 * dn) = pack2<T>(x0, x1);
        } else {
          *reinterpret_cast<float2*>(p.part_out + part_base + at + 8 * dn) = make_float2(x0, x1);
        }
      }
      if ((lane & 3) == 0) {
        write_lse(token, head, l_run[i] > 0.0f ? (m_run[i] + log2f(l_run[i])) * kLn2 : -INFINITY);
      }
    }
  } else {
    // The warps' states of the same 16 rows over different keys, merged through shared memory
    // (the stages are free: every copy has landed and every warp passed the last barrier).
    float* merge_o = reinterpret_cast<float*>(smem + ROWS * D * 2);  // [warps][16][stride]
    float* merge_m = merge_o + S::kKeyWarps * 16 * S::kMergeStride;  // [warps][16]
    float* merge_l = merge_m + S::kKeyWarps * 16;
    __syncthreads();
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int m = (lane >> 2) + 8 * i;
      float* row = merge_o + (kw * 16 + m) * S::kMergeStride + 2 * (lane & 3);
#pragma unroll
      for (int dn = 0; dn < kDN; ++dn) {
        *reinterpret_cast<float2*>(row + 8 * dn) = make_float2(o[dn][2 * i], o[dn][2 * i + 1]);
      }
      if ((lane & 3) == 0) {
        merge_m[kw * 16 + m] = m_run[i];
        merge_l[kw * 16 + m] = l_run[i];
      }
    }
    __syncthreads();
    // The tile's valid rows' (row, 4 columns) items spread over all 128 threads: a decoding tile
    // holds few rows (group 4: 4 of 16), whose merge would otherwise fall to a quarter of them.
    constexpr int kVecs = D / 4;  // 4-column items per row
    const int valid_rows = min(ROWS, rows - r0);
    for (int item = tid; item < valid_rows * kVecs; item += kThreads) {
      const int m = item / kVecs;
      const int c = (item % kVecs) * 4;
      int token = 0;
      int head = 0;
      locate(m, token, head);
      float big = -INFINITY;
#pragma unroll
      for (int w = 0; w < S::kKeyWarps; ++w) big = fmaxf(big, merge_m[w * 16 + m]);
      float4 x = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      float sum = 0.0f;
#pragma unroll
      for (int w = 0; w < S::kKeyWarps; ++w) {
        const float weight = big == -INFINITY ? 0.0f : exp2f(merge_m[w * 16 + m] - big);
        sum += merge_l[w * 16 + m] * weight;
        const float4 v =
            *reinterpret_cast<const float4*>(merge_o + (w * 16 + m) * S::kMergeStride + c);
        x.x += v.x * weight;
        x.y += v.y * weight;
        x.z += v.z * weight;
        x.w += v.w * weight;
      }
      const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
      const long long at = out_index(token, head) + c;
      if (one_split) {
        uint2 packed;
        packed.x = pack2<T>(x.x * inv, x.y * inv);
        packed.y = pack2<T>(x.z * inv, x.w * inv);
        *reinterpret_cast<uint2*>(static_cast<T*>(p.out) + at) = packed;
      } else {
        *reinterpret_cast<float4*>(p.part_out + part_base + at) =
            make_float4(x.x * inv, x.y * inv, x.z * inv, x.w * inv);
      }
      if (c == 0) write_lse(token, head, sum > 0.0f ? (big + log2f(sum)) * kLn2 : -INFINITY);
    }
  }
}

}  // namespace tileops::cuda_kernels::paged_detail
