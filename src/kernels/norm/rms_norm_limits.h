// Internal: what the host policy and the CUDA launch both need to know of the RMSNorm kernels,
// without CUDA: block-size bounds, the pipelined kernel's instantiations and the staged kernel's
// shared-memory layout.
#pragma once

#include <cstdint>

namespace tileops::cuda_kernels::rms {

// Register-resident kernel: 64 registers a thread (1024 threads) where the row slice and the
// weight fit in it; 128 (512 threads) for 8 vectors, or 4 vectors plus 4 of weight.
constexpr int resident_max_threads(int nv, bool weight_in_regs) {
  return nv >= 8 || (nv >= 4 && weight_in_regs) ? 512 : 1024;
}

// Pipelined resident kernel: registers of row data per thread (packed T) bound the block size.
constexpr int pipelined_data_regs(int nv, bool fused, bool weight_in_regs, int pipe) {
  return 4 * nv * (fused ? 2 : 1) * pipe + (weight_in_regs ? 4 * nv : 0);
}
constexpr int pipelined_max_threads(int nv, bool fused, bool weight_in_regs, int pipe) {
  return pipelined_data_regs(nv, fused, weight_in_regs, pipe) <= 24   ? 1024
         : pipelined_data_regs(nv, fused, weight_in_regs, pipe) <= 72 ? 512
                                                                      : 256;
}

// The instantiations of the pipelined resident kernel (vecs_per_thread, weight in registers,
// rows in flight, cluster size), the same for every dtype, plain and fused.
#define TILEOPS_RMS_PIPELINED_VARIANTS(X) \
  X(4, true, 2, 1)                        \
  X(4, false, 2, 1)                       \
  X(8, false, 2, 1)                       \
  X(4, true, 1, 2)                        \
  X(4, true, 2, 2)                        \
  X(8, false, 1, 2)                       \
  X(8, false, 2, 2)

struct PipelinedVariant {
  int nv;
  bool weight_in_regs;
  int rows_in_flight;
  int cluster_size;
};

inline constexpr PipelinedVariant kPipelinedVariants[] = {
#define TILEOPS_RMS_PIPELINED_ENTRY(NV, W, P, C) PipelinedVariant{NV, W, P, C},
    TILEOPS_RMS_PIPELINED_VARIANTS(TILEOPS_RMS_PIPELINED_ENTRY)
#undef TILEOPS_RMS_PIPELINED_ENTRY
};

constexpr bool pipelined_variant_exists(int nv, bool weight_in_regs, int rows_in_flight,
                                        int cluster_size) {
  for (const PipelinedVariant& v : kPipelinedVariants)
    if (v.nv == nv && v.weight_in_regs == weight_in_regs && v.rows_in_flight == rows_in_flight &&
        v.cluster_size == cluster_size)
      return true;
  return false;
}

// Both streaming kernels: blocks of at most 512 threads.
constexpr int kStreamingMaxThreads = 512;

// Staged kernel. Shared memory of a block, in bytes from the base of the dynamic shared memory:
// the weight slot, `stages` stages (x slot, then the residual slot when fused; slots are the row
// rounded to 128 bytes), stages + 1 mbarriers (the stages' full barriers, then the weight's),
// 2 x 32 floats of reduction.
struct StagedLayout {
  uint32_t row_bytes;
  uint32_t slot_bytes;
  uint32_t stage_bytes;
  uint32_t stages;
  uint32_t stage_off;
  uint32_t bar_off;
  uint32_t red_off;
  uint32_t total;
};

// Shared memory a block of sm_90 can have (227 KB), that a multiprocessor has (228 KB), and that
// the runtime reserves per block (1 KB).
constexpr int64_t kSm90SmemPerBlock = 232448;
constexpr int64_t kSm90SmemPerSm = 233472;
constexpr int64_t kSmemReservedPerBlock = 1024;

constexpr int64_t staged_round_up(int64_t a, int64_t b) {
  return (a + b - 1) / b * b;
}

// The bytes of the layout (int64: no overflow for any row length the launch accepts).
constexpr int64_t staged_smem_bytes(int64_t row_bytes, int64_t stages, bool fused) {
  const int64_t slot = staged_round_up(row_bytes, 128);
  const int64_t bars = staged_round_up(8 * (stages + 1), 16);
  return slot + stages * slot * (fused ? 2 : 1) + bars + 2 * 32 * 4;
}

// Only for sizes that staged_smem_bytes says fit (well under 4 GB).
constexpr StagedLayout staged_layout(int64_t row_bytes, int64_t stages, bool fused) {
  StagedLayout l{};
  l.row_bytes = static_cast<uint32_t>(row_bytes);
  l.slot_bytes = static_cast<uint32_t>(staged_round_up(row_bytes, 128));
  l.stage_bytes = l.slot_bytes * (fused ? 2u : 1u);
  l.stages = static_cast<uint32_t>(stages);
  l.stage_off = l.slot_bytes;
  l.bar_off = l.stage_off + l.stages * l.stage_bytes;
  l.red_off = l.bar_off + static_cast<uint32_t>(staged_round_up(8 * (stages + 1), 16));
  l.total = l.red_off + 2 * 32 * 4;
  return l;
}
static_assert(staged_layout(8192, 27, false).total == staged_smem_bytes(8192, 27, false));

}  // namespace tileops::cuda_kernels::rms
