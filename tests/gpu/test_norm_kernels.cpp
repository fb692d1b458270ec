// GPU tests of the CUDA RMSNorm / fused add+RMSNorm kernels (src/kernels/norm/rms_norm_cuda.*)
// against a double-precision CPU reference. Skipped without CUDA or without a device.
//
// Every launch writes into an output poisoned with NaN bit patterns (0xFF bytes); elements outside
// the rows (strided gaps) must keep their poison (or, in place, their input bits). Tolerance:
// max |y - ref| / (1 + |ref|) <= 1e-5 (fp32), 1e-3 (fp16), 1.6e-2 (bf16); the updated residual of
// the fused kernel must match T(float(x) + float(residual)) bit for bit.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#if TILEOPS_WITH_CUDA
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <utility>

#include "gpu/kernel_test_util.h"
#include "kernels/norm/rms_norm_cuda.h"
#include "tileops/core/cuda.h"
#include "tileops/core/dtype.h"
#include "tileops/core/error.h"
#endif

namespace {

#if !TILEOPS_WITH_CUDA

TEST(RmsNormKernels, RequiresCuda) {
  GTEST_SKIP() << "built without CUDA";
}

#else

using tileops::DType;
using tileops::cuda_kernels::launch_rms_norm;
using tileops::cuda_kernels::rms_norm_default_config;
using tileops::cuda_kernels::rms_norm_fallback_config;
using tileops::cuda_kernels::rms_norm_staged_max_rows;
using tileops::cuda_kernels::rms_norm_staged_refusal;
using tileops::cuda_kernels::rms_norm_tuning_space;
using tileops::cuda_kernels::RmsNormArgs;
using tileops::cuda_kernels::RmsNormConfig;

using namespace tileops::kernel_test;  // NOLINT: the shared kernel-test helpers

// ---- one RMSNorm problem: inputs made once, run with any number of configurations ----

struct RmsProblem {
  DType dtype = DType::bfloat16;
  int64_t rows = 1;
  int64_t cols = 1;
  bool fused = false;
  int64_t x_stride = 0;  // 0: cols
  int64_t r_stride = 0;
  int64_t y_stride = 0;
  int64_t x_offset = 0;  // elements added to the base pointers (unaligned when odd)
  int64_t r_offset = 0;
  int64_t y_offset = 0;
  int64_t w_offset = 0;
  bool in_place = false;  // y == x (y_stride and y_offset are then x's)
  float eps = 1e-6f;
  uint64_t seed = 1;

  std::string describe() const {
    std::ostringstream os;
    os << dtype_str(dtype) << " [" << rows << ", " << cols << "]" << (fused ? " fused" : "")
       << " strides x/r/y " << x_stride << "/" << r_stride << "/" << y_stride << " offsets x/r/y/w "
       << x_offset << "/" << r_offset << "/" << y_offset << "/" << w_offset
       << (in_place ? " in-place" : "") << " seed " << seed;
    return os.str();
  }
};

// A shape with row strides (0: cols), an element offset of x and y == x, for the tests that run
// many configurations on each.
struct StridedCase {
  int64_t rows, cols, xs, rs, ys, x_offset;
  bool in_place;

  RmsProblem problem(DType dtype, bool fused, uint64_t seed) const {
    RmsProblem p;
    p.dtype = dtype;
    p.rows = rows;
    p.cols = cols;
    p.fused = fused;
    p.x_stride = xs;
    p.r_stride = rs;
    p.y_stride = ys;
    p.x_offset = x_offset;
    p.in_place = in_place;
    p.seed = seed;
    return p;
  }
};

class RmsRunner {
 public:
  explicit RmsRunner(RmsProblem p) : p_(std::move(p)) {
    if (p_.x_stride == 0) p_.x_stride = p_.cols;
    if (p_.r_stride == 0) p_.r_stride = p_.cols;
    if (p_.y_stride == 0) p_.y_stride = p_.cols;
    if (p_.in_place) {
      p_.y_stride = p_.x_stride;
      p_.y_offset = p_.x_offset;
    }
  }

  const RmsProblem& problem() const { return p_; }

  // Prepares inputs and device buffers (call once, under ASSERT_NO_FATAL_FAILURE).
  void prepare() {
    const size_t es = tileops::element_size(p_.dtype);
    const auto span = [&](int64_t stride, int64_t offset) {
      return static_cast<size_t>(offset + (p_.rows - 1) * stride + p_.cols + 8);
    };
    Rng rng(p_.seed);
    x_ = std::make_unique<HostTensor>(p_.dtype, span(p_.x_stride, p_.x_offset));
    fill_random(*x_, rng, -2.0f, 2.0f);
    w_ = std::make_unique<HostTensor>(p_.dtype, static_cast<size_t>(p_.w_offset + p_.cols + 8));
    fill_random(*w_, rng, -1.5f, 1.5f);
    if (p_.fused) {
      r_ = std::make_unique<HostTensor>(p_.dtype, span(p_.r_stride, p_.r_offset));
      fill_random(*r_, rng, -2.0f, 2.0f);
    }
    dx_ = std::make_unique<DeviceBuffer>(x_->bytes.size());
    dw_ = std::make_unique<DeviceBuffer>(w_->bytes.size());
    ASSERT_NE(dx_->ptr, nullptr);
    ASSERT_NE(dw_->ptr, nullptr);
    CUDA_OK(cudaMemcpy(dw_->ptr, w_->bytes.data(), w_->bytes.size(), cudaMemcpyHostToDevice));
    if (p_.fused) {
      dr_ = std::make_unique<DeviceBuffer>(r_->bytes.size());
      ASSERT_NE(dr_->ptr, nullptr);
    }
    if (!p_.in_place) {
      y_elems_ = span(p_.y_stride, p_.y_offset);
      dy_ = std::make_unique<DeviceBuffer>(y_elems_ * es);
      ASSERT_NE(dy_->ptr, nullptr);
    }
    // Reference (double), from the rounded sum in fused mode.
    ref_y_.assign(static_cast<size_t>(p_.rows * p_.cols), 0.0f);
    if (p_.fused) ref_r_bits_.assign(static_cast<size_t>(p_.rows * p_.cols), 0u);
    HostTensor rounded(p_.dtype, 1);
    std::vector<double> v(static_cast<size_t>(p_.cols));
    for (int64_t i = 0; i < p_.rows; ++i) {
      double ss = 0.0;
      for (int64_t j = 0; j < p_.cols; ++j) {
        const size_t xi = static_cast<size_t>(p_.x_offset + i * p_.x_stride + j);
        float a = x_->get(xi);
        if (p_.fused) {
          const size_t ri = static_cast<size_t>(p_.r_offset + i * p_.r_stride + j);
          rounded.set(0, a + r_->get(ri));  // fp32 sum, one rounding to T
          ref_r_bits_[static_cast<size_t>(i * p_.cols + j)] = rounded.bits(0);
          a = rounded.get(0);
        }
        v[static_cast<size_t>(j)] = a;
        ss += static_cast<double>(a) * a;
      }
      const double inv = 1.0 / std::sqrt(ss / static_cast<double>(p_.cols) + p_.eps);
      for (int64_t j = 0; j < p_.cols; ++j)
        ref_y_[static_cast<size_t>(i * p_.cols + j)] = static_cast<float>(
            v[static_cast<size_t>(j)] * inv * w_->get(static_cast<size_t>(p_.w_offset + j)));
    }
  }

