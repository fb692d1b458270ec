// Internal: the Hopper varlen attention forward kernel (FlashAttention-3 structure). The host side
// (tensor maps, instantiations, launch) is attention_varlen_launch_cuda.cu and the per-head-dim
// files attention_varlen_d*_cuda.cu; the consumers' arithmetic (wgmma issues, softmax, stores)
// is attention_varlen_consumer.cuh; the design: docs/design/attention-kernels.md.
//
// Block of 384 threads: warpgroup 0 is the producer (its first warp's lane 0 issues the TMA
// loads; 24 or 56 registers after setmaxnreg), warpgroups 1 and 2 are consumers (240 or 224), each
// owning 64 of the tile's 128 query rows. Shared memory: the Q tile [128 x D] and STAGES stages
// of K [BN x D] and V [BN x D], each as D / 64 column chunks of rows of 128 bytes in the 128-byte
// swizzle (what TMA writes and the wgmma descriptors read). mbarriers: Q full / empty, and per
// stage K full / empty and V full / empty (separate, so S = Q K^T starts before V lands).
//
// Consumer warpgroup, per tile (key blocks from the last to the first; the first one visited
// alone, then each step): issue S_n = Q K_n^T (SS wgmma, K-major) and O += P_{n+1} V_{n+1} (RS
// wgmma: P from registers, V MN-major), wait for S_n only, release K_n, mask (boundary blocks
// only), online softmax in fp32 (exp2 with the scale folded into one FFMA), wait for the PV,
// release V_{n+1}, rescale O, convert P_n. The softmax of block n runs while the tensor cores do
// the PV of block n + 1 (intra-warpgroup overlap); with pingpong the two warpgroups take turns
// issuing (named barriers 1 and 2), so one's softmax overlaps the other's GEMMs. Epilogue: O / l
// and lse from registers, rows past the sequence never written.
//
// PAGED (the paged attention's prefill-shaped calls): the keys of sequence b are its first
// seqused_k[b] rows in its pages (block_table), the caches viewed as [num_blocks * page_size,
// heads_kv, D]. The producer warp's lanes each take one page-sized box (min(page_size, BN) rows)
// of a key block: lane j reads the table entry of box j and issues its TMA loads into rows
// [j * box, (j + 1) * box) of the stage, all completing on the stage's barrier (the same bytes
// as one box of BN rows). A box past the sequence's pages (or the table's width, or whose entry
// lies outside the cache) loads from a row past the cache: TMA fills zeros and the table entry
// is never read. The rows of the last page past seqused_k hold whatever the cache holds (NaN in
// the tests): their scores are masked to -inf, so P is exactly 0 there, but 0 x NaN in P V is
// NaN. So a V block holding such rows lands on a producer-only barrier (v_raw) instead; the
// producer warp waits for it, zeroes those rows with shared-memory stores, makes them visible to
// the tensor cores' async proxy (fence.proxy.async.shared::cta) and then arrives on the stage's
// V barrier. That happens for at most one key block per tile (the one holding key seqused_k - 1
// of a partial last page).
// V_ROWS (PAGED with pages of V_ROWS = 16 keys at D 128 and 256): each load costs a fixed time,
// and D / 64 loads per page of K and of V made page 16 the slowest page size, so V stages are page
// major ([page][chunk][V_ROWS rows], v_row_offset) and one 4D load brings a page's every chunk;
// each 16-key k-step of P V lies in one page. K stays chunk major (the Q K^T wgmma needs its keys
// at one stride).
//
// Not paged, a key block past a sequence's last key holds the next sequence's keys (TMA reads the
// packed tensors): masked the same way, and its V rows zeroed the same way, so that a NaN or an
// infinite value of one sequence never reaches another's output. At most one key block per tile,
// and none where the sequence's length is a multiple of BN.
#pragma once

