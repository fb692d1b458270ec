// CUDA kernels of RMSNorm and fused add+RMSNorm, with a plain launch API (internal header: no
// CUDA headers here; the stream is passed as void* and is a cudaStream_t). The kernel families,
// their files and the default policy: docs/design/norm-kernels.md.
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
#include <variant>
#include <vector>

#include "tileops/core/dtype.h"

namespace tileops::cuda_kernels {

/// How the grid of a launch is sized (every kernel loops over row groups with a grid stride).
enum class RMSNormGrid : int {
  /// multiprocessors x blocks_per_sm blocks, at most one per row group (the default).
  persistent = 0,
  /// The persistent grid shrunk to ceil(groups / ceil(groups / persistent)) blocks, so that every
  /// block loops over the same number of row groups (a last wave of whole loops).
  balanced = 1,
  /// One block per row group: the hardware schedules the blocks as others finish.
  all = 2,
};

/// Register-resident kernels: each thread keeps vecs_per_thread 16-byte vectors of its row in
/// registers, so a row of up to threads_per_row * vecs_per_thread vectors (plus the scalar tail)
/// is read once. rows_in_flight 2 or cluster_size 2 select the pipelined kernel
/// (rms_norm_resident_pipelined_cuda.cu), which exists for the combinations listed in
/// rms_norm_limits.h.
struct RMSNormResidentConfig {
  /// Threads per block: a multiple of 32, at most the kernel's bound (rms_norm_limits.h).
  int threads = 0;
  /// Rows handled at once by one block; threads / rows_per_block (threads_per_row) must be 8 or 16
  /// (several rows per warp), or a multiple of 32.
  int rows_per_block = 1;
  /// 1, 2, 4 or 8.
  int vecs_per_thread = 1;
  /// Each block loads its slice of the weight once into registers, before its first row (1, 2 or
  /// 4 vectors a thread); otherwise the weight is read (L1/L2) after the reduction of each row.
  bool weight_in_registers = false;
  /// Blocks per multiprocessor in the grid; 0: as many as fit (occupancy).
  int blocks_per_sm = 0;
  RMSNormGrid grid = RMSNormGrid::persistent;
  /// 1, or 2: a group issues the loads of its next row before it reduces and stores the current.
  int rows_in_flight = 1;
  /// 1, or 2: each row is split over the 2 blocks of a thread-block cluster (partial sums of
  /// squares through distributed shared memory); threads counts the threads of one block.
  int cluster_size = 1;

  int threads_per_row() const { return rows_per_block > 0 ? threads / rows_per_block : 0; }
  bool pipelined() const { return rows_in_flight != 1 || cluster_size != 1; }
  friend bool operator==(const RMSNormResidentConfig&, const RMSNormResidentConfig&) = default;
};

/// The two-pass streaming kernel: any row length; pass 1 sums the squares (fused: and writes the
/// residual), pass 2 re-reads the row (from L2) and writes y; 4 vectors in flight per pass.
struct RMSNormStreamingConfig {
  /// A multiple of 32, at most 512.
  int threads = 0;
  int rows_per_block = 1;
  /// 16: 16-byte vectors (the scalar path by itself when a pointer or row stride is not 16-byte
  /// aligned); the element size: scalar accesses always.
  int vec_bytes = 16;
  int blocks_per_sm = 0;
  RMSNormGrid grid = RMSNormGrid::persistent;

  int threads_per_row() const { return rows_per_block > 0 ? threads / rows_per_block : 0; }
  friend bool operator==(const RMSNormStreamingConfig&, const RMSNormStreamingConfig&) = default;
};

/// The streaming kernel built for occupancy: 1 or 2 16-byte vectors in flight per thread and
/// pass, bounded at 32 or about 64 registers so that 4 or 2 blocks of 512 threads fit a
/// multiprocessor; optional L2 (and L1) cache policies.
struct RMSNormHighOccupancyStreamingConfig {
  int threads = 0;
  int rows_per_block = 1;
  int blocks_per_sm = 0;
  RMSNormGrid grid = RMSNormGrid::persistent;
  /// 1 or 2 vectors per thread and pass.
  int vectors_in_flight = 1;
  /// 0: plain accesses. 1: what pass 2 re-reads (plain: x; fused: the residual written in pass 1)
  /// gets an L2 evict_last policy, what is read once evict_first, y is stored with st.global.cs,
  /// no hinted access allocates in L1. 2: as 1, but y stored plainly and the weight read with
  /// evict_last. 3: as 2, the loads allocating in L1 with the same priority as in L2
  /// (torch.compile's Triton kernels on sm_90 load so).
  int cache_hint = 0;