  // The launch arguments on the prepared buffers.
  RmsNormArgs args() const {
    const size_t es = tileops::element_size(p_.dtype);
    RmsNormArgs a;
    a.x = dx_->at(static_cast<size_t>(p_.x_offset) * es);
    a.x_row_stride = p_.x_stride;
    a.residual = p_.fused ? dr_->at(static_cast<size_t>(p_.r_offset) * es) : nullptr;
    a.residual_row_stride = p_.r_stride;
    a.weight = dw_->at(static_cast<size_t>(p_.w_offset) * es);
    a.y = p_.in_place ? dx_->at(static_cast<size_t>(p_.x_offset) * es)
                      : dy_->at(static_cast<size_t>(p_.y_offset) * es);
    a.y_row_stride = p_.y_stride;
    a.rows = p_.rows;
    a.cols = p_.cols;
    a.eps = p_.eps;
    a.dtype = p_.dtype;
    return a;
  }

  // Launches `config` on the prepared buffers, as they are (exceptions propagate).
  void launch(const RmsNormConfig& config) const { launch_rms_norm(args(), config, nullptr); }

  // Uploads fresh inputs, poisons the output, launches with `config` (default config when
  // nullopt), and checks y (and the residual).
  void run_and_check(const std::optional<RmsNormConfig>& config) {
    const size_t es = tileops::element_size(p_.dtype);
    CUDA_OK(cudaMemcpy(dx_->ptr, x_->bytes.data(), x_->bytes.size(), cudaMemcpyHostToDevice));
    if (p_.fused)
      CUDA_OK(cudaMemcpy(dr_->ptr, r_->bytes.data(), r_->bytes.size(), cudaMemcpyHostToDevice));
    if (!p_.in_place) CUDA_OK(cudaMemset(dy_->ptr, 0xFF, dy_->bytes));  // NaN poison

    const RmsNormArgs a = args();
    // No configuration: the default, or the fallback where a staged default refuses the
    // arguments (what the op's kernel does).
    RmsNormConfig cfg =
        config ? *config : rms_norm_default_config(p_.rows, p_.cols, p_.dtype, p_.fused, 0);
    if (!config && !rms_norm_staged_refusal(a, cfg).empty())
      cfg = rms_norm_fallback_config(p_.rows, p_.cols, p_.dtype, p_.fused, 0);
    const std::string where = p_.describe() + " config {" + cfg.str() + "}";
    try {
      launch_rms_norm(a, cfg, nullptr);
    } catch (const std::exception& e) {
      FAIL() << where << ": launch threw: " << e.what();
    }
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaGetLastError());

    // y
    HostTensor y(p_.dtype, p_.in_place ? x_->size() : y_elems_);
    CUDA_OK(cudaMemcpy(y.bytes.data(), p_.in_place ? dx_->ptr : dy_->ptr, y.bytes.size(),
                       cudaMemcpyDeviceToHost));
    const int64_t ys = p_.y_stride;
    const int64_t yo = p_.y_offset;
    std::vector<bool> in_row(y.size(), false);
    double max_err = 0.0;
    int64_t bad = 0;
    std::string first_bad;
    for (int64_t i = 0; i < p_.rows; ++i) {
      for (int64_t j = 0; j < p_.cols; ++j) {
        const size_t yi = static_cast<size_t>(yo + i * ys + j);
        in_row[yi] = true;
        const double got = y.get(yi);
        const double ref = ref_y_[static_cast<size_t>(i * p_.cols + j)];
        const double err = std::fabs(got - ref) / (1.0 + std::fabs(ref));
        if (!(err <= tolerance(p_.dtype))) {
          if (bad++ == 0) {
            std::ostringstream os;
            os << "y[" << i << ", " << j << "] = " << got << ", reference " << ref;
            first_bad = os.str();
          }
        }
        if (std::isnan(err) || err > max_err) max_err = std::isnan(err) ? INFINITY : err;
      }
    }
    EXPECT_EQ(bad, 0) << where << ": " << bad << " wrong elements, max err " << max_err
                      << ", first " << first_bad;
    // Outside the rows: untouched (poison, or x's own bits in place).
    int64_t touched = 0;
    for (size_t k = 0; k < y.size(); ++k) {
      if (in_row[k]) continue;
      const uint32_t expect = p_.in_place ? x_->bits(k) : (es == 4 ? 0xFFFFFFFFu : 0xFFFFu);
      if (y.bits(k) != expect) ++touched;
    }
    EXPECT_EQ(touched, 0) << where << ": " << touched << " elements outside the rows were written";

