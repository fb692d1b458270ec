// The default RMSNorm configuration per shape and the tuning space (host only, no CUDA). The
// default is the first rule of kRules that chooses for the shape; each rule names the docs/perf
// file that measured it (docs/design/norm-kernels.md, "Default policy").
#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <variant>
#include <vector>

#include "kernels/norm/rms_norm_cuda.h"
#include "kernels/norm/rms_norm_limits.h"
#include "tileops/core/error.h"

namespace tileops::cuda_kernels {
namespace {

using namespace rms;  // NOLINT(google-build-using-namespace): this family's own internals

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}
int64_t round_up(int64_t a, int64_t b) {
  return ceil_div(a, b) * b;
}
int vec_elems(DType dtype) {
  return 16 / static_cast<int>(element_size(dtype));
}

void check_dtype(DType dtype) {
  if (dtype != DType::float32 && dtype != DType::float16 && dtype != DType::bfloat16)
    throw SignatureError("rms_norm (CUDA): dtype must be float32, float16 or bfloat16, got " +
                         std::string(dtype_name(dtype)));
}

// The smallest threads_per_row (a multiple of 32, at most max_tpr) whose threads hold nvec
// vectors with nv vectors each; 0 if there is none.
int resident_tpr(int64_t nvec, int nv, int max_tpr) {
  const int64_t tpr = std::max<int64_t>(32, round_up(ceil_div(nvec, nv), 32));
  return tpr <= max_tpr ? static_cast<int>(tpr) : 0;
}

// Rows per block for tpr threads a row: blocks of 128 threads where tpr divides 128.
int rows_per_block_of(int tpr) {
  return tpr < 128 && 128 % tpr == 0 ? 128 / tpr : 1;
}

RMSNormConfig resident(int threads, int rows_per_block, int nv, bool weight_in_regs) {
  return {RMSNormResidentConfig{.threads = threads,
                                .rows_per_block = rows_per_block,
                                .vecs_per_thread = nv,
                                .weight_in_registers = weight_in_regs}};
}

// A staged configuration: `per_sm` blocks a multiprocessor (a thread per vector of the row, up to
// 1024 threads for one block, 512 for two), `stages` rows in flight.
RMSNormConfig staged(int64_t nvec, int per_sm, int stages) {
  return {RMSNormStagedConfig{.threads = static_cast<int>(std::clamp<int64_t>(
                                  round_up(nvec, 32), 32, per_sm == 1 ? 1024 : 512)),
                              .blocks_per_sm = per_sm,
                              .stages = stages}};
}

// What the rules read of a call.
struct Shape {
  int64_t rows;  // at least 1
  int64_t cols;
  DType dtype;
  bool fused;
  RMSNormDevice device;
  bool allow_staged;  // false: the fallback, which serves any alignment
  int64_t nvec;       // 16-byte vectors a row (rounded up), at least 1
  int64_t row_bytes;