  int threads_per_row() const { return rows_per_block > 0 ? threads / rows_per_block : 0; }
  friend bool operator==(const RMSNormHighOccupancyStreamingConfig&,
                         const RMSNormHighOccupancyStreamingConfig&) = default;
};

/// The shared-memory-staged kernel (sm_90 only): each block of a persistent grid walks its rows
/// one at a time with `stages` rows in flight in a ring of shared-memory stages (x, and the
/// residual when fused), fed by 1D TMA bulk copies; the weight is staged once per block. Needs rows
/// of a multiple of 16 bytes, 16-byte aligned pointers and row strides (rms_norm_staged_refusal),
/// the weight and the stages in a block's shared memory (rms_norm_staged_max_rows), a device of
/// compute capability 9.x; rms_norm_fallback_config serves what it refuses.
struct RMSNormStagedConfig {
  /// A multiple of 32 in [32, 1024]; all of them work on one row.
  int threads = 0;
  int blocks_per_sm = 0;
  /// persistent or balanced (a block per row would stage nothing).
  RMSNormGrid grid = RMSNormGrid::persistent;
  /// At least 2.
  int stages = 2;
  friend bool operator==(const RMSNormStagedConfig&, const RMSNormStagedConfig&) = default;
};

/// The re-reading kernel, torch.compile's shape for rows of a fixed length: a row per block of
/// `threads` (256, 512 or 1024) threads with `vecs_per_thread` (1, 2 or 4; fused: 1 or 2) 16-byte
/// vectors each, fixed at compile time: a row must be exactly threads x vecs_per_thread vectors.
/// Pass 1 issues all of a thread's loads at once and keeps none; pass 2 reads them again (from L1
/// while the rows of the resident blocks fit there). At most 32 registers a thread.
struct RMSNormRereadConfig {
  int threads = 256;
  int vecs_per_thread = 1;
  int blocks_per_sm = 0;
  RMSNormGrid grid = RMSNormGrid::persistent;
  friend bool operator==(const RMSNormRereadConfig&, const RMSNormRereadConfig&) = default;
};

/// How one launch of the RMSNorm kernels is shaped: one kernel family and its own parameters.
/// launch_rms_norm checks the ranges of the parameters; a configuration that cannot serve a shape
/// raises SignatureError.
struct RMSNormConfig {
  std::variant<RMSNormResidentConfig, RMSNormStreamingConfig, RMSNormHighOccupancyStreamingConfig,
               RMSNormStagedConfig, RMSNormRereadConfig>
      kernel;

  /// The name of the configuration, also its tuning-database value: the format of the flag
  /// struct it replaced ("threads=256,rows_per_block=1,vec_bytes=16,...").
  std::string str() const;
  template <class Family>
  const Family* as() const {
    return std::get_if<Family>(&kernel);
  }
  friend bool operator==(const RMSNormConfig&, const RMSNormConfig&) = default;
};

struct RMSNormArgs {
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

/// The facts of a device that the default policy reads.
struct RMSNormDevice {
  int major = 0;     ///< compute capability major (9: the sm_90 kernels and measurements)
  int sm_count = 0;  ///< multiprocessors
};

/// The facts of CUDA device `device` (its properties are read once and cached).
RMSNormDevice rms_norm_device(int device);

/// A good default for the shape (fused: fused add + RMSNorm) on `device`, from the table of
/// measured choices in rms_norm_policy.cpp. A staged configuration serves only 16-byte aligned
/// pointers and row strides: check the call's arguments with rms_norm_staged_refusal and use
/// rms_norm_fallback_config when it refuses.
RMSNormConfig rms_norm_default_config(int64_t rows, int64_t cols, DType dtype, bool fused,
                                      const RMSNormDevice& device);
RMSNormConfig rms_norm_default_config(int64_t rows, int64_t cols, DType dtype, bool fused,
                                      int device);

/// The default among the configurations that serve any pointer alignment and row stride (never a
/// staged one); the same as rms_norm_default_config wherever that one is not staged.
RMSNormConfig rms_norm_fallback_config(int64_t rows, int64_t cols, DType dtype, bool fused,
                                       const RMSNormDevice& device);
RMSNormConfig rms_norm_fallback_config(int64_t rows, int64_t cols, DType dtype, bool fused,
                                       int device);

/// Empty when `config` is not staged or the staged kernel can run it on `args`; else why not
/// (unaligned pointers or row strides, more shared memory than a block has). Makes no CUDA call
/// (cheap enough for every call); the device (compute capability 9.x) is checked at launch.
std::string rms_norm_staged_refusal(const RMSNormArgs& args, const RMSNormConfig& config);

/// Empty when `config` serves rows of `cols` elements of `dtype`, else why not (the ranges of its
/// parameters; the arguments and the device are checked at launch).
std::string rms_norm_config_refusal(const RMSNormConfig& config, DType dtype, int64_t cols);

/// Candidates for tuning: the default first, then the fallback; each one is a valid configuration
/// for (cols, dtype, fused); the staged ones serve only the arguments rms_norm_staged_refusal
/// accepts.
std::vector<RMSNormConfig> rms_norm_tuning_space(int64_t rows, int64_t cols, DType dtype,
                                                 bool fused, const RMSNormDevice& device);
std::vector<RMSNormConfig> rms_norm_tuning_space(int64_t rows, int64_t cols, DType dtype,
                                                 bool fused, int device);

/// The most stages of the staged kernel for rows of `cols` elements of `dtype` (fused: x and the
/// residual per stage) when `blocks_per_sm` blocks (>= 1) share the 228 KB of shared memory of an
/// sm_90 multiprocessor; 0 when fewer than 2 stages fit or a row is not a multiple of 16 bytes.
int rms_norm_staged_max_rows(int64_t cols, DType dtype, bool fused, int blocks_per_sm = 1);

/// Launches one kernel on `stream` (a cudaStream_t; nullptr: the legacy default stream) on the
/// current device. rows == 0 or cols == 0 launches nothing. Raises SignatureError for arguments or
/// a configuration the kernels cannot take, UsageError when the CUDA runtime reports an error.
void launch_rms_norm(const RMSNormArgs& args, const RMSNormConfig& config, void* stream);

}  // namespace tileops::cuda_kernels