    if (p_.fused) {
      HostTensor r(p_.dtype, r_->size());
      CUDA_OK(cudaMemcpy(r.bytes.data(), dr_->ptr, r.bytes.size(), cudaMemcpyDeviceToHost));
      std::vector<bool> r_row(r.size(), false);
      int64_t rbad = 0;
      std::string rfirst;
      for (int64_t i = 0; i < p_.rows; ++i) {
        for (int64_t j = 0; j < p_.cols; ++j) {
          const size_t ri = static_cast<size_t>(p_.r_offset + i * p_.r_stride + j);
          r_row[ri] = true;
          const uint32_t want = ref_r_bits_[static_cast<size_t>(i * p_.cols + j)];
          if (r.bits(ri) != want && rbad++ == 0) {
            std::ostringstream os;
            os << "residual[" << i << ", " << j << "] bits " << std::hex << r.bits(ri) << ", want "
               << want;
            rfirst = os.str();
          }
        }
      }
      EXPECT_EQ(rbad, 0) << where << ": " << rbad << " wrong residual elements, first " << rfirst;
      int64_t rtouched = 0;
      for (size_t k = 0; k < r.size(); ++k)
        if (!r_row[k] && r.bits(k) != r_->bits(k)) ++rtouched;
      EXPECT_EQ(rtouched, 0) << where << ": residual written outside its rows";
    }
    // x is an input (unless y == x): unchanged.
    if (!p_.in_place) {
      HostTensor x(p_.dtype, x_->size());
      CUDA_OK(cudaMemcpy(x.bytes.data(), dx_->ptr, x.bytes.size(), cudaMemcpyDeviceToHost));
      EXPECT_TRUE(x.bytes == x_->bytes) << where << ": x was modified";
    }
  }

 private:
  RmsProblem p_;
  std::unique_ptr<HostTensor> x_, w_, r_;
  std::unique_ptr<DeviceBuffer> dx_, dw_, dr_, dy_;
  size_t y_elems_ = 0;
  std::vector<float> ref_y_;  // double-precision reference, stored as float
  std::vector<uint32_t> ref_r_bits_;
};

void check_problem(const RmsProblem& p,
                   const std::vector<std::optional<RmsNormConfig> >& configs = {std::nullopt}) {
  RmsRunner runner(p);
  ASSERT_NO_FATAL_FAILURE(runner.prepare()) << p.describe();
  for (const auto& c : configs) ASSERT_NO_FATAL_FAILURE(runner.run_and_check(c)) << p.describe();
}

const std::vector<int64_t> kCols = {1,    7,    8,    31,   64,    100,   127,   128,
                                    1000, 4096, 5120, 8192, 16384, 16385, 32768, 65536};
const std::vector<int64_t> kRows = {1, 3, 64, 2048};
const std::vector<DType> kDtypes = {DType::float32, DType::float16, DType::bfloat16};

// Every (cols, rows) of the lists up to 4M elements a tensor, each dtype, plain and fused, default
// configuration.
TEST(RmsNormKernels, ShapesDefaultConfig) {
  SKIP_WITHOUT_GPU();
  uint64_t seed = 100;
  for (const DType dtype : kDtypes)
    for (const bool fused : {false, true})
      for (const int64_t rows : kRows)
        for (const int64_t cols : kCols) {
          if (rows * cols > (int64_t{4} << 20)) continue;
          RmsProblem p;
          p.dtype = dtype;
          p.rows = rows;
          p.cols = cols;
          p.fused = fused;
          p.seed = ++seed;
          ASSERT_NO_FATAL_FAILURE(check_problem(p));
        }
}

// The benchmark shapes and the long rows (register-resident up to the limit, streaming past it).
TEST(RmsNormKernels, LargeShapes) {
  SKIP_WITHOUT_GPU();
  struct Shape {
    DType dtype;
    int64_t rows, cols;
  };
  const Shape shapes[] = {{DType::bfloat16, 2048, 16384}, {DType::bfloat16, 2048, 4096},
                          {DType::bfloat16, 1024, 32768}, {DType::float16, 4096, 8192},
                          {DType::float32, 2048, 8192},   {DType::float32, 300, 65536},
                          {DType::bfloat16, 300, 65536},  {DType::float16, 7, 131072 + 3}};
  uint64_t seed = 500;
  for (const Shape& s : shapes)
    for (const bool fused : {false, true}) {
      RmsProblem p;
      p.dtype = s.dtype;
      p.rows = s.rows;
      p.cols = s.cols;
      p.fused = fused;
      p.seed = ++seed;
      ASSERT_NO_FATAL_FAILURE(check_problem(p));
    }
}

// Row strides larger than cols (vector path with a tail, or the scalar path when the stride is
// not a multiple of 16 bytes), different for x, residual and y.
TEST(RmsNormKernels, StridedRows) {
  SKIP_WITHOUT_GPU();
  struct Strided {
    int64_t rows, cols, xs, rs, ys;
  };
  const Strided cases[] = {{64, 100, 104, 112, 128},         {64, 4096, 4104, 4096, 4352},
                           {3, 4096, 4100, 4101, 4099},      {64, 1000, 1003, 1024, 1001},
                           {33, 16384, 16392, 16384, 20000}, {5, 7, 9, 8, 16},
                           {17, 65536, 65544, 65600, 65536}};
  uint64_t seed = 700;
  for (const DType dtype : kDtypes)
    for (const bool fused : {false, true})
      for (const Strided& c : cases) {
        RmsProblem p;
        p.dtype = dtype;
        p.rows = c.rows;
        p.cols = c.cols;
        p.fused = fused;
        p.x_stride = c.xs;
        p.r_stride = c.rs;
        p.y_stride = c.ys;
        p.seed = ++seed;
        ASSERT_NO_FATAL_FAILURE(check_problem(p));
      }
}

// Base pointers offset by one element (each alone, then all): the scalar path.
TEST(RmsNormKernels, UnalignedPointers) {
  SKIP_WITHOUT_GPU();
  uint64_t seed = 900;
  for (const DType dtype : kDtypes)
    for (const bool fused : {false, true})
      for (const int64_t cols : {int64_t{64}, int64_t{1000}, int64_t{4096}, int64_t{16384}})
        for (int which = 0; which < 5; ++which) {
          RmsProblem p;
          p.dtype = dtype;
          p.rows = 19;
          p.cols = cols;
          p.fused = fused;
          p.x_offset = which == 0 || which == 4 ? 1 : 0;
          p.r_offset = which == 1 || which == 4 ? 1 : 0;
          p.y_offset = which == 2 || which == 4 ? 1 : 0;
          p.w_offset = which == 3 || which == 4 ? 1 : 0;
          p.seed = ++seed;
          ASSERT_NO_FATAL_FAILURE(check_problem(p));
        }
}

