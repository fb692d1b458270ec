// CUDA kernels of RMSNorm and fused add+RMSNorm, with a plain launch API (internal header: no
// CUDA headers here; the stream is passed as void* and is a cudaStream_t).
//
// Semantics, for every row of length `cols`:
//   plain: inv = rsqrt(mean_j(x_j^2) + eps) in fp32; y_j = T(x_j * inv * w_j).
//   fused (residual != nullptr): r_j = T(x_j + residual_j) (fp32 sum, one rounding to T) is written
//   to `residual` in place, then y = RMSNorm(r) from the rounded r. x is never written unless the
//   caller passes y == x, which is allowed (every element is read before it is written, by the
//   thread that writes it).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tileops/core/dtype.h"

namespace tileops::cuda_kernels {

/// How the grid of a launch is sized (every kernel loops over row groups with a grid stride).
enum class RmsGrid : int {
  /// multiprocessors x blocks_per_sm blocks, at most one per row group (the default).
  persistent = 0,
  /// The persistent grid shrunk to ceil(groups / ceil(groups / persistent)) blocks, so that every
  /// block loops over the same number of row groups (a last wave of whole loops).
  balanced = 1,
  /// One block per row group: the hardware schedules the blocks as others finish.
  all = 2,
};

/// How one launch of the RMSNorm kernels is shaped. Every field is checked by launch_rms_norm;
/// a configuration that cannot serve a shape raises SignatureError.
struct RmsNormConfig {
  /// Threads per block: a multiple of 32, at most 1024.
  int threads = 0;
  /// Rows handled at once by one block: threads / rows_per_block threads work on one row. That
  /// count (threads_per_row) must be 8 or 16 (several rows per warp), or a multiple of 32.
  int rows_per_block = 0;
  /// 16: 16-byte vector accesses (falls back to the scalar path by itself when a pointer or a row
  /// stride is not 16-byte aligned); element_size(dtype): scalar accesses always.
  int vec_bytes = 16;
  /// Register-resident rows: each thread keeps vecs_per_thread vectors (1, 2, 4, 8 or 16) of its
  /// row in registers, so a row of up to threads_per_row * vecs_per_thread vectors (plus the scalar
  /// tail) is read once. 0: streaming two-pass kernel (sum of squares, then a re-read of the row,
  /// which then comes from L2); any row length. Only for vec_bytes == 16.
  int vecs_per_thread = 0;
  /// Register-resident only: each block loads its slice of the weight once into registers, before
  /// its first row, concurrently with the first row's loads (good for few rows: the weight's
  /// latency overlaps x's). Otherwise the weight is read (L1/L2) after the reduction of each row.
  bool weight_in_registers = false;
  /// Blocks per multiprocessor in the (persistent, grid-stride) grid; 0: as many as fit
  /// (occupancy). The grid never exceeds the number of row groups.
  int blocks_per_sm = 0;
  /// How the grid is sized from blocks_per_sm (see RmsGrid).
  RmsGrid grid = RmsGrid::persistent;
  /// Register-resident only: 1, or 2 (software pipelining: a group issues the loads of its next row
  /// into a second register buffer before it reduces and stores the current one).
  int rows_in_flight = 1;
  /// Register-resident only: 1, or 2 (each row is split over the 2 blocks of a thread-block
  /// cluster; the partial sums of squares are exchanged through distributed shared memory).
  /// threads and threads_per_row count the threads of one block; blocks_per_sm still counts blocks.
  int cluster_size = 1;
  /// Register-resident kernels: 0: x and the residual read with ld.global.cs, plain stores;
  /// 1: x and the residual read with ld.global.nc.L1::no_allocate and an L2 evict_first policy;
  /// 2: as 1, and y and the residual stored with st.global.cs (evict-first).
  /// The lean streaming kernels (streaming_unroll 1 or 2) take 0 to 3; 1: what pass 2 re-reads
  /// (plain: x; fused: the residual it wrote) gets an L2 evict_last policy in pass 1, what is read
  /// once gets evict_first, y is stored with st.global.cs, and no hinted access allocates in L1;
  /// 2: as 1, but y is stored plainly and the weight is read with evict_last; 3 (lean kernels
  /// only): as 2, but the loads allocate in L1 with the same priority as in L2 (evict_last for what
  /// pass 2 re-reads and for the weight, evict_first for the rest), so that pass 2 may re-read
  /// from L1 (torch.compile's Triton kernels on sm_90 load so).
  /// The staged kernel takes 0 or 1; 1: its bulk copies of the rows carry an L2 evict_first
  /// policy, that of the weight evict_last.
  int cache_hint = 0;
  /// 0: off. D >= 2: the shared-memory-staged kernel (sm_90 only): each block of a persistent grid
  /// walks its rows one at a time with D rows in flight in a ring of D shared-memory stages (x, and
  /// the residual when fused), fed by 1D TMA bulk copies that one thread issues ahead of the
  /// consumers; the weight is staged once per block. Few registers, many bytes in flight per SM.
  /// Needs threads a multiple of 32 (at most 1024), rows_per_block 1, vec_bytes 16, the neutral
  /// values of the register-resident fields (vecs_per_thread 0, weight_in_registers false,
  /// rows_in_flight 1, cluster_size 1, cache_hint 0 or 1), grid persistent or balanced, rows of a
  /// multiple of 16 bytes, 16-byte aligned x, residual, weight and y with row strides of a
  /// multiple of 16 bytes, weight + D stages in the shared memory of a block (see
  /// rms_norm_staged_max_rows), and a device of compute capability 9.x; else launch_rms_norm
  /// raises SignatureError (rms_norm_staged_refusal says so beforehand, and
  /// rms_norm_fallback_config is what serves such arguments instead).
  int staged_rows = 0;
  /// Streaming kernel with 16-byte vectors only (vecs_per_thread 0, vec_bytes 16): the vectors a
  /// thread has in flight per pass, 1, 2 or 4; 0 is 4. The lean ones (1, 2) are built for 4 and 2
  /// blocks of 512 threads a multiprocessor (32 and about 64 registers: many warps). They are the
  /// fused default for many rows of 8 KB and more, and in every tuning space of rows over 2 KB.
  int streaming_unroll = 0;
  /// Lean streaming kernels (streaming_unroll 1 or 2) of fused launches only: pass 1 reads x and
  /// the residual and writes nothing; pass 2 reads both again (from L1 or L2), adds them again and
  /// writes the residual and y, as torch.compile's kernels do. false: pass 1 writes the residual,
  /// which pass 2 re-reads. A plain launch with it raises SignatureError. In the fused tuning
  /// spaces, in no default: slower than writing the residual in pass 1 on every shape measured on
  /// the H200 (docs/perf/2026-12-01-h200-norm-flush-triton.md).
  bool fused_recompute = false;
  /// Register-resident shapes only: the re-reading kernel, torch.compile's shape for rows of a
  /// fixed length. threads (256, 512 or 1024) and vecs_per_thread (1, 2 or 4; fused: 1 or 2) are
  /// fixed at compile time and a row must be exactly threads x vecs_per_thread 16-byte vectors;
  /// rows_per_block 1, and the other register-resident fields at their neutral values
  /// (weight_in_registers false, rows_in_flight 1, cluster_size 1, cache_hint 0). Pass 1 issues all
  /// of a thread's loads of x (fused: and of the residual) at once and keeps none of them; pass 2
  /// reads them again (from L1 while the rows of the resident blocks fit there) and writes y
  /// (fused: and the residual). At most 32 registers a thread: 2048 / threads blocks a
  /// multiprocessor. The default for rows of exactly 512, 1024 or 2048 vectors on sm_90 (see
  /// rms_norm_default_config); in the tuning space wherever a (threads, vecs_per_thread) pair
  /// holds the row exactly.
  bool reread = false;

