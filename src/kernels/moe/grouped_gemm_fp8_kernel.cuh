// Internal: the kernel of the FP8 block-scaled grouped GEMM on Hopper (e4m3 wgmma fed by TMA),
// both layouts; the host side is grouped_gemm_fp8_cuda.cu, the only file that includes this
// header. The semantics: manifest/moe.yaml (MoEGroupedGemmFP8FwdOp, MoEGroupedGemmFP8MaskedFwdOp);
// the design: docs/design/moe.md.
//
// The pipeline is the bf16 kernel's (grouped_gemm_wgmma_kernel.cuh): one producer warp feeding a
// ring of shared-memory stages by TMA, consumer warpgroups running wgmma, the same tile scheduler
// (with the masked layout's row groups: expert e owns rows [e max_m, e max_m + count_e)) and TMA
// store epilogue. A stage holds one K block of 128 (the scales' block): the A tile [block_m][128]
// and the B tile [block_n][128] of e4m3 bytes, rows of 128 bytes in the 128-byte swizzle, so the
// descriptors are the bf16 kernel's, and the block's scales (the tile rows' activation scales, the
// gate and up weight scales), which the producer warp's lanes copy with cp.async tracked by the
// stage's full barrier: the consumers' loop holds no global pointers and waits on no global load.
// The consumers address a stage's tiles, scales and wgmma descriptors as offsets from ones computed
// once; the two-wave tiles unroll the ring of stages (stage s in slot s, a tile entering the ring
// where the previous one left it), so that those offsets are constants.
//
// Consumer warpgroup w computes a 64 x 128 piece of the tile (m-slice w % (block_m / 64), n-slice
// w / (block_m / 64)). A 256-row tile gives each of the two warpgroups two pieces (waves: m-slices
// w and w + 2) computed one after the other from each stage, so that a stage's 48 KB feed twice
// the products of a 128 x 128 tile's 32 KB. The n-slice's 128 B rows are 128 output columns, or
// with a gated activation 64 gate rows then the 64 matching up rows (two TMA boxes), so that
// accumulator column groups i and i + 8 are gate and up of the same output columns. Narrow tiles
// (block_n 64, no activation: GEMMs of few rows, whose weights 128-column slices would spread over
// too few blocks) have one 64 x 64 slice, issued as m64n64k32.
//
// Per K block a warpgroup issues 4 wgmma m64n128k32 into block accumulators (the first with
// scale-d = 0), waits for them, and promotes them into the float32 accumulators: acc += s * blk
// with s = a_scale[row][kb] * b_scale[n-block][kb] (fused multiply-add), DeepSeek-V3's
// promotion, which bounds what the tensor core's narrower accumulation can lose to one K block.
// Where s is not finite (a scale of inf or NaN, or 0 times inf), the product of the block sums is
// not the manifest's value (a zero e4m3 value times an infinite scale is NaN there): those
// elements take sum_k (a_k s_a)(b_k s_b) in float32 from the stage's shared memory instead,
// before the stage is released.
//
// Rows past an expert's end and B rows past N read other rows (in bounds; past the tensors' end
// TMA fills zeros); a row or a column only reaches its own output element, which the epilogue
// masks. Afterwards the rows no expert covers (contiguous) or past the counts (masked) are zeroed.
#pragma once

#include "kernels/moe/grouped_gemm_epilogue.cuh"

#include "kernels/common/arch.cuh"
#include "kernels/common/mbarrier.cuh"
#include "kernels/common/tma.cuh"
#include "kernels/common/wgmma.cuh"

#include <cuda_bf16.h>
#include <cuda_fp8.h>