// y == x: every element is read before it is written.
TEST(RmsNormKernels, InPlace) {
  SKIP_WITHOUT_GPU();
  uint64_t seed = 1100;
  for (const DType dtype : kDtypes)
    for (const bool fused : {false, true})
      for (const int64_t cols : {int64_t{7}, int64_t{128}, int64_t{4096}, int64_t{16385},
                                 int64_t{32768}, int64_t{65536}})
        for (const int64_t offset : {int64_t{0}, int64_t{1}}) {
          RmsProblem p;
          p.dtype = dtype;
          p.rows = 37;
          p.cols = cols;
          p.fused = fused;
          p.in_place = true;
          p.x_offset = offset;
          p.seed = ++seed;
          ASSERT_NO_FATAL_FAILURE(check_problem(p));
        }
}

// Every configuration of the tuning space, and each again with one block per multiprocessor (the
// persistent loop then runs many rows per block) and with the scalar path.
TEST(RmsNormKernels, EveryTuningConfig) {
  SKIP_WITHOUT_GPU();
  struct Shape {
    int64_t rows, cols;
  };
  const Shape shapes[] = {{3, 100},    {2048, 64}, {300, 1000}, {1, 4096},  {256, 4096},
                          {77, 5120},  {7, 16384}, {64, 16384}, {5, 32768}, {9, 65536},
                          {130, 4099}, {37, 16383}};  // the last two: scalar tails
  uint64_t seed = 1300;
  for (const DType dtype : kDtypes)
    for (const bool fused : {false, true})
      for (const Shape& s : shapes) {
        std::vector<std::optional<RmsNormConfig> > configs;
        const auto space = rms_norm_tuning_space(s.rows, s.cols, dtype, fused, 0);
        ASSERT_FALSE(space.empty());
        EXPECT_EQ(space.front(), rms_norm_default_config(s.rows, s.cols, dtype, fused, 0));
        for (RmsNormConfig c : space) {
          configs.emplace_back(c);
          c.blocks_per_sm = 1;
          configs.emplace_back(c);
        }
        RmsNormConfig scalar;  // scalar accesses (vec_bytes = element size): streaming only
        scalar.threads = 256;
        scalar.rows_per_block =
            space.front().threads_per_row() < 32 ? 256 / space.front().threads_per_row() : 1;
        scalar.vec_bytes = static_cast<int>(tileops::element_size(dtype));
        scalar.vecs_per_thread = 0;
        configs.emplace_back(scalar);
        RmsProblem p;
        p.dtype = dtype;
        p.rows = s.rows;
        p.cols = s.cols;
        p.fused = fused;
        p.seed = ++seed;
        ASSERT_NO_FATAL_FAILURE(check_problem(p, configs));
      }
}

// The variant configurations (grid, rows_in_flight, cluster_size, cache_hint, 16 vectors a thread)
// of the spaces of the 4096- and 16384-column shapes, on rows with scalar tails, strided rows,
// y == x, and unaligned x (the scalar fallback), each also with one block per multiprocessor.
TEST(RmsNormKernels, VariantConfigsStridedInPlace) {
  SKIP_WITHOUT_GPU();
  const StridedCase cases[] = {{41, 4099, 4104, 4112, 4200, 0, false},
                               {41, 4099, 4104, 4104, 0, 0, true},
                               {23, 16383, 16392, 16400, 16384, 0, false},
                               {23, 16383, 16384, 16384, 0, 0, true},
                               {9, 4096, 4096, 4096, 4096, 1, false}};
  uint64_t seed = 1700;
  for (const DType dtype : kDtypes)
    for (const bool fused : {false, true})
      for (const StridedCase& k : cases) {
        std::vector<std::optional<RmsNormConfig> > configs;
        for (RmsNormConfig c : rms_norm_tuning_space(2048, k.cols, dtype, fused, 0)) {
          if (c.staged_rows != 0) continue;  // aligned arguments only: StagedConfigs
          if (c.grid == tileops::cuda_kernels::RmsGrid::persistent && c.rows_in_flight == 1 &&
              c.cluster_size == 1 && c.cache_hint == 0 && c.vecs_per_thread != 16)
            continue;
          configs.emplace_back(c);
          c.blocks_per_sm = 1;
          configs.emplace_back(c);
        }
        ASSERT_GT(configs.size(), 10u) << dtype_str(dtype) << " cols " << k.cols;
        ASSERT_NO_FATAL_FAILURE(check_problem(k.problem(dtype, fused, ++seed), configs));
      }
}

RmsNormConfig make_streaming(int threads) {
  RmsNormConfig c;
  c.threads = threads;
  c.rows_per_block = 1;
  c.vecs_per_thread = 0;
  return c;
}

// `launch` raises SignatureError with `why` in its message.
template <class F>
void expect_signature_error(F&& launch, const std::string& why) {
  try {
    launch();
    ADD_FAILURE() << "no SignatureError; expected one saying: " << why;
  } catch (const tileops::SignatureError& e) {
    EXPECT_THAT(e.what(), testing::HasSubstr(why));
  }
}