#include "kernels/attention/attention_varlen_consumer.cuh"
#include "kernels/attention/attention_varlen_schedule.cuh"
#include "kernels/attention/attention_wgmma.cuh"
#include "kernels/common/mbarrier.cuh"
#include "kernels/common/vectors.cuh"

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace tileops::cuda_kernels::attention_detail {
namespace {

template <int D, int BN, int STAGES, int QSTAGES>
struct VarlenShape {
  static constexpr int kChunks = D / 64;
  static constexpr int kQBytes = kChunks * kBlockM * 128;  // one Q stage
  static constexpr int kKVBytes = kChunks * BN * 128;      // one K (or V) stage
  static constexpr int kKOffset = QSTAGES * kQBytes;
  static constexpr int kVOffset = kKOffset + STAGES * kKVBytes;
  static constexpr int kBarOffset = kVOffset + STAGES * kKVBytes;
  // Q full / empty per Q stage, K and V full / empty per stage, tile full / empty per tile slot,
  // then the two tile slots (ints) and the v_raw barrier.
  static constexpr int kBarBytes = 8 * (2 * QSTAGES + 4 * STAGES + 4) + 8 + 8;
  static constexpr int kSmem = kBarOffset + kBarBytes + 1024;  // + slack to align to 1024
  static constexpr int kThreads = 384;
  static_assert(D == 64 || D == 128 || D == 256, "head dim 64, 128 or 256");
  static_assert(BN % 16 == 0 && BN >= 16 && BN <= 256, "key block: a multiple of 16");
  static_assert(QSTAGES == 1 || QSTAGES == 2, "one or two Q stages");
  static_assert(kSmem <= 232448, "over the 227 KB of shared memory a block can have");
};

// Registers per thread after setmaxnreg (128 x producer + 256 x consumer <= 64512, the block's
// 168 at launch): consumers with more than 64 + 64 accumulators (D 256, or a key block over 128)
// need 240, leaving the producer 24; otherwise the consumers take 224 and the producer 56, which
// its key-block loop (every lane, zeroing foreign V rows) fits without spilling.
template <int D, int BN>
constexpr bool kWideConsumer = D + BN > 256;
template <int D, int BN>
constexpr int kProducerRegs = kWideConsumer<D, BN> ? 24 : 56;
template <int D, int BN>
constexpr int kConsumerRegs = kWideConsumer<D, BN> ? 240 : 224;
constexpr int kSchedBarrier = 1;  // + consumer warpgroup index (0 or 1)

#if TILEOPS_SM90A_BODY

using hopper::fence_proxy_async_smem;
using hopper::fence_regs;
using hopper::smem_desc;
using hopper::tma_prefetch;
using hopper::wgmma_commit;
using hopper::wgmma_fence;
using hopper::wgmma_wait;
using vec::pack2;

__device__ __forceinline__ void st_shared_s32(uint32_t addr, int v) {
  asm volatile("st.shared.s32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}

__device__ __forceinline__ int ld_shared_s32(uint32_t addr) {
  int v;
  asm volatile("ld.shared.s32 %0, [%1];\n" : "=r"(v) : "r"(addr) : "memory");
  return v;
}

// mbarrier::wait; built with TILEOPS_ATTENTION_WATCHDOG (test harnesses only), a wait that spins
// for seconds prints which barrier and traps, so a pipeline bug fails instead of hanging.
__device__ __forceinline__ void wait_barrier(uint32_t bar, uint32_t parity) {
#ifdef TILEOPS_ATTENTION_WATCHDOG
  for (long long spins = 0;; ++spins) {
    uint32_t done = 0;
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
    if (done != 0) return;
    if (spins == (1ll << 24)) {
      printf("attention_varlen watchdog: block %d thread %d stuck on barrier %u parity %u\n",
             static_cast<int>(blockIdx.x), static_cast<int>(threadIdx.x), bar & 0xfffu, parity);
      __trap();
    }
  }
#else
  mbarrier::wait(bar, parity);
#endif
}

// Issues the TMA loads of `rows` keys from cache row `row` of KV head hk into the K or V stage
// rows at `dst` (D / 64 column chunks, each BN rows of 128 bytes), completing on `bar`.
template <int D, int BN>
__device__ __forceinline__ void load_key_rows(uint32_t dst, const CUtensorMap* map, int hk, int row,
                                              uint32_t bar) {
#pragma unroll
  for (int c = 0; c < D / 64; ++c)
    tma_load_3d(dst + static_cast<uint32_t>(c * BN * 128), map, 64 * c, hk, row, bar);
}

// The same for a V stage; V_ROWS (pages of V_ROWS keys, a page-major stage): the box's every
// chunk in one load of the make_tma_map_row_chunks map, half the loads of D 128's two chunks.
template <int D, int BN, int V_ROWS>
__device__ __forceinline__ void load_value_rows(uint32_t dst, const CUtensorMap* map, int hk,
                                                int row, uint32_t bar) {
  if constexpr (V_ROWS > 0) {
    tma_load_4d(dst, map, 0, row, 0, hk, bar);
  } else {
    load_key_rows<D, BN>(dst, map, hk, row, bar);
  }
}

// Paged keys: the cache row where box j (p.box_rows keys from key n * BN + j * p.box_rows) of
// key block n of the tile's sequence starts, or p.cache_rows (zeros) for a box past the
// sequence's `pages` or whose table entry lies outside the cache. Entries past `pages` are never
// read.
template <int BN>
__device__ __forceinline__ int paged_box_row(const VarlenParams& p, const Tile& t, int pages, int n,
                                             int j) {
  const int key = n * BN + j * p.box_rows;
  const int page = key >> p.page_shift;
  if (page >= pages) return p.cache_rows;
  const int entry = __ldg(p.block_table + static_cast<long long>(t.b) * p.table_width + page);
  if (entry < 0 || entry >= p.num_blocks) return p.cache_rows;
  return (entry << p.page_shift) + (key & (p.page_size - 1));
}

// Zeroes rows [r0, r1) of a K / V stage at `stage` (all D / 64 chunks; a row's 128 bytes stay
// that row's under the swizzle), by the 32 lanes of a warp, and makes the zeros visible to the
// async proxy (the wgmma that reads the stage).
template <int D, int BN, int V_ROWS = 0>
__device__ __forceinline__ void zero_stage_rows(uint32_t stage, int r0, int r1, int lane) {
  const int per_chunk = (r1 - r0) * 8;  // 16-byte pieces
  for (int i = lane; i < per_chunk * (D / 64); i += 32) {
    const int c = i / per_chunk;
    const int r = r0 + (i % per_chunk) / 8;
    const uint32_t addr = stage + c * kVChunkBytes<BN, V_ROWS> + v_row_offset<D, BN, V_ROWS>(r) +
                          static_cast<uint32_t>((i % 8) * 16);
    asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};\n" ::"r"(addr), "r"(0) : "memory");
  }
  fence_proxy_async_smem();
}

#endif  // TILEOPS_SM90A_BODY

template <typename T, int D, int BN, int STAGES, int QSTAGES, bool TRANSFORM, bool PAGED,
          int V_ROWS>
__global__ void __launch_bounds__(384, 1)
    attention_varlen_kernel(const __grid_constant__ CUtensorMap map_q,
                            const __grid_constant__ CUtensorMap map_k,
                            const __grid_constant__ CUtensorMap map_v, const VarlenParams p) {
  using S = VarlenShape<D, BN, STAGES, QSTAGES>;
#if !TILEOPS_SM90A_BODY
  // Compiled for a target without the sm_90a features: never launched there (the host checks
  // the device's compute capability).
  __trap();
#else
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  const uint32_t base = (raw + 1023u) & ~1023u;
  const uint32_t smem_q = base;
  const uint32_t smem_k = base + S::kKOffset;
  const uint32_t smem_v = base + S::kVOffset;
  const uint32_t full_q = base + S::kBarOffset;
  const uint32_t empty_q = full_q + 8 * QSTAGES;
  const uint32_t full_k = empty_q + 8 * QSTAGES;
  const uint32_t empty_k = full_k + 8 * STAGES;
  const uint32_t full_v = empty_k + 8 * STAGES;
  const uint32_t empty_v = full_v + 8 * STAGES;
  const uint32_t tile_full = empty_v + 8 * STAGES;
  const uint32_t tile_empty = tile_full + 16;
  const uint32_t tile_slot = tile_empty + 16;
  const uint32_t v_raw = tile_slot + 8;  // a V block with rows to zero lands here

  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid >> 5;
  const int lane = tid & 31;
  // Broadcast from lane 0 so the compiler knows the role is warp-uniform (otherwise it treats
  // the consumer branch as divergent and serializes every wgmma).
  const int wg = __shfl_sync(0xffffffffu, warp >> 2, 0);
  const int grid = static_cast<int>(gridDim.x);
  const int block = static_cast<int>(blockIdx.x);

  if (tid == 0) {
    for (int s = 0; s < QSTAGES; ++s) {
      mbarrier::init(full_q + 8 * s, 1);
      mbarrier::init(empty_q + 8 * s, 8);  // one arrival per consumer warp
    }
    for (int s = 0; s < STAGES; ++s) {
      mbarrier::init(full_k + 8 * s, 1);
      mbarrier::init(empty_k + 8 * s, 8);
      mbarrier::init(full_v + 8 * s, 1);
      mbarrier::init(empty_v + 8 * s, 8);
    }
    for (int s = 0; s < 2; ++s) {
      mbarrier::init(tile_full + 8 * s, 1);
      mbarrier::init(tile_empty + 8 * s, 8);
    }
    mbarrier::init(v_raw, 1);
    mbarrier::fence_init();
  }
  __syncthreads();

  if (wg == 0) {
    regs_decrease<kProducerRegs<D, BN> >();
    if (warp != 0) return;
    // Producer: every lane runs the cursor and the load loop; lane 0 claims tiles, publishes each
    // tile index to the consumers (two slots) and issues the loads (PAGED: lane j issues box j of
    // each key block); every lane zeroes the rows of a V block past the sequence.
    if (lane == 0) {
      tma_prefetch(&map_q);
      tma_prefetch(&map_k);
      tma_prefetch(&map_v);
    }
    TileCursor<PAGED> cursor;
    Tile t;
    int q_iter = 0;
    int kv_iter = 0;
    int raw_iter = 0;  // uses of v_raw
    int next = block;  // the first tile in both orders
    for (int k = 0;; ++k) {
      if (lane == 0) {
        const uint32_t j = static_cast<uint32_t>(k & 1);
        wait_barrier(tile_empty + 8 * j, static_cast<uint32_t>((k >> 1) & 1) ^ 1u);
        st_shared_s32(tile_slot + 4 * j, next);
        mbarrier::arrive(tile_full + 8 * j);  // release: the slot's value is visible to waiters
      }
      __syncwarp();
      if (!cursor.find(p, next, t)) break;  // the consumers stop at the same index
      tile_key_blocks<BN, PAGED>(p, t);
      if (t.n_end > t.n_begin) {
        const int hk = tile_first_head<PAGED>(p, t.head) / p.group;
        const int blocks = t.n_end - t.n_begin;
        // PAGED: the sequence's pages (at most the table's width), the boxes of a key block, and
        // the keys past its real pages' rows (zeros from TMA, never rows of the cache).
        int pages = 0;
        int boxes = 1;
        int box_bytes = 0;
        // Not paged: every row of a key block past the sequence is another sequence's key (or
        // past the tensor: zeros from TMA), zeroed in V like the last page's rows below.
        int real_end = t.n_end * BN;
        if constexpr (PAGED) {
          pages = (t.sk + p.page_size - 1) >> p.page_shift;
          if (pages > p.table_width) pages = p.table_width;
          boxes = BN / p.box_rows;
          box_bytes = p.box_rows * 128;
          real_end = pages << p.page_shift;
        }
        const int qs = q_iter % QSTAGES;
        const uint32_t q_parity = static_cast<uint32_t>((q_iter / QSTAGES) & 1);
        for (int i = 0; i < blocks; ++i) {
          const int n = t.n_end - 1 - i;
          const int stage = kv_iter % STAGES;
          const uint32_t parity = static_cast<uint32_t>((kv_iter / STAGES) & 1) ^ 1u;
          const int row =
              PAGED ? (lane < boxes ? paged_box_row<BN>(p, t, pages, n, lane) : 0) : t.k0 + n * BN;
          const uint32_t k_dst =
              smem_k + static_cast<uint32_t>(stage * S::kKVBytes + lane * box_bytes);
          // (V_ROWS: box j is page j of a page-major stage, every chunk of its rows)
          const uint32_t v_dst = smem_v + static_cast<uint32_t>(stage * S::kKVBytes) +
                                 (V_ROWS > 0 ? v_row_offset<D, BN, V_ROWS>(lane * V_ROWS)
                                             : static_cast<uint32_t>(lane * box_bytes));
          wait_barrier(empty_k + 8 * stage, parity);
          if (lane == 0) mbarrier::arrive_expect_tx(full_k + 8 * stage, S::kKVBytes);
          if constexpr (PAGED) __syncwarp();
          if (lane < boxes) load_key_rows<D, BN>(k_dst, &map_k, hk, row, full_k + 8 * stage);
          if (i == 0 && lane == 0) {
            // Q after the first K block: the K load is not held up by the previous tile.
            wait_barrier(empty_q + 8 * qs, q_parity ^ 1u);
            mbarrier::arrive_expect_tx(full_q + 8 * qs, S::kQBytes);
#pragma unroll
            for (int c = 0; c < S::kChunks; ++c)
              // Packed: a box of group heads x kBlockM / group tokens, rows token-major.
              tma_load_3d(smem_q + qs * S::kQBytes + c * kBlockM * 128, &map_q, 64 * c,
                          tile_first_head<PAGED>(p, t.head),
                          t.q0 + static_cast<int>(row_token<PAGED>(p, t.m_block * kBlockM)),
                          full_q + 8 * qs);
          }
          wait_barrier(empty_v + 8 * stage, parity);
          // Rows [z0, z1) of this block are past the sequence's keys (PAGED: rows of the last
          // page past seqused_k; else the next sequence's keys).
          const int z0 = (t.sk > n * BN ? t.sk : n * BN) - n * BN;
          const int z1 = (real_end < (n + 1) * BN ? real_end : (n + 1) * BN) - n * BN;
          if (z0 < z1) {
            if (lane == 0) mbarrier::arrive_expect_tx(v_raw, S::kKVBytes);
            __syncwarp();
            if (lane < boxes) load_value_rows<D, BN, V_ROWS>(v_dst, &map_v, hk, row, v_raw);
            wait_barrier(v_raw, static_cast<uint32_t>(raw_iter & 1));
            ++raw_iter;
            zero_stage_rows<D, BN, V_ROWS>(smem_v + static_cast<uint32_t>(stage * S::kKVBytes), z0,
                                           z1, lane);
            __syncwarp();
            if (lane == 0) mbarrier::arrive(full_v + 8 * stage);
          } else {
            if (lane == 0) mbarrier::arrive_expect_tx(full_v + 8 * stage, S::kKVBytes);
            if constexpr (PAGED) __syncwarp();
            if (lane < boxes)
              load_value_rows<D, BN, V_ROWS>(v_dst, &map_v, hk, row, full_v + 8 * stage);
          }
          ++kv_iter;
        }
      }
      if (t.n_end > t.n_begin) ++q_iter;
      if (p.tile_counter != nullptr) {
        int claimed = 0;
        if (lane == 0) claimed = grid + atomicAdd(p.tile_counter, 1);
        next = __shfl_sync(0xffffffffu, claimed, 0);
      } else {
        next = snake_tile(k + 1, block, grid);
      }
    }
  } else {
    regs_increase<kConsumerRegs<D, BN> >();
    const int cw = wg - 1;          // consumer warpgroup 0 or 1
    const int w4 = warp & 3;        // warp within it
    const int qc = 2 * (lane & 3);  // first column of this thread in each 8-column group
    const int row_in_tile = 64 * cw + 16 * w4 + (lane >> 2);
    const int my_bar = kSchedBarrier + cw;
    const int other_bar = kSchedBarrier + (cw ^ 1);
    const bool pingpong = p.pingpong != 0;
    if (pingpong && cw == 0) named_bar_arrive(my_bar, 256);  // warpgroup 0 issues first

    float o[D / 2];
    float s[BN / 2];
    uint32_t pf[BN / 4];
    RowStats st;
    TileCursor<PAGED> cursor;
    Tile t;
    int q_iter = 0;
    int kv_iter = 0;
    for (int k = 0;; ++k) {
      int index;
      {
        const uint32_t j = static_cast<uint32_t>(k & 1);
        wait_barrier(tile_full + 8 * j, static_cast<uint32_t>((k >> 1) & 1));
        // Lane 0 reads the slot and arrives (an arrival releases its own thread's read only, so
        // racecheck sees the producer's next store ordered after it), then broadcasts the index.
        index = 0;
        if (lane == 0) {
          index = ld_shared_s32(tile_slot + 4 * j);
          mbarrier::arrive(tile_empty + 8 * j);
        }
        index = __shfl_sync(0xffffffffu, index, 0);
      }
      if (!cursor.find(p, index, t)) break;
      tile_key_blocks<BN, PAGED>(p, t);
      const int row0 = t.m_block * kBlockM + row_in_tile;  // this thread's row g (h = 0)
      st.m[0] = st.m[1] = -INFINITY;
      st.l[0] = st.l[1] = 0.0f;
#pragma unroll
      for (int i = 0; i < D / 2; ++i) o[i] = 0.0f;
      if (t.n_end <= t.n_begin) {  // no query row sees a key
        store_rows<T, D, PAGED>(p, t, row0, o, st, qc);
        continue;
      }
      // Visible keys of this thread's rows [lo, hi), and of the warpgroup's rows: a key block
      // inside [lo_max, hi_min) needs no mask.
      const long long off = static_cast<long long>(t.sk) - t.sq;
      int lo[2];
      int hi[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const long long i = row_token<PAGED>(p, row0 + 8 * h);
        const long long l = p.window_left >= 0 ? i + off - p.window_left : 0;
        const long long u = p.causal ? i + off + 1 : t.sk;
        lo[h] = static_cast<int>(l < 0 ? 0 : (l > t.sk ? t.sk : l));
        hi[h] = static_cast<int>(u < 0 ? 0 : (u > t.sk ? t.sk : u));
      }
      // (tokens of the warpgroup's first and last rows)
      const long long wg_row = static_cast<long long>(t.m_block) * kBlockM + 64 * cw;
      const long long wg_first = row_token<PAGED>(p, wg_row);
      const long long wg_last =
          row_token<PAGED>(p, wg_row + 63 < t.rows - 1 ? wg_row + 63 : t.rows - 1);
      long long hi_min = t.sk;
      if (p.causal && wg_first + off + 1 < hi_min) hi_min = wg_first + off + 1;
      const long long lo_max = p.window_left >= 0 ? wg_last + off - p.window_left : 0;

      const int qs = q_iter % QSTAGES;
      const uint32_t q_wg = smem_q + static_cast<uint32_t>(qs * S::kQBytes + cw * 64 * 128);
      wait_barrier(full_q + 8 * qs, static_cast<uint32_t>((q_iter / QSTAGES) & 1));
      float scale[2];
      int n = t.n_end - 1;
      {
        const int stage = kv_iter % STAGES;
        const uint32_t parity = static_cast<uint32_t>((kv_iter / STAGES) & 1);
        wait_barrier(full_k + 8 * stage, parity);
        if (pingpong) named_bar_sync(my_bar, 256);
        wgmma_fence();
        issue_qk<T, D, BN>(s, q_wg, smem_k + static_cast<uint32_t>(stage * S::kKVBytes));
        wgmma_commit();
        if (pingpong) named_bar_arrive(other_bar, 256);
        wgmma_wait<0>();
        fence_regs(s);
        __syncwarp();
        if (lane == 0) {
          mbarrier::arrive(empty_k + 8 * stage);
          if (n == t.n_begin) mbarrier::arrive(empty_q + 8 * qs);
        }
        const long long n0 = static_cast<long long>(n) * BN;
        softmax_any<BN, TRANSFORM, kLazyRescale<D> >(s, p, n * BN, n0 < lo_max || n0 + BN > hi_min,
                                                     lo, hi, qc, st, scale);
        to_p<T, BN>(s, pf);
      }
      int v_iter = kv_iter++;
      for (n = t.n_end - 2; n >= t.n_begin; --n) {
        const int stage = kv_iter % STAGES;
        const uint32_t parity = static_cast<uint32_t>((kv_iter / STAGES) & 1);
        const int v_stage = v_iter % STAGES;
        const uint32_t v_parity = static_cast<uint32_t>((v_iter / STAGES) & 1);
        wait_barrier(full_k + 8 * stage, parity);
        // V before the fence: a wait between the two issues makes the compiler add a fence there.
        wait_barrier(full_v + 8 * v_stage, v_parity);
        if (pingpong) named_bar_sync(my_bar, 256);
        wgmma_fence();
        issue_qk<T, D, BN>(s, q_wg, smem_k + static_cast<uint32_t>(stage * S::kKVBytes));
        wgmma_commit();
        issue_pv<T, D, BN, V_ROWS>(o, pf, smem_v + static_cast<uint32_t>(v_stage * S::kKVBytes));
        wgmma_commit();
        if (pingpong) named_bar_arrive(other_bar, 256);
        wgmma_wait<1>();
        fence_regs(s);
        __syncwarp();
        if (lane == 0) {
          mbarrier::arrive(empty_k + 8 * stage);
          if (n == t.n_begin) mbarrier::arrive(empty_q + 8 * qs);
        }
        const long long n0 = static_cast<long long>(n) * BN;
        softmax_any<BN, TRANSFORM, kLazyRescale<D> >(s, p, n * BN, n0 < lo_max || n0 + BN > hi_min,
                                                     lo, hi, qc, st, scale);
        wgmma_wait<0>();
        fence_regs(o);
        fence_u32(pf);
        __syncwarp();
        if (lane == 0) mbarrier::arrive(empty_v + 8 * v_stage);
        rescale_o<D>(o, scale);
        to_p<T, BN>(s, pf);
        v_iter = kv_iter++;
      }
      {
        const int v_stage = v_iter % STAGES;
        const uint32_t v_parity = static_cast<uint32_t>((v_iter / STAGES) & 1);
        wait_barrier(full_v + 8 * v_stage, v_parity);
        wgmma_fence();
        issue_pv<T, D, BN, V_ROWS>(o, pf, smem_v + static_cast<uint32_t>(v_stage * S::kKVBytes));
        wgmma_commit();
        wgmma_wait<0>();
        fence_regs(o);
        fence_u32(pf);
        __syncwarp();
        if (lane == 0) mbarrier::arrive(empty_v + 8 * v_stage);
      }
      ++q_iter;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        st.l[h] += __shfl_xor_sync(0xffffffffu, st.l[h], 1);
        st.l[h] += __shfl_xor_sync(0xffffffffu, st.l[h], 2);
      }
      store_rows<T, D, PAGED>(p, t, row0, o, st, qc);
    }
  }
#endif
}

}  // namespace
}  // namespace tileops::cuda_kernels::attention_detail