  int threads_per_row() const { return rows_per_block > 0 ? threads / rows_per_block : 0; }
  std::string str() const;
  friend bool operator==(const RmsNormConfig&, const RmsNormConfig&) = default;
};

struct RmsNormArgs {
  const void* x = nullptr;
  int64_t x_row_stride = 0;  ///< in elements; the inner dimension is contiguous
  void* residual = nullptr;  ///< nullptr: plain RMSNorm; else fused add, updated in place
  int64_t residual_row_stride = 0;
  const void* weight = nullptr;  ///< [cols], dtype
  void* y = nullptr;
  int64_t y_row_stride = 0;
  int64_t rows = 0;
  int64_t cols = 0;
  float eps = 1e-6f;
  DType dtype = DType::bfloat16;  ///< float32, float16 or bfloat16 (x, residual, weight, y)
};

/// A good default for the shape (fused: fused add + RMSNorm) on `device` (its properties are read
/// once and cached). Rows of exactly 512, 1024 or 2048 16-byte vectors on sm_90 take a re-reading
/// configuration (reread), but for fused rows of 512 vectors and plain fp32 rows of 4096 elements
/// (a register-resident configuration) when there are at least as many rows as multiprocessors.
/// Otherwise, fused add + RMSNorm on many rows of at least 8 KB takes a lean streaming
/// configuration (streaming_unroll), and plain RMSNorm on many rows of at least 16 KB on sm_90
/// takes a staged configuration, which serves only 16-byte aligned pointers and row strides: check
/// the call's arguments with rms_norm_staged_refusal and use rms_norm_fallback_config when it
/// refuses.
RmsNormConfig rms_norm_default_config(int64_t rows, int64_t cols, DType dtype, bool fused,
                                      int device);

/// The default among the configurations that serve any pointer alignment and row stride (never a
/// staged one); the same as rms_norm_default_config wherever that one is not staged.
RmsNormConfig rms_norm_fallback_config(int64_t rows, int64_t cols, DType dtype, bool fused,
                                       int device);

/// Empty when `config` is not staged or the staged kernel can run it on `args`; else why not
/// (unaligned pointers or row strides, more shared memory than a block has). Makes no CUDA call
/// (cheap enough for every call); the device (compute capability 9.x) is checked at launch.
std::string rms_norm_staged_refusal(const RmsNormArgs& args, const RmsNormConfig& config);

/// Candidates for tuning: the default first, then the fallback; each one is a valid configuration
/// for (cols, dtype, fused); the staged ones serve only the arguments rms_norm_staged_refusal
/// accepts.
std::vector<RmsNormConfig> rms_norm_tuning_space(int64_t rows, int64_t cols, DType dtype,
                                                 bool fused, int device);

/// The most stages (RmsNormConfig::staged_rows) of the staged kernel for rows of `cols` elements
/// of `dtype` (fused: x and the residual per stage) when `blocks_per_sm` blocks (>= 1) share the
/// 228 KB of shared memory of an sm_90 multiprocessor; 0 when fewer than 2 stages fit or a row is
/// not a multiple of 16 bytes.
int rms_norm_staged_max_rows(int64_t cols, DType dtype, bool fused, int blocks_per_sm = 1);

/// Launches one kernel on `stream` (a cudaStream_t; nullptr: the legacy default stream) on the
/// current device. rows == 0 or cols == 0 launches nothing. Raises SignatureError for arguments or
/// a configuration the kernels cannot take, UsageError when the CUDA runtime reports an error.
void launch_rms_norm(const RmsNormArgs& args, const RmsNormConfig& config, void* stream);

}  // namespace tileops::cuda_kernels