// An empty problem launches nothing; a bad configuration or dtype raises SignatureError.
TEST(RmsNormKernels, EmptyAndInvalid) {
  SKIP_WITHOUT_GPU();
  DeviceBuffer buf(1 << 20);
  ASSERT_NE(buf.ptr, nullptr);
  CUDA_OK(cudaMemset(buf.ptr, 0xFF, buf.bytes));
  RmsNormArgs a;
  a.x = buf.at(0);
  a.weight = buf.at(0);
  a.y = buf.at(4096);
  a.x_row_stride = a.y_row_stride = 64;
  a.rows = 0;
  a.cols = 64;
  a.dtype = DType::bfloat16;
  const RmsNormConfig def = rms_norm_default_config(16, 64, DType::bfloat16, false, 0);
  EXPECT_NO_THROW(launch_rms_norm(a, def, nullptr));
  a.rows = 16;
  a.cols = 0;
  EXPECT_NO_THROW(launch_rms_norm(a, def, nullptr));
  CUDA_OK(cudaDeviceSynchronize());

  a.cols = 64;
  RmsNormConfig bad = def;
  bad.threads = 48;
  EXPECT_THROW(launch_rms_norm(a, bad, nullptr), tileops::SignatureError);
  bad = def;
  bad.rows_per_block = 3;
  EXPECT_THROW(launch_rms_norm(a, bad, nullptr), tileops::SignatureError);
  bad = def;
  bad.vecs_per_thread = 3;
  EXPECT_THROW(launch_rms_norm(a, bad, nullptr), tileops::SignatureError);
  // A resident configuration too small for the row.
  RmsNormConfig small;
  small.threads = 32;
  small.rows_per_block = 1;
  small.vecs_per_thread = 1;
  a.cols = 4096;
  a.x_row_stride = a.y_row_stride = 4096;
  EXPECT_THROW(launch_rms_norm(a, small, nullptr), tileops::SignatureError);
  // Variant fields out of range or without a kernel.
  // (a register-resident configuration: 128 threads x 4 vectors, the weight in registers)
  RmsNormConfig resident;
  resident.threads = 128;
  resident.rows_per_block = 1;
  resident.vecs_per_thread = 4;
  resident.weight_in_registers = true;
  bad = resident;
  bad.rows_in_flight = 3;
  EXPECT_THROW(launch_rms_norm(a, bad, nullptr), tileops::SignatureError);
  bad = resident;
  bad.cluster_size = 4;
  EXPECT_THROW(launch_rms_norm(a, bad, nullptr), tileops::SignatureError);
  bad = resident;
  bad.cache_hint = 3;
  EXPECT_THROW(launch_rms_norm(a, bad, nullptr), tileops::SignatureError);
  bad = resident;
  bad.grid = static_cast<tileops::cuda_kernels::RmsGrid>(7);
  EXPECT_THROW(launch_rms_norm(a, bad, nullptr), tileops::SignatureError);
  bad = make_streaming(256);
  bad.rows_in_flight = 2;
  EXPECT_THROW(launch_rms_norm(a, bad, nullptr), tileops::SignatureError);
  // streaming_unroll: 0, 1, 2 or 4, and only for the 16-byte streaming kernel.
  bad = make_streaming(256);
  bad.streaming_unroll = 3;
  EXPECT_THROW(launch_rms_norm(a, bad, nullptr), tileops::SignatureError);
  bad = resident;
  bad.streaming_unroll = 1;
  EXPECT_THROW(launch_rms_norm(a, bad, nullptr), tileops::SignatureError);
  bad = make_streaming(256);
  bad.vec_bytes = 2;
  bad.streaming_unroll = 2;
  EXPECT_THROW(launch_rms_norm(a, bad, nullptr), tileops::SignatureError);
  // cache_hint on the streaming kernel: only with streaming_unroll 1 or 2, at most 3.
  RmsNormConfig lean = make_streaming(256);
  lean.streaming_unroll = 1;
  for (const int hint : {1, 2}) {
    bad = make_streaming(256);
    bad.cache_hint = hint;
    expect_signature_error([&] { launch_rms_norm(a, bad, nullptr); },
                           "cache_hint on the streaming kernel needs streaming_unroll 1 or 2");
  }
  bad = lean;
  bad.cache_hint = 4;
  expect_signature_error([&] { launch_rms_norm(a, bad, nullptr); },
                         "cache_hint must be 0, 1, 2 or 3");
  // cache_hint 3 (L1-allocating loads) is of the lean kernels alone.
  for (RmsNormConfig c : {make_streaming(256), resident}) {
    c.cache_hint = 3;
    expect_signature_error([&] { launch_rms_norm(a, c, nullptr); },
                           "cache_hint 3 needs a lean streaming kernel (streaming_unroll 1 or 2)");
  }
  bad = lean;
  bad.cache_hint = 1;
  bad.weight_in_registers = true;
  expect_signature_error([&] { launch_rms_norm(a, bad, nullptr); },
                         "weight_in_registers needs vecs_per_thread 1, 2 or 4");
  // fused_recompute: lean kernels only, fused launches only (a has no residual).
  bad = make_streaming(256);
  bad.fused_recompute = true;
  expect_signature_error([&] { launch_rms_norm(a, bad, nullptr); },
                         "fused_recompute needs streaming_unroll 1 or 2");
  bad = lean;
  bad.fused_recompute = true;
  expect_signature_error([&] { launch_rms_norm(a, bad, nullptr); },
                         "fused_recompute needs a fused launch");
  // reread: its own shapes only, rows of exactly threads x vecs_per_thread vectors (a: bf16 rows
  // of 4096 = 512 threads x 1 vector), at most 2 vectors a thread when fused (a has no residual
  // here; the fused refusal is checked in RmsNormKernels.Reread).
  RmsNormConfig reread = make_streaming(512);
  reread.vecs_per_thread = 1;
  reread.reread = true;
  EXPECT_NE(reread.str().find(",reread=true"), std::string::npos) << reread.str();
  EXPECT_EQ(make_streaming(512).str().find("reread"), std::string::npos);
  for (const auto& change : std::vector<std::function<void(RmsNormConfig&)> >{
           [](RmsNormConfig& c) { c.vecs_per_thread = 0; },
           [](RmsNormConfig& c) { c.vecs_per_thread = 8; },
           [](RmsNormConfig& c) { c.threads = 384; },
           [](RmsNormConfig& c) { c.rows_per_block = 2; },
           [](RmsNormConfig& c) { c.weight_in_registers = true; },
           [](RmsNormConfig& c) { c.rows_in_flight = 2; },
           [](RmsNormConfig& c) { c.cache_hint = 1; },
           [](RmsNormConfig& c) { c.streaming_unroll = 1; }}) {
    bad = reread;
    change(bad);
    expect_signature_error([&] { launch_rms_norm(a, bad, nullptr); },
                           "reread takes vecs_per_thread 1, 2 or 4, rows_per_block 1");
  }
  bad = reread;
  bad.threads = 256;
  expect_signature_error(
      [&] { launch_rms_norm(a, bad, nullptr); },
      "reread needs rows of exactly threads x vecs_per_thread 16-byte vectors (2048 elements)");
  a.dtype = DType::int32;
  EXPECT_THROW(launch_rms_norm(a, def, nullptr), tileops::SignatureError);
  EXPECT_THROW(rms_norm_default_config(16, 64, DType::int8, false, 0), tileops::SignatureError);
  // Nothing was written by the empty launches or the rejected ones.
  std::vector<unsigned char> host(buf.bytes);
  CUDA_OK(cudaMemcpy(host.data(), buf.ptr, buf.bytes, cudaMemcpyDeviceToHost));
  EXPECT_TRUE(std::all_of(host.begin(), host.end(), [](unsigned char b) { return b == 0xFF; }));
}