  bool sm90() const { return device.major == 9; }
  // At least as many rows as multiprocessors; fewer is latency-bound ("decode").
  bool many_rows() const { return rows >= device.sm_count; }
};

// The re-reading kernel's measured choices on sm_90 for rows of exactly `vectors` 16-byte
// vectors. A shape with no row here goes on to the next rule (so do many fused rows of 512).
enum class Rows { few, many };
enum class Fusion { any, plain, fused };
struct RereadChoice {
  int64_t vectors;
  Rows rows;
  Fusion fusion;
  RMSNormRereadConfig config;
  std::string_view measured_in;
};
constexpr RMSNormGrid kAll = RMSNormGrid::all;
constexpr std::string_view kRereadDoc = "docs/perf/2026-12-01-h200-norm-reread.md";
constexpr std::array kRereadChoices = {
    // Fewer rows than multiprocessors: the most threads a row, so each waits for the fewest loads.
    RereadChoice{512, Rows::few, Fusion::any, {512, 1}, kRereadDoc},
    RereadChoice{1024, Rows::few, Fusion::any, {512, 2}, kRereadDoc},
    RereadChoice{2048, Rows::few, Fusion::any, {1024, 2}, kRereadDoc},
    RereadChoice{512, Rows::many, Fusion::plain, {256, 2}, kRereadDoc},
    RereadChoice{1024, Rows::many, Fusion::plain, {256, 4, 0, kAll}, kRereadDoc},
    RereadChoice{1024, Rows::many, Fusion::fused, {512, 2, 0, kAll}, kRereadDoc},
    RereadChoice{2048, Rows::many, Fusion::plain, {512, 4, 0, kAll}, kRereadDoc},
    RereadChoice{2048, Rows::many, Fusion::fused, {1024, 2, 0, kAll}, kRereadDoc},
};

// Small rows: 8, 16 or 32 threads a row (warp shuffles only), several rows a block, the weight
// slice in registers for all the block's rows. The first design, not measured against others.
std::optional<RMSNormConfig> small_rows(const Shape& s) {
  if (s.nvec > 128) return std::nullopt;
  int tpr = 8;
  while (tpr < 32 && static_cast<int64_t>(tpr) * 4 < s.nvec) tpr *= 2;
  int nv = 1;
  while (static_cast<int64_t>(tpr) * nv < s.nvec) nv *= 2;
  const int threads = static_cast<int>(std::min<int64_t>(256, round_up(s.rows * tpr, 32)));
  return resident(threads, threads / tpr, nv, true);
}

// Many plain fp32 rows of 4096: register-resident 256 x 4 with the weight in registers beat the
// re-reading kernel that the table below would choose.
std::optional<RMSNormConfig> fp32_plain_4096(const Shape& s) {
  if (!s.sm90() || s.dtype != DType::float32 || s.fused || !s.many_rows() || s.cols != 4096)
    return std::nullopt;
  return resident(256, 1, 4, true);
}

// Rows of exactly 512, 1024 or 2048 vectors on sm_90: the re-reading kernel (kRereadChoices).
std::optional<RMSNormConfig> reread_exact_rows(const Shape& s) {
  if (!s.sm90() || s.cols % vec_elems(s.dtype) != 0) return std::nullopt;
  const Rows rows = s.many_rows() ? Rows::many : Rows::few;
  for (const RereadChoice& c : kRereadChoices) {
    if (c.vectors == s.nvec && c.rows == rows &&
        (c.fusion == Fusion::any || (c.fusion == Fusion::fused) == s.fused))
      return RMSNormConfig{c.config};
  }
  return std::nullopt;
}

// Fused, many rows of at least 8 KB: the high-occupancy streaming kernel, a block per row
// (pass 2 re-reads the residual from L2). 8 KB rows: 1 vector in flight, 256 threads, L2 hints;
// longer: 2 vectors, 512 threads.
std::optional<RMSNormConfig> fused_long_rows(const Shape& s) {
  if (!s.fused || s.row_bytes < 8192 || !s.many_rows()) return std::nullopt;
  const bool eight_kb = s.row_bytes <= 8192;
  return RMSNormConfig{RMSNormHighOccupancyStreamingConfig{.threads = eight_kb ? 256 : 512,
                                                           .grid = RMSNormGrid::all,
                                                           .vectors_in_flight = eight_kb ? 1 : 2,
                                                           .cache_hint = eight_kb ? 1 : 0}};
}

// Plain, many rows of at least 16 KB on sm_90: the staged kernel, two blocks of up to 512
// threads a multiprocessor with as many stages as fit, else one block when it holds 3 stages.
std::optional<RMSNormConfig> staged_long_rows(const Shape& s) {
  if (!s.allow_staged || s.row_bytes < 16384 || !s.many_rows() || !s.sm90()) return std::nullopt;
  if (const int stages = rms_norm_staged_max_rows(s.cols, s.dtype, s.fused, 2); stages >= 2)
    return staged(s.nvec, 2, stages);
  if (const int stages = rms_norm_staged_max_rows(s.cols, s.dtype, s.fused, 1); stages >= 3)
    return staged(s.nvec, 1, stages);
  return std::nullopt;
}

// Rows of up to 1024 vectors: 4 vectors a thread, the weight in registers; up to 512 vectors
// also two rows in flight per group (the next row's loads issued before this row's reduction).
std::optional<RMSNormConfig> resident_4_vectors(const Shape& s) {
  if (s.nvec > 1024) return std::nullopt;
  const int tpr = resident_tpr(s.nvec, 4, 512);
  const int rpb = rows_per_block_of(tpr);
  RMSNormConfig c = resident(tpr * rpb, rpb, 4, true);
  if (s.nvec > 512) return c;
  RMSNormConfig pipelined = c;
  std::get<RMSNormResidentConfig>(pipelined.kernel).rows_in_flight = 2;
  return rms_norm_config_refusal(pipelined, s.dtype, s.cols).empty() ? pipelined : c;
}

// Latency-bound (decode) long rows: many threads with few vectors each, the weight loaded with x
// so that their latencies overlap. The first design, not measured against others.
std::optional<RMSNormConfig> decode_long_rows(const Shape& s) {
  if (s.many_rows()) return std::nullopt;
  for (const int nv : {1, 2, 4}) {
    if (const int tpr = resident_tpr(s.nvec, nv, 512); tpr > 0) return resident(tpr, 1, nv, true);
  }
  return std::nullopt;
}

// Rows of up to 4096 vectors: 8 vectors a thread, one block per row group (the hardware
// balances the last wave).
std::optional<RMSNormConfig> resident_8_vectors(const Shape& s) {
  const int tpr = resident_tpr(s.nvec, 8, 512);
  if (tpr == 0) return std::nullopt;
  const int rpb = rows_per_block_of(tpr);
  RMSNormConfig c = resident(tpr * rpb, rpb, 8, false);
  std::get<RMSNormResidentConfig>(c.kernel).grid = RMSNormGrid::all;
  return c;
}

// Rows too long for registers: streaming, the second pass from L2.
std::optional<RMSNormConfig> streaming(const Shape& /*s*/) {
  return RMSNormConfig{RMSNormStreamingConfig{.threads = 256}};
}

struct Rule {
  std::optional<RMSNormConfig> (*choose)(const Shape&);
  std::string_view measured_in;  // the docs/perf file that chose it; empty: not measured
};

constexpr std::array kRules = {
    Rule{small_rows, ""},
    Rule{fp32_plain_4096, "docs/perf/2026-12-01-h200-norm-reread.md"},
    Rule{reread_exact_rows, "docs/perf/2026-12-01-h200-norm-reread.md"},
    Rule{fused_long_rows, "docs/perf/2026-11-29-h200-norm-lean.md"},
    Rule{staged_long_rows, "docs/perf/2026-11-29-h200-norm-staged.md"},
    Rule{resident_4_vectors, "docs/perf/2026-11-29-h200-norm-rope-v2.md"},
    Rule{decode_long_rows, ""},
    Rule{resident_8_vectors, "docs/perf/2026-11-29-h200-norm-rope-v2.md"},
    Rule{streaming, ""},
};

RMSNormConfig default_config(int64_t rows, int64_t cols, DType dtype, bool fused,
                             const RMSNormDevice& device, bool allow_staged) {
  check_dtype(dtype);
  const Shape s{.rows = std::max<int64_t>(rows, 1),
                .cols = cols,
                .dtype = dtype,
                .fused = fused,
                .device = device,
                .allow_staged = allow_staged,
                .nvec = std::max<int64_t>(ceil_div(cols, vec_elems(dtype)), 1),
                .row_bytes = cols * static_cast<int64_t>(element_size(dtype))};
  for (const Rule& rule : kRules) {
    if (std::optional<RMSNormConfig> c = rule.choose(s)) return *c;
  }
  return *streaming(s);  // unreachable: the last rule always chooses
}

}  // namespace

