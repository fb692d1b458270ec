// Internal to the GPU tests of the CUDA RMSNorm kernels (test_norm_*.cpp): one problem, made once
// on the host and the device, run with any number of configurations and checked against a
// double-precision CPU reference.
//
// Every launch writes into an output poisoned with NaN bit patterns (0xFF bytes); elements outside
// the rows (strided gaps) must keep their poison (or, in place, their input bits). Tolerance:
// max |y - ref| / (1 + |ref|) <= 1e-5 (fp32), 1e-3 (fp16), 1.6e-2 (bf16); the updated residual of
// the fused kernel must match T(float(x) + float(residual)) bit for bit.
#pragma once

#if TILEOPS_WITH_CUDA
#include <cuda_runtime.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "gpu/kernel_test_util.h"
#include "kernels/norm/rms_norm_cuda.h"
#include "tileops/core/cuda.h"
#include "tileops/core/dtype.h"
#include "tileops/core/error.h"

namespace tileops::norm_test {

using tileops::DType;
using tileops::cuda_kernels::launch_rms_norm;
using tileops::cuda_kernels::rms_norm_default_config;
using tileops::cuda_kernels::rms_norm_fallback_config;
using tileops::cuda_kernels::rms_norm_staged_max_rows;
using tileops::cuda_kernels::rms_norm_staged_refusal;
using tileops::cuda_kernels::rms_norm_tuning_space;
using tileops::cuda_kernels::RMSNormArgs;
using tileops::cuda_kernels::RMSNormConfig;

using namespace tileops::kernel_test;  // NOLINT: the shared kernel-test helpers

// ---- one RMSNorm problem: inputs made once, run with any number of configurations ----

struct RMSProblem {
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

  RMSProblem problem(DType dtype, bool fused, uint64_t seed) const {
    RMSProblem p;
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

class RMSRunner {
 public:
  explicit RMSRunner(RMSProblem p) : p_(std::move(p)) {
    if (p_.x_stride == 0) p_.x_stride = p_.cols;
    if (p_.r_stride == 0) p_.r_stride = p_.cols;
    if (p_.y_stride == 0) p_.y_stride = p_.cols;
    if (p_.in_place) {
      p_.y_stride = p_.x_stride;
      p_.y_offset = p_.x_offset;
    }
  }

  const RMSProblem& problem() const { return p_; }

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
  RMSNormArgs args() const {
    const size_t es = tileops::element_size(p_.dtype);
    RMSNormArgs a;
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
  void launch(const RMSNormConfig& config) const { launch_rms_norm(args(), config, nullptr); }

  // Uploads fresh inputs, poisons the output, launches with `config` (default config when
  // nullopt), and checks y (and the residual).
  void run_and_check(const std::optional<RMSNormConfig>& config) {
    const size_t es = tileops::element_size(p_.dtype);
    CUDA_OK(cudaMemcpy(dx_->ptr, x_->bytes.data(), x_->bytes.size(), cudaMemcpyHostToDevice));
    if (p_.fused)
      CUDA_OK(cudaMemcpy(dr_->ptr, r_->bytes.data(), r_->bytes.size(), cudaMemcpyHostToDevice));
    if (!p_.in_place) CUDA_OK(cudaMemset(dy_->ptr, 0xFF, dy_->bytes));  // NaN poison

    const RMSNormArgs a = args();
    // No configuration: the default, or the fallback where a staged default refuses the
    // arguments (what the op's kernel does).
    RMSNormConfig cfg =
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
  RMSProblem p_;
  std::unique_ptr<HostTensor> x_, w_, r_;
  std::unique_ptr<DeviceBuffer> dx_, dw_, dr_, dy_;
  size_t y_elems_ = 0;
  std::vector<float> ref_y_;  // double-precision reference, stored as float
  std::vector<uint32_t> ref_r_bits_;
};

inline void check_problem(const RMSProblem& p,
                          const std::vector<std::optional<RMSNormConfig> >& configs = {
                              std::nullopt}) {
  RMSRunner runner(p);
  ASSERT_NO_FATAL_FAILURE(runner.prepare()) << p.describe();
  for (const auto& c : configs) ASSERT_NO_FATAL_FAILURE(runner.run_and_check(c)) << p.describe();
}

inline const std::vector<int64_t> kCols = {1,    7,    8,    31,   64,    100,   127,   128,
                                           1000, 4096, 5120, 8192, 16384, 16385, 32768, 65536};
inline const std::vector<int64_t> kRows = {1, 3, 64, 2048};
inline const std::vector<DType> kDtypes = {DType::float32, DType::float16, DType::bfloat16};

/// `c` with blocks_per_sm set to n (every family has it).
inline RMSNormConfig with_blocks_per_sm(RMSNormConfig c, int n) {
  std::visit([n](auto& k) { k.blocks_per_sm = n; }, c.kernel);
  return c;
}

/// `launch` raises SignatureError with `why` in its message.
template <class F>
void expect_signature_error(F&& launch, const std::string& why) {
  try {
    launch();
    ADD_FAILURE() << "no SignatureError; expected one saying: " << why;
  } catch (const tileops::SignatureError& e) {
    EXPECT_THAT(e.what(), testing::HasSubstr(why));
  }
}

}  // namespace tileops::norm_test

#endif  // TILEOPS_WITH_CUDA