RmsNormConfig make_staged(int threads, int stages, int blocks_per_sm) {
  RmsNormConfig c;
  c.threads = threads;
  c.rows_per_block = 1;
  c.vecs_per_thread = 0;
  c.blocks_per_sm = blocks_per_sm;
  c.staged_rows = stages;
  return c;
}

// The lean streaming kernels (streaming_unroll 1 and 2; opt-in, in no tuning space yet) with
// blocks of 128 and 512 threads on the persistent grid and a block per row: rows with scalar
// tails, rows longer than a block's vectors, strided rows, y == x, a single row, and unaligned x
// (the scalar path, which ignores streaming_unroll); their names.
TEST(RmsNormKernels, StreamingUnroll) {
  SKIP_WITHOUT_GPU();
  const StridedCase cases[] = {{2048, 4096, 0, 0, 0, 0, false},
                               {37, 16383, 0, 0, 0, 0, false},
                               {64, 16384, 16392, 16400, 16384, 0, false},
                               {23, 16383, 16384, 16384, 0, 0, true},
                               {1, 8192, 0, 0, 0, 0, false},
                               {300, 1000, 0, 0, 0, 0, false},
                               {9, 65536, 0, 0, 0, 0, false},
                               {19, 4096, 0, 0, 0, 1, false}};
  std::vector<std::optional<RmsNormConfig> > configs;
  for (const int unroll : {1, 2})
    for (const int hint : {0, 1, 2, 3})
      for (const int threads : {128, 512})
        for (const auto grid :
             {tileops::cuda_kernels::RmsGrid::persistent, tileops::cuda_kernels::RmsGrid::all}) {
          RmsNormConfig c = make_streaming(threads);
          c.streaming_unroll = unroll;
          c.cache_hint = hint;
          c.grid = grid;
          configs.emplace_back(c);
        }
  // Fused launches also recompute the sum in pass 2 (fused_recompute), a block per row.
  std::vector<std::optional<RmsNormConfig> > fused_configs = configs;
  for (const int unroll : {1, 2})
    for (const int hint : {0, 1, 2, 3})
      for (const int threads : {128, 512}) {
        RmsNormConfig c = make_streaming(threads);
        c.streaming_unroll = unroll;
        c.cache_hint = hint;
        c.grid = tileops::cuda_kernels::RmsGrid::all;
        c.fused_recompute = true;
        fused_configs.emplace_back(c);
      }
  RmsNormConfig named = make_streaming(256);
  named.streaming_unroll = 2;
  EXPECT_NE(named.str().find(",streaming_unroll=2"), std::string::npos) << named.str();
  EXPECT_EQ(make_streaming(256).str().find("streaming_unroll"), std::string::npos);
  named.fused_recompute = true;
  EXPECT_NE(named.str().find(",fused_recompute=true"), std::string::npos) << named.str();
  uint64_t seed = 2500;
  for (const DType dtype : kDtypes)
    for (const bool fused : {false, true})
      for (const StridedCase& k : cases)
        ASSERT_NO_FATAL_FAILURE(
            check_problem(k.problem(dtype, fused, ++seed), fused ? fused_configs : configs));
}

// The re-reading kernel (reread): every (threads, vecs_per_thread) it has, plain and fused, each on
// rows of exactly threads x vecs_per_thread vectors, on a persistent grid of one block a
// multiprocessor (blocks loop over rows) and with a block per row; contiguous and strided rows,
// y == x, and an unaligned x (which takes the scalar path). Fused with 4 vectors is refused.
TEST(RmsNormKernels, Reread) {
  SKIP_WITHOUT_GPU();
  uint64_t seed = 3100;
  for (const DType dtype : kDtypes)
    for (const bool fused : {false, true})
      for (const int threads : {256, 512, 1024})
        for (const int nv : {1, 2, 4}) {
          const int64_t cols =
              int64_t{threads} * nv * (16 / static_cast<int64_t>(tileops::element_size(dtype)));
          RmsNormConfig c = make_streaming(threads);
          c.vecs_per_thread = nv;
          c.reread = true;
          if (fused && nv == 4) {
            RmsProblem p = StridedCase{4, cols, 0, 0, 0, 0, false}.problem(dtype, true, ++seed);
            RmsRunner runner(p);
            ASSERT_NO_FATAL_FAILURE(runner.prepare());
            expect_signature_error([&] { runner.launch(c); },
                                   "reread with a residual takes vecs_per_thread 1 or 2");
            continue;
          }
          std::vector<std::optional<RmsNormConfig> > configs;
          c.grid = tileops::cuda_kernels::RmsGrid::persistent;
          c.blocks_per_sm = 1;
          configs.emplace_back(c);
          c.grid = tileops::cuda_kernels::RmsGrid::all;
          c.blocks_per_sm = 0;
          configs.emplace_back(c);
          const StridedCase cases[] = {{300, cols, 0, 0, 0, 0, false},
                                       {37, cols, cols + 8, cols + 16, cols + 24, 0, false},
                                       {37, cols, cols + 8, cols + 8, 0, 0, true},
                                       {1, cols, 0, 0, 0, 0, false},
                                       {5, cols, 0, 0, 0, 1, false}};
          for (const StridedCase& k : cases)
            ASSERT_NO_FATAL_FAILURE(check_problem(k.problem(dtype, fused, ++seed), configs));
        }
}