namespace tileops::cuda_kernels::moe_detail {

/// What the FP8 kernel reads (the tile scheduler reads offsets, M, E and n_tiles).
struct FP8GemmParams {
  const int32_t* offsets;  // contiguous: expert_offsets [E + 1]; masked: counts [E]
  const float* a_scales;   // [M, kblocks]
  const float* b_scales;   // [E, nblocks, kblocks]
  void* c;                 // [M, n_out] bfloat16
  int64_t M;               // rows of a (masked: E * max_m)
  int64_t N;
  int64_t K;
  int64_t n_out;
  int E;
  MoEActivation act;
  int n_tiles;
  int max_m;  // 0: the contiguous layout
  int kblocks;
  int nblocks;
  int tma_store;  // c is 16-byte aligned and n_out % 8 == 0
};

/// The masked layout's rows per expert (0: contiguous); the tile scheduler's switch.
__device__ __forceinline__ int masked_rows(const FP8GemmParams& p) {
  return p.max_m;
}

template <int BM, int BN, int STAGES>
struct FP8Shape {
  // A consumer warpgroup's slice: 64 rows x 128 columns, or the whole 64 columns of a narrow tile
  // (not gated: the host refuses a gated activation there).
  static constexpr int kSliceN = BN < 128 ? BN : 128;
  static constexpr int kAcc = kSliceN / 2;  // fp32 accumulators per thread
  static constexpr int kMSlices = BM / 64;
  static constexpr int kNSlices = BN / kSliceN;
  static constexpr int kSlices = kMSlices * kNSlices;
  // At most two consumer warpgroups (registers). A 256-row tile gives each two 64-row slices
  // (waves), computed one after the other from the same stage: wave v of warpgroup w is m-slice
  // 2 v + w, so that a tile of at most 128 rows keeps both warpgroups busy.
  static constexpr int kConsumers = kSlices < 2 ? kSlices : 2;
  static constexpr int kWaves = kSlices / kConsumers;
  static constexpr int kThreads = 128 * (kConsumers + 1);
  static constexpr int kABytes = BM * 128;
  static constexpr int kBBytes = BN * 128;
  static constexpr int kStageBytes = kABytes + kBBytes;
  // A store buffer: 64 rows x 64 bf16 columns.
  static constexpr int kChunkBytes = 64 * 128;
  static constexpr int kMaxSmem = 232448;  // the 227 KB of shared memory a block can have
  static constexpr int kStoreOffset = STAGES * kStageBytes;
  // Per stage: the activation scales of the tile's rows, then gate and up weight scales per
  // n-slice.
  static constexpr int kScaleBytes = (BM + 4) * 4;
  // Two store buffers per consumer warpgroup where they fit beside the stages, their scales and
  // barriers and the alignment slack (a chunk's TMA store then overlaps writing the next), else
  // one.
  static constexpr int kBesideStores = STAGES * (kStageBytes + kScaleBytes + 16) + 1024;
  static constexpr int kStoreBuffers =
      kBesideStores + kConsumers * 2 * kChunkBytes <= kMaxSmem ? 2 : 1;
  static constexpr int kScaleOffset = kStoreOffset + kConsumers * kStoreBuffers * kChunkBytes;
  static constexpr int kBarOffset = kScaleOffset + STAGES * kScaleBytes;
  static constexpr int kSmem = kBarOffset + 16 * STAGES + 1024;
  static_assert(BM == 64 || BM == 128 || BM == 256, "block_m must be 64, 128 or 256");
  static_assert(BN == 64 || BN == 128 || BN == 256, "block_n must be 64, 128 or 256");
  static_assert(kWaves == 1 || (kWaves == 2 && kNSlices == 1 && kSliceN == 128),
                "two waves only over the 64-row slices of a 256 x 128 tile (registers)");
  // The m-slice (64 rows) of warpgroup cw's wave v, and the n-slice of warpgroup cw.
  static constexpr int m_slice(int cw, int v) {
    return kWaves == 1 ? cw % kMSlices : v * kConsumers + cw;
  }
  static constexpr int n_slice(int cw) { return kWaves == 1 ? cw / kMSlices : 0; }
  static_assert(kSmem == kBesideStores + kConsumers * kStoreBuffers * kChunkBytes);
  static_assert(kSmem <= kMaxSmem, "over the 227 KB of shared memory a block can have");
  // (With the 1 KB the system reserves: desc_at's descriptor offsets do not carry.)
  static_assert(kMaxSmem + 1024 <= 1 << 18, "shared addresses of 18 bits");
};

namespace {

#if TILEOPS_SM90A_BODY

__device__ __forceinline__ float e4m3_at(uint32_t addr) {
  uint32_t v;
  asm volatile("ld.shared.u8 %0, [%1];\n" : "=r"(v) : "r"(addr));
  __nv_fp8_e4m3 x;
  x.__x = static_cast<__nv_fp8_storage_t>(v);
  return static_cast<float>(x);
}

// sum_k (a_k s_a)(b_k s_b) over the 128 bytes of a row of the A tile and one of the B tile (rows
// at 128-byte offsets of 1024-byte aligned tiles: 16-byte unit u of row r lies at u ^ (r % 8)).
__device__ __forceinline__ float exact_block(uint32_t a_row, int a_r, uint32_t b_row, int b_r,
                                             float sa, float sb) {
  float sum = 0.f;
#pragma unroll 1
  for (int k = 0; k < 128; ++k) {
    const float a =
        e4m3_at(a_row + static_cast<uint32_t>((((k >> 4) ^ (a_r & 7)) << 4) | (k & 15)));
    const float b =
        e4m3_at(b_row + static_cast<uint32_t>((((k >> 4) ^ (b_r & 7)) << 4) | (k & 15)));
    sum += (a * sa) * (b * sb);
  }
  return sum;
}

// acc += s * blk for one K block's sums of a 64-row slice (r_lo: the slice's tile row of the
// thread's first accumulator row) with s = a_scale(row) * b_scale(gate or up block); where s is
// not finite, the exact sum from the stage `st` instead (see the file comment).
template <class S>
__device__ __forceinline__ void promote(float (&acc)[S::kAcc], const float (&blk)[S::kAcc],
                                        uint32_t st, int r_lo, int ni, int lane, float sa0,
                                        float sa1, float sg, float su) {
  // s[h][g]: row half h (rows r_lo, r_lo + 8), column half g (gate / up).
  const float s00 = sa0 * sg;
  const float s10 = sa1 * sg;
  const float s01 = sa0 * su;
  const float s11 = sa1 * su;
  if (isfinite(s00) && isfinite(s10) && isfinite(s01) && isfinite(s11)) {
#pragma unroll
    for (int j = 0; j < S::kAcc; ++j) {
      const int h = (j >> 1) & 1;
      const bool up = j >= S::kAcc / 2;
      const float s = h == 0 ? (up ? s01 : s00) : (up ? s11 : s10);
      acc[j] = fmaf(s, blk[j], acc[j]);
    }
    return;
  }
  // Rare: the elements whose s is finite first (the block accumulators are then dead), then the
  // exact sums of the others through a local array (a loop, not unrolled, so that the common path
  // keeps its registers).
#pragma unroll
  for (int j = 0; j < S::kAcc; ++j) {
    const int h = (j >> 1) & 1;
    const bool up = j >= S::kAcc / 2;
    const float s = h == 0 ? (up ? s01 : s00) : (up ? s11 : s10);
    if (isfinite(s)) acc[j] = fmaf(s, blk[j], acc[j]);
  }
  float exact[S::kAcc];
#pragma unroll 1
  for (int j = 0; j < S::kAcc; ++j) {
    const int h = (j >> 1) & 1;
    const bool up = j >= S::kAcc / 2;
    exact[j] = 0.f;
    if (isfinite(h == 0 ? (up ? s01 : s00) : (up ? s11 : s10))) continue;
    const int ar = r_lo + 8 * h;                                               // A tile row
    const int br = ni * S::kSliceN + 8 * (j >> 2) + 2 * (lane & 3) + (j & 1);  // B tile row
    exact[j] = exact_block(st + static_cast<uint32_t>(ar * 128), ar,
                           st + static_cast<uint32_t>(S::kABytes + br * 128), br,
                           h == 0 ? sa0 : sa1, up ? su : sg);
  }
#pragma unroll
  for (int j = 0; j < S::kAcc; ++j) {
    const int h = (j >> 1) & 1;
    const bool up = j >= S::kAcc / 2;
    if (!isfinite(h == 0 ? (up ? s01 : s00) : (up ? s11 : s10))) acc[j] += exact[j];
  }
}

// The epilogue of one 64-row slice (m-slice mi; r_lo as for promote; col0 its first output
// column): a slice whose 64 rows all belong to the expert stores through the warpgroup's store
// buffers (S::kStoreBuffers) with TMA (`stores` counts the chunks stored so far), the others from
// registers. Row r_lo (+ 8) of the tile; column group i holds columns 8 i + 2 (lane % 4) (+ 1) of
// the slice.
template <class S>
__device__ __forceinline__ void store_slice(const FP8GemmParams& p, const float (&acc)[S::kAcc],
                                            const TileInfo& ti, int mi, int col0, int r_lo,
                                            uint32_t store_buf, int& stores,
                                            const CUtensorMap* tma_c, bool pair, int cw, int wt) {
  const int lane = wt & 31;
  const bool is_gated = p.act != MoEActivation::none;
  const int row = ti.row0 + mi * 64;
  if (p.tma_store != 0 && ti.rows >= (mi + 1) * 64) {
    if (S::kSliceN == 128 && is_gated) {
      if constexpr (S::kSliceN == 128) {  // (not instantiated for the narrow tiles)
        if (col0 < p.n_out) {
          store_chunk<__nv_bfloat16, S::kSliceN, true, S::kStoreBuffers - 1>(
              acc, 0, store_buf + (stores % S::kStoreBuffers) * S::kChunkBytes,
              stores >= S::kStoreBuffers, tma_c, col0, row, p.act, 1 + cw, wt);
          ++stores;
        }
      }
    } else {
#pragma unroll
      for (int ch = 0; ch < S::kSliceN / 64; ++ch) {
        if (col0 + 64 * ch >= p.n_out) break;
        store_chunk<__nv_bfloat16, S::kSliceN, false, S::kStoreBuffers - 1>(
            acc, ch, store_buf + (stores % S::kStoreBuffers) * S::kChunkBytes,
            stores >= S::kStoreBuffers, tma_c, col0 + 64 * ch, row, p.act, 1 + cw, wt);
        ++stores;
      }
    }
    return;
  }
  auto* C = static_cast<__nv_bfloat16*>(p.c);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = r_lo + 8 * h;
    if (r >= ti.rows) continue;
    __nv_bfloat16* crow = C + static_cast<int64_t>(ti.row0 + r) * p.n_out;
    if (S::kSliceN == 128 && is_gated) {
#pragma unroll
      for (int i = 0; i < S::kSliceN / 16; ++i) {
        const int64_t col = col0 + 8 * i + 2 * (lane & 3);
        constexpr int kUp = S::kSliceN / 16;  // the up half's first column group
        const float v0 = gated(p.act, acc[4 * i + 2 * h], acc[4 * (i + kUp) + 2 * h]);
        const float v1 = gated(p.act, acc[4 * i + 2 * h + 1], acc[4 * (i + kUp) + 2 * h + 1]);
        store_pair<__nv_bfloat16>(crow, col, p.n_out, pair, v0, v1);
      }
    } else {
#pragma unroll
      for (int i = 0; i < S::kSliceN / 8; ++i) {
        const int64_t col = col0 + 8 * i + 2 * (lane & 3);
        store_pair<__nv_bfloat16>(crow, col, p.n_out, pair, acc[4 * i + 2 * h],
                                  acc[4 * i + 2 * h + 1]);
      }
    }
  }
}

#endif  // TILEOPS_SM90A_BODY

// The first output column of n-slice ni of the tile, and the weight-scale block of its gate (or
// up) half (one each: the CUDA adapter admits block_n = 128 with N / 2 % 64 == 0 when gated).
template <class S>
__device__ __forceinline__ int slice_col0(const FP8GemmParams& p, const TileInfo& ti, int ni) {
  constexpr int BN = S::kSliceN * S::kNSlices;
  return p.act != MoEActivation::none ? ti.n_tile * (BN / 2) + ni * 64
                                      : ti.n_tile * BN + ni * S::kSliceN;
}
__device__ __forceinline__ int scale_block(const FP8GemmParams& p, int col0, bool up) {
  const int col = up && p.act != MoEActivation::none ? static_cast<int>(p.N / 2) + col0 : col0;
  return min(col / 128, p.nblocks - 1);
}

#if TILEOPS_SM90A_BODY

__device__ __forceinline__ float ld_shared_f32(uint32_t addr) {
  float v;
  asm volatile("ld.shared.f32 %0, [%1];\n" : "=f"(v) : "r"(addr));
  return v;
}

// The descriptor of the tile `bytes` past the one of `desc` (smem_desc's layout). The start address
// field (bits 0-13: (addr & 0x3ffff) >> 4) takes the offset without a carry: a block's shared
// addresses are below 256 KB (FP8Shape's static_assert), so that the high half stays a constant.
__device__ __forceinline__ uint64_t desc_at(uint64_t desc, int bytes) {
  const uint32_t lo = static_cast<uint32_t>(desc) + static_cast<uint32_t>(bytes >> 4);
  return (desc & ~static_cast<uint64_t>(0xffffffffu)) | lo;
}

// The producer warp's copies of K block kb's scales into a stage: the tile's activation scales (0
// past its rows) and each n-slice's gate and up weight scales, tracked by the stage's full
// barrier through one arrival per lane.
template <class S>
__device__ __forceinline__ void stage_scales(const FP8GemmParams& p, const TileInfo& ti, int kb,
                                             uint32_t dst, int lane, uint32_t full) {
  constexpr int BM = S::kMSlices * 64;
  // One running offset, opaque to the compiler: else it keeps a 64-bit offset per row across the
  // K loop, past the producer warp's 40 registers.
  int64_t off = static_cast<int64_t>(ti.row0 + lane) * p.kblocks + kb;
  const int64_t stride = static_cast<int64_t>(32) * p.kblocks;
#pragma unroll
  for (int r = lane; r < BM; r += 32) {
    const bool valid = r < ti.rows;
    mbarrier::copy4_async(dst + 4 * r, p.a_scales + (valid ? off : kb), valid);
    off += stride;
    asm("" : "+l"(off));
  }
  if (lane < 2 * S::kNSlices) {
    const int blk = scale_block(p, slice_col0<S>(p, ti, lane >> 1), (lane & 1) != 0);
    const float* src =
        p.b_scales + (static_cast<int64_t>(ti.expert) * p.nblocks + blk) * p.kblocks + kb;
    mbarrier::copy4_async(dst + 4 * BM + 4 * lane, src, true);
  }
  mbarrier::arrive_on_copies(full);
}

#endif  // TILEOPS_SM90A_BODY

// The persistent grid's warps zero the rows past each expert's count (masked layout). `rank` /
// `count`: this warp among the grid's warps.
__device__ void zero_past_counts(const FP8GemmParams& p, long long rank, long long count) {
  const int lane = static_cast<int>(threadIdx.x & 31u);
  auto* c = static_cast<__nv_bfloat16*>(p.c);
  const bool vec = (reinterpret_cast<uintptr_t>(c) & 15u) == 0 && (p.n_out & 7) == 0;
  for (long long r = rank; r < p.M; r += count) {
    const int e = static_cast<int>(r / p.max_m);
    const int local = static_cast<int>(r - static_cast<long long>(e) * p.max_m);
    if (local < clamp_offset(__ldg(p.offsets + e), p.max_m)) continue;
    __nv_bfloat16* row = c + r * p.n_out;
    if (vec) {
      uint4* v = reinterpret_cast<uint4*>(row);
      for (int64_t i = lane; i < p.n_out / 8; i += 32) v[i] = make_uint4(0u, 0u, 0u, 0u);
    } else {
      for (int64_t i = lane; i < p.n_out; i += 32) row[i] = __float2bfloat16(0.0f);
    }
  }
}

template <int BM, int BN, int STAGES>
__global__ void __launch_bounds__(FP8Shape<BM, BN, STAGES>::kThreads, 1)
    grouped_gemm_fp8_kernel(const __grid_constant__ CUtensorMap tma_a,
                            const __grid_constant__ CUtensorMap tma_b,
                            const __grid_constant__ CUtensorMap tma_c, const FP8GemmParams p) {
  using S = FP8Shape<BM, BN, STAGES>;
#if !TILEOPS_SM90A_BODY
  __trap();  // never launched there (the host checks the compute capability)
#else
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  const uint32_t base = (raw + 1023u) & ~1023u;
  const uint32_t full_bar = base + S::kBarOffset;
  const uint32_t empty_bar = full_bar + 8 * STAGES;

  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int wg = warp >> 2;
  const int KT = p.kblocks;
  const int N = static_cast<int>(p.N);
  const bool is_gated = p.act != MoEActivation::none;

  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbarrier::init(full_bar + 8 * s, 1 + 32);  // the tiles' bytes, the scale copies per lane
      mbarrier::init(empty_bar + 8 * s, 128 * S::kConsumers);  // every consumer thread
    }
    mbarrier::fence_init();
  }
  __syncthreads();

  if (wg == 0) {
    // The producer warpgroup gives registers to the consumers (two of them hold 128 accumulators
    // each, 192 with two waves, and the rare exact path of non-finite scales).
    if constexpr (S::kConsumers == 2) asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
    if (warp == 0) {
      // Producer: every lane runs the cursor, lane 0 issues the tile loads, then every lane
      // copies some of the stage's scales (each lane has seen the stage empty).
      if (lane == 0) {
        tma_prefetch(&tma_a);
        tma_prefetch(&tma_b);
      }
      TileCursor cursor;
      TileInfo ti;
      int stage = 0;
      uint32_t phase = 0;
      for (long long t = blockIdx.x; cursor.find(p, BM, t, ti); t += gridDim.x) {
        const int en = ti.expert * N;
        for (int kb = 0; kb < KT; ++kb) {
          const uint32_t full = full_bar + 8 * stage;
          // Every lane waits: its scale copies below overwrite what the consumers read.
          mbarrier::wait(empty_bar + 8 * stage, phase ^ 1u);
          if (lane == 0) {
            mbarrier::arrive_expect_tx(full, S::kStageBytes);
            const uint32_t sa = base + static_cast<uint32_t>(stage * S::kStageBytes);
            tma_load_2d(sa, &tma_a, kb * 128, ti.row0, full);
#pragma unroll
            for (int ni = 0; ni < S::kNSlices; ++ni) {
              const uint32_t sb = sa + S::kABytes + static_cast<uint32_t>(ni * S::kSliceN * 128);
              if constexpr (S::kSliceN == 64) {
                tma_load_2d(sb, &tma_b, kb * 128, en + ti.n_tile * BN, full);
                continue;
              }
              int row_lo;
              int row_hi;
              if (is_gated) {
                row_lo = en + ti.n_tile * (BN / 2) + ni * 64;
                row_hi = row_lo + N / 2;
              } else {
                row_lo = en + ti.n_tile * BN + ni * 128;
                row_hi = row_lo + 64;
              }
              tma_load_2d(sb, &tma_b, kb * 128, row_lo, full);
              tma_load_2d(sb + 64 * 128, &tma_b, kb * 128, row_hi, full);
            }
          }
          __syncwarp();
          stage_scales<S>(p, ti, kb,
                          base + static_cast<uint32_t>(S::kScaleOffset + stage * S::kScaleBytes),
                          lane, full);
          if (++stage == STAGES) {
            stage = 0;
            phase ^= 1u;
          }
        }
        __syncwarp();
      }
    }
  } else {
    if constexpr (S::kConsumers == 2) asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
    // (Warp-uniform to the compiler: the descriptors below then live in uniform registers.)
    const int cw = __shfl_sync(0xffffffffu, wg - 1, 0);
    const int ni = S::n_slice(cw);
    const int w4 = warp & 3;
    const int wt = tid - 128 * wg;
    const int r_in = w4 * 16 + (lane >> 2);  // a slice row of accumulator half h = 0
    const uint32_t store_buf =
        base + static_cast<uint32_t>(S::kStoreOffset + cw * S::kStoreBuffers * S::kChunkBytes);
    int stores = 0;
    const bool pair = (reinterpret_cast<uintptr_t>(p.c) & 3u) == 0 && (p.n_out & 1) == 0;
    float acc[S::kWaves][S::kAcc];
    float blk[S::kAcc];
    // The descriptors of stage 0's A slice (wave 0) and B slice, and the addresses of this thread's
    // activation scale (row r_in of wave 0's slice) and of the n-slice's gate scale in stage 0:
    // the stages', waves' and k steps' lie at constant offsets from them (see desc_at).
    uint64_t desc_a = smem_desc(base + static_cast<uint32_t>(S::m_slice(cw, 0) * 64 * 128));
    uint64_t desc_b = smem_desc(base + static_cast<uint32_t>(S::kABytes + ni * S::kSliceN * 128));
    uint32_t sc_a =
        base + static_cast<uint32_t>(S::kScaleOffset + 4 * (S::m_slice(cw, 0) * 64 + r_in));
    const uint32_t sc_b =
        base + static_cast<uint32_t>(S::kScaleOffset + 4 * (S::kMSlices * 64 + 2 * ni));
    // Computed once: the compiler would otherwise rebuild them (from the thread index) per slot.
    asm("" : "+l"(desc_a), "+l"(desc_b), "+r"(sc_a));
    TileCursor cursor;
    TileInfo ti;
    // The ring position, as the producer's; a tile's K loop enters the unrolled ring at `stage`.
    int stage = 0;
    uint32_t phase = 0;
    for (long long t = blockIdx.x; cursor.find(p, BM, t, ti); t += gridDim.x) {
      const int rows = ti.rows;
      if (rows <= S::m_slice(cw, 0) * 64) {
        // None of this warpgroup's rows belongs to the expert: release the stages unread.
        for (int kb = 0; kb < KT; ++kb) {
          mbarrier::wait(full_bar + 8 * stage, phase);
          mbarrier::arrive(empty_bar + 8 * stage);
          if (++stage == STAGES) {
            stage = 0;
            phase ^= 1u;
          }
        }
        continue;
      }
      const int col0 = slice_col0<S>(p, ti, ni);
#pragma unroll
      for (int v = 0; v < S::kWaves; ++v) {
#pragma unroll
        for (int i = 0; i < S::kAcc; ++i) acc[v][i] = 0.f;
      }
      // One K block from stage s: a constant in the unrolled ring (the stage addresses and
      // descriptors are then immediate offsets), the ring position otherwise.
      const auto consume = [&](const int s) {
        mbarrier::wait(full_bar + 8 * s, phase);
        const uint32_t st = base + static_cast<uint32_t>(s * S::kStageBytes);
        const uint32_t so = static_cast<uint32_t>(s * S::kScaleBytes);
        const float sg = ld_shared_f32(sc_b + so);
        const float su = ld_shared_f32(sc_b + so + 4);
#pragma unroll
        for (int v = 0; v < S::kWaves; ++v) {
          const int mi = S::m_slice(cw, v);
          if (v > 0 && rows <= mi * 64) break;  // (warp-uniform) this and later waves: no rows
          // Wave v's slice: va rows past wave 0's (a constant: v * kConsumers slices).
          const uint32_t va = static_cast<uint32_t>((mi - S::m_slice(cw, 0)) * 64);
          const float sa0 = ld_shared_f32(sc_a + so + 4 * va);
          const float sa1 = ld_shared_f32(sc_a + so + 4 * (va + 8));
          fence_regs(blk);
          wgmma_fence();
#pragma unroll
          for (int ks = 0; ks < 4; ++ks) {
            const uint64_t da = desc_at(desc_a, s * S::kStageBytes + va * 128 + 32 * ks);
            const uint64_t db = desc_at(desc_b, s * S::kStageBytes + 32 * ks);
            if constexpr (S::kSliceN == 64) {
              wgmma_n64_e4m3(blk, da, db, ks);
            } else {
              wgmma_n128_e4m3(blk, da, db, ks);
            }
          }
          wgmma_commit();
          wgmma_wait<0>();
          fence_regs(blk);
          promote<S>(acc[v], blk, st, mi * 64 + r_in, ni, lane, sa0, sa1, sg, su);
        }
        // Each thread releases its own scale reads (racecheck follows no release through a
        // __syncwarp and another lane's arrival).
        mbarrier::arrive(empty_bar + 8 * s);
      };
      for (int kb = 0; kb < KT;) {
        if constexpr (S::kWaves == 2) {
          // The ring unrolled (only here: the 6-stage tiles unrolled were slower, see
          // docs/perf/2026-12-07-h100-fp8-unrolled-ring.md); the first pass enters at the ring's
          // position, the last may end early.
#pragma unroll
          for (int s = 0; s < STAGES; ++s) {
            if (s >= stage && kb < KT) {  // (warp-uniform)
              consume(s);
              stage = s + 1;
              ++kb;
            }
          }
        } else {
          consume(stage);
          ++stage;
          ++kb;
        }
        if (stage == STAGES) {
          stage = 0;
          phase ^= 1u;
        }
      }
#pragma unroll
      for (int v = 0; v < S::kWaves; ++v) {
        const int mi = S::m_slice(cw, v);
        if (v > 0 && rows <= mi * 64) break;
        store_slice<S>(p, acc[v], ti, mi, col0, mi * 64 + r_in, store_buf, stores, &tma_c, pair, cw,
                       wt);
      }
    }
    if (wt == 0) bulk_wait_all();  // the TMA stores have read their buffers and written c
  }
  if (p.max_m > 0) {
    zero_past_counts(p, (static_cast<long long>(blockIdx.x) * S::kThreads + tid) / 32,
                     static_cast<long long>(gridDim.x) * S::kThreads / 32);
  } else {
    zero_uncovered<__nv_bfloat16>(p, static_cast<long long>(blockIdx.x) * S::kThreads + tid,
                                  static_cast<long long>(gridDim.x) * S::kThreads);
  }
#endif
}

}  // namespace
}  // namespace tileops::cuda_kernels::moe_detail