RMSNormConfig rms_norm_default_config(int64_t rows, int64_t cols, DType dtype, bool fused,
                                      const RMSNormDevice& device) {
  return default_config(rows, cols, dtype, fused, device, true);
}

RMSNormConfig rms_norm_fallback_config(int64_t rows, int64_t cols, DType dtype, bool fused,
                                       const RMSNormDevice& device) {
  return default_config(rows, cols, dtype, fused, device, false);
}

std::vector<RMSNormConfig> rms_norm_tuning_space(int64_t rows, int64_t cols, DType dtype,
                                                 bool fused, const RMSNormDevice& device) {
  std::vector<RMSNormConfig> out;
  const auto add = [&](const RMSNormConfig& c) {
    if (rms_norm_config_refusal(c, dtype, cols).empty() &&
        std::find(out.begin(), out.end(), c) == out.end())
      out.push_back(c);
  };
  add(rms_norm_default_config(rows, cols, dtype, fused, device));
  add(rms_norm_fallback_config(rows, cols, dtype, fused, device));
  const int64_t nvec = std::max<int64_t>(ceil_div(cols, vec_elems(dtype)), 1);
  if (nvec > 128 && device.major == 9) {
    // The staged kernel with one block a multiprocessor (the most stages) and with two.
    for (const int per_sm : {1, 2}) {
      if (const int stages = rms_norm_staged_max_rows(cols, dtype, fused, per_sm); stages >= 2)
        add(staged(nvec, per_sm, stages));
    }
  }
  if (nvec <= 256) {
    // Several rows per warp or a warp per row.
    for (const int tpr : {8, 16, 32}) {
      int nv = 1;
      while (nv < 8 && static_cast<int64_t>(tpr) * nv < nvec) nv *= 2;
      if (static_cast<int64_t>(tpr) * nv < nvec) continue;
      for (const int threads : {128, 256, 512}) {
        if (threads / tpr > 2 * std::max<int64_t>(rows, 1)) continue;  // mostly idle groups
        for (const bool wreg : {false, true}) add(resident(threads, threads / tpr, nv, wreg));
      }
    }
  }
  // A row per block (or two), each vector count that fits.
  for (const int nv : {1, 2, 4, 8}) {
    for (const int max_tpr : {512, 1024}) {
      const int tpr = resident_tpr(nvec, nv, max_tpr);
      if (tpr == 0) continue;
      for (const int rpb : {1, 2, 4}) {
        if (tpr * rpb > 1024 || (rpb > 1 && rows < 2 * rpb)) continue;
        for (const bool wreg : {false, true}) add(resident(tpr * rpb, rpb, nv, wreg));
      }
    }
  }
  for (const int threads : {128, 256, 512}) add({RMSNormStreamingConfig{.threads = threads}});
  if (nvec > 128 && cols % vec_elems(dtype) == 0) {
    // The re-reading kernel, each (threads, vecs_per_thread) that holds the row exactly (fused: at
    // most 2 vectors a thread), on the persistent grid and with a block per row.
    for (const int threads : {256, 512, 1024})
      for (const int nv : {1, 2, 4}) {
        if (fused && nv == 4) continue;
        for (const RMSNormGrid g : {RMSNormGrid::persistent, RMSNormGrid::all})
          add({RMSNormRereadConfig{.threads = threads, .vecs_per_thread = nv, .grid = g}});
      }
  }
  if (nvec > 128) {
    // The high-occupancy streaming kernels with a block per row: one or two vectors in flight,
    // each cache hint, 256 and 512 threads.
    for (const int in_flight : {1, 2})
      for (const int hint : {0, 1, 2, 3})
        for (const int threads : {256, 512})
          add({RMSNormHighOccupancyStreamingConfig{.threads = threads,
                                                   .grid = RMSNormGrid::all,
                                                   .vectors_in_flight = in_flight,
                                                   .cache_hint = hint}});
    // The fallback with the other grids; each pipelined resident kernel with the fewest threads
    // per row that hold the row (blocks of at least 128 threads), those with two rows in flight
    // also on the balanced grid, the others also with a block per row group.
    const RMSNormConfig def = rms_norm_fallback_config(rows, cols, dtype, fused, device);
    for (const RMSNormGrid g : {RMSNormGrid::balanced, RMSNormGrid::all}) {
      RMSNormConfig c = def;
      std::visit([g](auto& k) { k.grid = g; }, c.kernel);
      add(c);
    }
    for (const PipelinedVariant& k : kPipelinedVariants) {
      const int tpr =
          resident_tpr(ceil_div(nvec, k.cluster_size), k.nv,
                       pipelined_max_threads(k.nv, true, k.weight_in_regs, k.rows_in_flight));
      if (tpr == 0) continue;
      const int rpb = rows_per_block_of(tpr);
      RMSNormResidentConfig c{.threads = tpr * rpb,
                              .rows_per_block = rpb,
                              .vecs_per_thread = k.nv,
                              .weight_in_registers = k.weight_in_regs,
                              .rows_in_flight = k.rows_in_flight,
                              .cluster_size = k.cluster_size};
      add({c});
      c.grid = k.rows_in_flight == 2 ? RMSNormGrid::balanced : RMSNormGrid::all;
      add({c});
    }
  }
  return out;
}

}  // namespace tileops::cuda_kernels