// The shared-memory-staged kernel (staged_rows = D; sm_90 only) with D = 2, 4 and the most that
// fit one or two blocks a multiprocessor, several block sizes (also not powers of two), the
// occupancy's grid, more blocks than fit at once and the balanced grid; on the benchmark shape,
// long rows, rows of a vector count that is no multiple of the threads, y == x, strided rows, a
// single row and fewer rows than blocks.
TEST(RmsNormKernels, StagedConfigs) {
  SKIP_WITHOUT_GPU();
  int device = 0;
  int major = 0;
  CUDA_OK(cudaGetDevice(&device));
  CUDA_OK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  if (major != 9) GTEST_SKIP() << "the staged kernel needs a device of compute capability 9.x";
  // Strides: 0 is cols (multiples of 16 bytes for every dtype); x never offset (16-byte aligned).
  const StridedCase cases[] = {
      {2048, 4096, 0, 0, 0, 0, false},       {3, 16384, 0, 0, 0, 0, false},
      {300, 1000, 0, 0, 0, 0, false},        {41, 4104, 0, 0, 0, 0, false},
      {37, 4096, 0, 0, 0, 0, true},          {64, 4096, 4104, 4112, 4352, 0, false},
      {33, 1000, 1008, 1024, 1016, 0, true}, {1, 4096, 0, 0, 0, 0, false},
      {7, 8192, 0, 0, 0, 0, false}};
  uint64_t seed = 2100;
  for (const DType dtype : kDtypes)
    for (const bool fused : {false, true})
      for (const StridedCase& k : cases) {
        const int max1 = rms_norm_staged_max_rows(k.cols, dtype, fused, 1);
        const int max2 = rms_norm_staged_max_rows(k.cols, dtype, fused, 2);
        if (max1 < 2) continue;  // fp32 fused [3, 16384]: refused (StagedInvalid)
        std::vector<std::optional<RmsNormConfig> > configs = {
            make_staged(256, 2, 0), make_staged(1024, max1, 1), make_staged(96, max1, 1),
            make_staged(64, 2, 8)};  // more blocks than fit when 2 stages do not fit 8 times
        if (max1 >= 4) configs.emplace_back(make_staged(128, 4, 1));
        if (max2 >= 2) configs.emplace_back(make_staged(512, max2, 2));
        RmsNormConfig hinted = make_staged(512, std::min(max1, 4), 0);  // L2 policies on the copies
        hinted.cache_hint = 1;
        configs.emplace_back(hinted);
        RmsNormConfig balanced = make_staged(256, std::min(max1, 3), 1);
        balanced.grid = tileops::cuda_kernels::RmsGrid::balanced;
        configs.emplace_back(balanced);
        ASSERT_NO_FATAL_FAILURE(check_problem(k.problem(dtype, fused, ++seed), configs));
      }
}

// The staged kernel refuses (SignatureError, nothing written) what it cannot serve: unaligned
// pointers or row strides, rows of no multiple of 16 bytes, rows too long for the weight and 2
// stages, and the register-resident fields; it is in no tuning space.
TEST(RmsNormKernels, StagedInvalid) {
  SKIP_WITHOUT_GPU();
  DeviceBuffer buf(8 << 20);
  ASSERT_NE(buf.ptr, nullptr);
  CUDA_OK(cudaMemset(buf.ptr, 0xFF, buf.bytes));
  RmsNormArgs a;
  a.x = buf.at(0);
  a.weight = buf.at(size_t{1} << 20);
  a.y = buf.at(size_t{4} << 20);
  a.residual = nullptr;
  a.rows = 4;
  a.cols = 4096;
  a.x_row_stride = a.y_row_stride = a.residual_row_stride = 4096;
  a.dtype = DType::bfloat16;
  const RmsNormConfig staged = make_staged(256, 4, 1);
  const auto refused = [&](const RmsNormArgs& args, const RmsNormConfig& c) {
    EXPECT_THROW(launch_rms_norm(args, c, nullptr), tileops::SignatureError) << c.str();
  };
  // Refused for its arguments: rms_norm_staged_refusal says why beforehand.
  const auto refused_args = [&](const RmsNormArgs& args, const RmsNormConfig& c,
                                const std::string& why) {
    refused(args, c);
    EXPECT_THAT(rms_norm_staged_refusal(args, c), testing::HasSubstr(why)) << c.str();
    // The fallback is not staged: nothing refuses these arguments for their alignment there.
    const RmsNormConfig fallback =
        rms_norm_fallback_config(args.rows, args.cols, args.dtype, args.residual != nullptr, 0);
    EXPECT_EQ(rms_norm_staged_refusal(args, fallback), "") << fallback.str();
  };
  EXPECT_EQ(rms_norm_staged_refusal(a, staged), "");
  RmsNormArgs b = a;
  b.x = buf.at(2);  // x one element off
  refused_args(b, staged, "16-byte aligned");
  b = a;
  b.residual = buf.at((size_t{2} << 20) + 2);  // residual one element off
  refused_args(b, staged, "16-byte aligned");
  b = a;
  b.x_row_stride = 4100;  // 8200 bytes
  refused_args(b, staged, "row strides of a multiple of 16 bytes");
  b = a;
  b.cols = b.x_row_stride = b.y_row_stride = 40000;  // weight + 2 stages of 80000 bytes
  refused_args(b, make_staged(256, 2, 1), "bytes of shared memory");
  b = a;
  b.cols = 100;  // 200 bytes
  b.x_row_stride = b.y_row_stride = 104;
  refused(b, make_staged(256, 2, 1));
  b = a;
  b.dtype = DType::float32;
  b.cols = b.x_row_stride = b.y_row_stride = b.residual_row_stride = 16384;  // fused: 2 x 64 KB
  b.residual = buf.at(size_t{2} << 20);
  EXPECT_EQ(rms_norm_staged_max_rows(16384, DType::float32, true, 1), 0);
  refused(b, make_staged(256, 2, 1));
  RmsNormConfig bad = staged;
  bad.staged_rows = 1;
  refused(a, bad);
  bad = staged;
  bad.vecs_per_thread = 4;
  refused(a, bad);
  bad = staged;
  bad.rows_per_block = 2;
  refused(a, bad);
  bad = staged;
  bad.grid = tileops::cuda_kernels::RmsGrid::all;
  refused(a, bad);
  bad = staged;
  bad.vec_bytes = 2;
  refused(a, bad);
  bad = staged;
  bad.threads = 48;
  refused(a, bad);
  bad = staged;
  bad.streaming_unroll = 1;
  refused(a, bad);
  bad = staged;
  bad.cache_hint = 2;  // 0 or 1 only
  refused(a, bad);
  bad = staged;
  bad.fused_recompute = true;
  refused(a, bad);
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<unsigned char> host(buf.bytes);
  CUDA_OK(cudaMemcpy(host.data(), buf.ptr, buf.bytes, cudaMemcpyDeviceToHost));
  EXPECT_TRUE(std::all_of(host.begin(), host.end(), [](unsigned char v) { return v == 0xFF; }));
  EXPECT_NE(staged.str().find(",staged_rows=4"), std::string::npos) << staged.str();
}

// The defaults are members of their tuning spaces (the fallback second) and every member is a
// valid configuration; the fallback is never staged and equals an unstaged default; the default
// re-reads exactly where default_reread_config says and holds the row exactly, and is otherwise
// staged exactly on sm_90 for at least as many rows as multiprocessors, rows of at least 16 KB
// and 2 stages for each of two blocks or 3 for one; a staged member's stages fit.
TEST(RmsNormKernels, ConfigFunctions) {
  SKIP_WITHOUT_GPU();
  const auto& props = tileops::cuda_device_properties(0);
  for (const DType dtype : kDtypes)
    for (const bool fused : {false, true})
      for (const int64_t rows : {int64_t{1}, int64_t{64}, int64_t{props.sm_count}, int64_t{2048}})
        for (const int64_t cols : kCols) {
          const std::string where = dtype_str(dtype) + (fused ? " fused [" : " [") +
                                    std::to_string(rows) + ", " + std::to_string(cols) + "]";
          const RmsNormConfig def = rms_norm_default_config(rows, cols, dtype, fused, 0);
          const RmsNormConfig fallback = rms_norm_fallback_config(rows, cols, dtype, fused, 0);
          EXPECT_GT(def.threads, 0);
          EXPECT_EQ(def.threads % def.rows_per_block, 0);
          EXPECT_EQ(fallback.staged_rows, 0) << where;
          const int64_t row_bytes = cols * static_cast<int64_t>(tileops::element_size(dtype));
          // Rows of exactly 512, 1024 or 2048 vectors on sm_90 (not many fused rows of 512): the
          // re-reading kernel, the row held exactly.
          const int64_t vec = 16 / static_cast<int64_t>(tileops::element_size(dtype));
          const int64_t nvec = cols / vec;
          // Many plain fp32 rows of 1024 vectors: the register-resident kernel instead, 256
          // threads x 4 vectors, the weight in registers.
          const bool want_resident = props.major == 9 && dtype == DType::float32 && !fused &&
                                     rows >= props.sm_count && cols == 4096;
          const bool want_reread =
              props.major == 9 && cols % vec == 0 && !want_resident &&
              ((nvec == 512 && (!fused || rows < props.sm_count)) || nvec == 1024 || nvec == 2048);
          if (want_resident) {
            EXPECT_EQ(def.threads, 256) << where;
            EXPECT_EQ(def.vecs_per_thread, 4) << where;
            EXPECT_TRUE(def.weight_in_registers) << where;
          }
          EXPECT_EQ(def.reread, want_reread) << where << ": " << def.str();
          if (want_reread) {
            EXPECT_EQ(static_cast<int64_t>(def.threads) * def.vecs_per_thread, nvec) << where;
            EXPECT_LE(def.vecs_per_thread, fused ? 2 : 4) << where;
          }
          // Else fused, many rows of at least 8 KB: the lean streaming kernel, a block per row.
          const bool want_lean =
              !want_reread && fused && rows >= props.sm_count && row_bytes >= 8192;
          const bool want_staged = !want_reread && !want_resident && !fused &&
                                   rows >= props.sm_count && row_bytes >= 16384 &&
                                   props.major == 9 &&
                                   (rms_norm_staged_max_rows(cols, dtype, fused, 2) >= 2 ||
                                    rms_norm_staged_max_rows(cols, dtype, fused, 1) >= 3);
          EXPECT_EQ(def.staged_rows != 0, want_staged) << where << ": " << def.str();
          EXPECT_EQ(def.streaming_unroll != 0, want_lean) << where << ": " << def.str();
          EXPECT_FALSE(def.fused_recompute) << where;
          if (want_lean) {
            EXPECT_EQ(def.vecs_per_thread, 0) << where;
            EXPECT_EQ(def.grid, tileops::cuda_kernels::RmsGrid::all) << where;
          }
          if (def.staged_rows == 0) {
            EXPECT_EQ(def, fallback) << where;
          }
          const auto space = rms_norm_tuning_space(rows, cols, dtype, fused, 0);
          ASSERT_GE(space.size(), 2u) << where;
          EXPECT_EQ(space.front(), def) << where << ": " << def.str();
          if (def.staged_rows != 0) {
            EXPECT_EQ(space[1], fallback) << where;
          }
          for (const auto& c : space) {
            EXPECT_FALSE(c.str().empty());
            EXPECT_TRUE(fused || !c.fused_recompute) << where << ": " << c.str();
            if (c.reread) {
              EXPECT_EQ(static_cast<int64_t>(c.threads) * c.vecs_per_thread * vec, cols)
                  << where << ": " << c.str();
              EXPECT_TRUE(!fused || c.vecs_per_thread <= 2) << where << ": " << c.str();
            }
            if (c.staged_rows != 0) {
              EXPECT_LE(c.staged_rows,
                        rms_norm_staged_max_rows(cols, dtype, fused, std::max(1, c.blocks_per_sm)))
                  << where << ": " << c.str();
            }
          }
        }
}

#endif  // TILEOPS_WITH_CUDA

}  // namespace
