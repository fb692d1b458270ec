// GPU tests of the CUDA LongRoPE kernel (src/kernels/rope/long_rope_cuda.*) against a
// double-precision CPU reference. Skipped without CUDA or without a device.
//
// Every launch writes into an output poisoned with NaN bit patterns (0xFF bytes) unless it runs in
// place (y == x). Tolerance: max |y - ref| / (1 + |ref|) <= 1e-5 (fp32), 1e-3 (fp16),
// 1.6e-2 (bf16). Both layouts ([B, S, H, D] and [S, D] as B = H = 1), positions absent / int32 /
// int64, odd S and H, D in {64, 96, 128} (and odd half dims for the scalar path), large positions.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#if TILEOPS_WITH_CUDA
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <sstream>

#include "gpu/kernel_test_util.h"
#include "kernels/rope/long_rope_cuda.h"
#include "tileops/core/dtype.h"
#include "tileops/core/error.h"
#endif

namespace {

#if !TILEOPS_WITH_CUDA

TEST(LongRoPEKernels, RequiresCuda) {
  GTEST_SKIP() << "built without CUDA";
}

#else

using tileops::DType;
using tileops::cuda_kernels::launch_long_rope;
using tileops::cuda_kernels::long_rope_default_config;
using tileops::cuda_kernels::long_rope_tuning_space;
using tileops::cuda_kernels::LongRoPEArgs;
using tileops::cuda_kernels::LongRoPEConfig;

using namespace tileops::kernel_test;  // NOLINT: the shared kernel-test helpers

// ---- one LongRoPE problem ----

struct RoPEProblem {
  DType dtype = DType::float16;
  int64_t batch = 1, seq = 1, heads = 1, half = 64;
  int pos_kind = 0;        // 0: none (position = s), 1: int32, 2: int64
  int64_t max_pos = 4096;  // positions drawn from [0, max_pos]
  bool in_place = false;   // y == x
  int64_t x_offset = 0;    // elements added to the base pointers (unaligned when odd)
  int64_t y_offset = 0;
  float scale = 1.1892071f;  // attention_scaling
  uint64_t seed = 1;

  int64_t tokens() const { return batch * seq; }
  int64_t elems() const { return tokens() * heads * 2 * half; }
  std::string describe() const {
    std::ostringstream os;
    os << dtype_str(dtype) << " [" << batch << ", " << seq << ", " << heads << ", " << 2 * half
       << "] positions "
       << (pos_kind == 0   ? "none"
           : pos_kind == 1 ? "int32"
                           : "int64")
       << " max " << max_pos << (in_place ? " in-place" : "") << " offsets x/y " << x_offset << "/"
       << y_offset << " seed " << seed;
    return os.str();
  }
};

class RoPERunner {
 public:
  explicit RoPERunner(RoPEProblem p) : p_(p) {
    if (p_.in_place) p_.y_offset = p_.x_offset;
  }

  void prepare() {
    Rng rng(p_.seed, 7);  // bias 7: the seeds this test has always used
    const size_t n = static_cast<size_t>(p_.elems());
    x_ = std::make_unique<HostTensor>(p_.dtype, static_cast<size_t>(p_.x_offset) + n + 8);
    fill_random(*x_, rng, -2.0f, 2.0f);
    // inv_freq as the host computes it: 1 / (rescale_i * base^(2i / D)).
    inv_freq_.resize(static_cast<size_t>(p_.half));
    for (int64_t i = 0; i < p_.half; ++i) {
      const double rescale = 1.0 + 3.0 * static_cast<double>(rng.next() >> 11) * 0x1.0p-53;
      inv_freq_[static_cast<size_t>(i)] =
          1.0 / (rescale * std::pow(10000.0, 2.0 * static_cast<double>(i) /
                                                 static_cast<double>(2 * p_.half)));
    }
    positions_.resize(static_cast<size_t>(p_.tokens()));
    for (int64_t t = 0; t < p_.tokens(); ++t)
      positions_[static_cast<size_t>(t)] =
          p_.pos_kind == 0
              ? t % p_.seq
              : static_cast<int64_t>(rng.next() % static_cast<uint64_t>(p_.max_pos + 1));
    if (p_.pos_kind != 0 && p_.tokens() > 0) positions_.back() = p_.max_pos;  // the largest

    dx_ = std::make_unique<DeviceBuffer>(x_->bytes.size());
    ASSERT_NE(dx_->ptr, nullptr);
    dfreq_ = std::make_unique<DeviceBuffer>(inv_freq_.size() * sizeof(double));
    ASSERT_NE(dfreq_->ptr, nullptr);
    CUDA_OK(cudaMemcpy(dfreq_->ptr, inv_freq_.data(), inv_freq_.size() * sizeof(double),
                       cudaMemcpyHostToDevice));
    if (p_.pos_kind != 0) {
      const size_t es = p_.pos_kind == 1 ? 4 : 8;
      dpos_ = std::make_unique<DeviceBuffer>(positions_.size() * es);
      ASSERT_NE(dpos_->ptr, nullptr);
      if (p_.pos_kind == 1) {
        std::vector<int32_t> p32(positions_.begin(), positions_.end());
        CUDA_OK(cudaMemcpy(dpos_->ptr, p32.data(), p32.size() * 4, cudaMemcpyHostToDevice));
      } else {
        CUDA_OK(cudaMemcpy(dpos_->ptr, positions_.data(), positions_.size() * 8,
                           cudaMemcpyHostToDevice));
      }
    }
    if (!p_.in_place) {
      y_elems_ = static_cast<size_t>(p_.y_offset) + n + 8;
      dy_ = std::make_unique<DeviceBuffer>(y_elems_ * tileops::element_size(p_.dtype));
      ASSERT_NE(dy_->ptr, nullptr);
    }
    // Reference in double: exact angle, cos/sin in double.
    ref_.resize(n);
    const int64_t dim = 2 * p_.half;
    for (int64_t t = 0; t < p_.tokens(); ++t) {
      const double pos = static_cast<double>(positions_[static_cast<size_t>(t)]);
      for (int64_t i = 0; i < p_.half; ++i) {
        const double theta = pos * inv_freq_[static_cast<size_t>(i)];
        const double c = std::cos(theta);
        const double s = std::sin(theta);
        for (int64_t h = 0; h < p_.heads; ++h) {
          const size_t base = static_cast<size_t>((t * p_.heads + h) * dim);
          const double x1 = x_->get(static_cast<size_t>(p_.x_offset) + base + i);
          const double x2 = x_->get(static_cast<size_t>(p_.x_offset) + base + i + p_.half);
          ref_[base + i] = static_cast<float>((x1 * c - x2 * s) * p_.scale);
          ref_[base + i + p_.half] = static_cast<float>((x2 * c + x1 * s) * p_.scale);
        }
      }
    }
  }

  void run_and_check(const std::optional<LongRoPEConfig>& config) {
    const size_t es = tileops::element_size(p_.dtype);
    CUDA_OK(cudaMemcpy(dx_->ptr, x_->bytes.data(), x_->bytes.size(), cudaMemcpyHostToDevice));
    if (!p_.in_place) CUDA_OK(cudaMemset(dy_->ptr, 0xFF, dy_->bytes));  // NaN poison
    LongRoPEArgs a;
    a.x = dx_->at(static_cast<size_t>(p_.x_offset) * es);
    a.y = p_.in_place ? dx_->at(static_cast<size_t>(p_.x_offset) * es)
                      : dy_->at(static_cast<size_t>(p_.y_offset) * es);
    a.positions = p_.pos_kind == 0 ? nullptr : dpos_->ptr;
    a.positions_dtype = p_.pos_kind == 1 ? DType::int32 : DType::int64;
    a.inv_freq = static_cast<const double*>(dfreq_->ptr);
    a.batch = p_.batch;
    a.seq = p_.seq;
    a.heads = p_.heads;
    a.half_dim = p_.half;
    a.attention_scaling = p_.scale;
    a.dtype = p_.dtype;
    const LongRoPEConfig cfg =
        config ? *config
               : long_rope_default_config(p_.batch, p_.seq, p_.heads, p_.half, p_.dtype, 0);
    const std::string where = p_.describe() + " config {" + cfg.str() + "}";
    try {
      launch_long_rope(a, cfg, nullptr);
    } catch (const std::exception& e) {
      FAIL() << where << ": launch threw: " << e.what();
    }
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaGetLastError());

    HostTensor y(p_.dtype, p_.in_place ? x_->size() : y_elems_);
    CUDA_OK(cudaMemcpy(y.bytes.data(), p_.in_place ? dx_->ptr : dy_->ptr, y.bytes.size(),
                       cudaMemcpyDeviceToHost));
    const size_t n = static_cast<size_t>(p_.elems());
    const size_t yo = static_cast<size_t>(p_.y_offset);
    int64_t bad = 0;
    double max_err = 0.0;
    std::string first_bad;
    for (size_t k = 0; k < n; ++k) {
      const double got = y.get(yo + k);
      const double ref = ref_[k];
      const double err = std::fabs(got - ref) / (1.0 + std::fabs(ref));
      if (!(err <= tolerance(p_.dtype)) && bad++ == 0) {
        std::ostringstream os;
        os << "y[" << k << "] = " << got << ", reference " << ref;
        first_bad = os.str();
      }
      if (std::isnan(err) || err > max_err) max_err = std::isnan(err) ? INFINITY : err;
    }
    EXPECT_EQ(bad, 0) << where << ": " << bad << " wrong elements, max err " << max_err
                      << ", first " << first_bad;
    int64_t touched = 0;
    for (size_t k = 0; k < y.size(); ++k) {
      if (k >= yo && k < yo + n) continue;
      const uint32_t expect = p_.in_place ? x_->bits(k) : (es == 4 ? 0xFFFFFFFFu : 0xFFFFu);
      if (y.bits(k) != expect) ++touched;
    }
    EXPECT_EQ(touched, 0) << where << ": " << touched << " elements outside the tensor written";
    if (!p_.in_place) {
      HostTensor x(p_.dtype, x_->size());
      CUDA_OK(cudaMemcpy(x.bytes.data(), dx_->ptr, x.bytes.size(), cudaMemcpyDeviceToHost));
      EXPECT_TRUE(x.bytes == x_->bytes) << where << ": x was modified";
    }
  }

 private:
  RoPEProblem p_;
  std::unique_ptr<HostTensor> x_;
  std::vector<double> inv_freq_;
  std::vector<int64_t> positions_;
  std::unique_ptr<DeviceBuffer> dx_, dy_, dfreq_, dpos_;
  size_t y_elems_ = 0;
  std::vector<float> ref_;  // double-precision reference, stored as float
};

void check_problem(const RoPEProblem& p,
                   const std::vector<std::optional<LongRoPEConfig> >& configs = {std::nullopt}) {
  RoPERunner runner(p);
  ASSERT_NO_FATAL_FAILURE(runner.prepare()) << p.describe();
  for (const auto& c : configs) ASSERT_NO_FATAL_FAILURE(runner.run_and_check(c)) << p.describe();
}

const std::vector<DType> kDtypes = {DType::float32, DType::float16, DType::bfloat16};

struct Bsh {
  int64_t batch, seq, heads;
};

// Both layouts ([S, D] is B = H = 1), odd S and H, D in {64, 96, 128}, every kind of positions,
// out of place and in place, default configuration.
TEST(LongRoPEKernels, ShapesDefaultConfig) {
  SKIP_WITHOUT_GPU();
  const Bsh shapes[] = {{1, 1, 1}, {1, 7, 1}, {1, 129, 1}, {2, 5, 3}, {1, 33, 8}, {3, 17, 32}};
  uint64_t seed = 10;
  for (const DType dtype : kDtypes)
    for (const int64_t dim : {int64_t{64}, int64_t{96}, int64_t{128}})
      for (const Bsh& s : shapes)
        for (const int pos_kind : {0, 1, 2})
          for (const bool in_place : {false, true}) {
            RoPEProblem p;
            p.dtype = dtype;
            p.batch = s.batch;
            p.seq = s.seq;
            p.heads = s.heads;
            p.half = dim / 2;
            p.pos_kind = pos_kind;
            p.in_place = in_place;
            p.seed = ++seed;
            ASSERT_NO_FATAL_FAILURE(check_problem(p));
          }
}

// Positions up to 131072 (angles of ~1e5 radians: the double-precision range reduction).
TEST(LongRoPEKernels, LargePositions) {
  SKIP_WITHOUT_GPU();
  uint64_t seed = 300;
  for (const DType dtype : kDtypes)
    for (const int pos_kind : {1, 2})
      for (const int64_t max_pos : {int64_t{65535}, int64_t{131072}}) {
        RoPEProblem p;
        p.dtype = dtype;
        p.batch = 4;
        p.seq = 65;
        p.heads = 5;
        p.half = 64;
        p.pos_kind = pos_kind;
        p.max_pos = max_pos;
        p.seed = ++seed;
        ASSERT_NO_FATAL_FAILURE(check_problem(p));
      }
  // Without positions, s itself up to 131071.
  RoPEProblem p;
  p.dtype = DType::float32;
  p.batch = 1;
  p.seq = 131072;
  p.heads = 1;
  p.half = 32;
  p.seed = ++seed;
  ASSERT_NO_FATAL_FAILURE(check_problem(p));
}

// The scalar path: pointers offset by one element, and half dims that are not a multiple of the
// vector width.
TEST(LongRoPEKernels, ScalarPath) {
  SKIP_WITHOUT_GPU();
  uint64_t seed = 400;
  for (const DType dtype : kDtypes) {
    for (const int which : {0, 1, 2}) {
      for (const bool in_place : {false, true}) {
        if (in_place && which == 1) continue;
        RoPEProblem p;
        p.dtype = dtype;
        p.batch = 2;
        p.seq = 9;
        p.heads = 3;
        p.half = 64;
        p.pos_kind = 2;
        p.in_place = in_place;
        p.x_offset = which == 0 || which == 2 ? 1 : 0;
        p.y_offset = which == 1 || which == 2 ? 1 : 0;
        p.seed = ++seed;
        ASSERT_NO_FATAL_FAILURE(check_problem(p));
      }
    }
    for (const int64_t half : {int64_t{1}, int64_t{3}, int64_t{10}, int64_t{36}, int64_t{60}}) {
      RoPEProblem p;
      p.dtype = dtype;
      p.batch = 1;
      p.seq = 11;
      p.heads = 7;
      p.half = half;
      p.pos_kind = 1;
      p.seed = ++seed;
      ASSERT_NO_FATAL_FAILURE(check_problem(p));
    }
  }
}

// The benchmark shapes: prefill fp16 [1, 8192, 32, 128] and decode bf16 [32, 1, 32, 128].
TEST(LongRoPEKernels, BenchmarkShapes) {
  SKIP_WITHOUT_GPU();
  RoPEProblem prefill;
  prefill.dtype = DType::float16;
  prefill.batch = 1;
  prefill.seq = 8192;
  prefill.heads = 32;
  prefill.half = 64;
  prefill.seed = 501;
  ASSERT_NO_FATAL_FAILURE(check_problem(prefill));
  prefill.pos_kind = 2;
  prefill.max_pos = 131072;
  prefill.in_place = true;
  ASSERT_NO_FATAL_FAILURE(check_problem(prefill));
  RoPEProblem decode;
  decode.dtype = DType::bfloat16;
  decode.batch = 32;
  decode.seq = 1;
  decode.heads = 32;
  decode.half = 64;
  decode.pos_kind = 2;
  decode.max_pos = 100000;
  decode.seed = 502;
  ASSERT_NO_FATAL_FAILURE(check_problem(decode));
}

// Every configuration of the tuning space, each again with one block per multiprocessor (many
// groups per block), plus the scalar path.
TEST(LongRoPEKernels, EveryTuningConfig) {
  SKIP_WITHOUT_GPU();
  struct Shape {
    int64_t batch, seq, heads, half;
  };
  const Shape shapes[] = {
      {1, 300, 8, 64}, {2, 33, 3, 48}, {32, 1, 32, 64}, {1, 1000, 1, 32}, {3, 7, 5, 10}};
  uint64_t seed = 600;
  for (const DType dtype : kDtypes)
    for (const Shape& s : shapes) {
      const auto space = long_rope_tuning_space(s.batch, s.seq, s.heads, s.half, dtype, 0);
      ASSERT_FALSE(space.empty());
      EXPECT_EQ(space.front(), long_rope_default_config(s.batch, s.seq, s.heads, s.half, dtype, 0));
      std::vector<std::optional<LongRoPEConfig> > configs;
      for (LongRoPEConfig c : space) {
        configs.emplace_back(c);
        c.blocks_per_sm = 1;
        configs.emplace_back(c);
      }
      LongRoPEConfig scalar = space.front();
      scalar.vec_bytes = static_cast<int>(tileops::element_size(dtype));
      configs.emplace_back(scalar);
      RoPEProblem p;
      p.dtype = dtype;
      p.batch = s.batch;
      p.seq = s.seq;
      p.heads = s.heads;
      p.half = s.half;
      p.pos_kind = 1;
      p.in_place = (seed & 1) != 0;
      p.seed = ++seed;
      ASSERT_NO_FATAL_FAILURE(check_problem(p, configs));
    }
}

// Empty tensors launch nothing; bad configurations and positions dtypes raise SignatureError.
TEST(LongRoPEKernels, EmptyAndInvalid) {
  SKIP_WITHOUT_GPU();
  DeviceBuffer buf(1 << 20);
  ASSERT_NE(buf.ptr, nullptr);
  CUDA_OK(cudaMemset(buf.ptr, 0xFF, buf.bytes));
  LongRoPEArgs a;
  a.x = buf.at(0);
  a.y = buf.at(0);
  a.inv_freq = buf.at<double>(1 << 19);
  a.batch = 0;
  a.seq = 16;
  a.heads = 2;
  a.half_dim = 32;
  a.dtype = DType::bfloat16;
  const LongRoPEConfig def = long_rope_default_config(1, 16, 2, 32, DType::bfloat16, 0);
  EXPECT_NO_THROW(launch_long_rope(a, def, nullptr));
  a.batch = 1;
  a.heads = 0;
  EXPECT_NO_THROW(launch_long_rope(a, def, nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  a.heads = 2;
  LongRoPEConfig bad = def;
  bad.threads = 100;
  EXPECT_THROW(launch_long_rope(a, bad, nullptr), tileops::SignatureError);
  bad = def;
  bad.items_per_thread = 3;
  EXPECT_THROW(launch_long_rope(a, bad, nullptr), tileops::SignatureError);
  bad = def;
  bad.tokens_per_block = 0;
  EXPECT_THROW(launch_long_rope(a, bad, nullptr), tileops::SignatureError);
  bad = def;
  bad.tokens_per_block = 64;  // 2 x 64 x 4096 x 8 bytes of table: too much shared memory
  a.half_dim = 4096;
  EXPECT_THROW(launch_long_rope(a, bad, nullptr), tileops::SignatureError);
  a.half_dim = 32;
  a.positions = buf.at(1 << 18);
  a.positions_dtype = DType::float32;
  EXPECT_THROW(launch_long_rope(a, def, nullptr), tileops::SignatureError);
  a.positions = nullptr;
  a.dtype = DType::int8;
  EXPECT_THROW(launch_long_rope(a, def, nullptr), tileops::SignatureError);
  std::vector<unsigned char> host(buf.bytes);
  CUDA_OK(cudaMemcpy(host.data(), buf.ptr, buf.bytes, cudaMemcpyDeviceToHost));
  EXPECT_TRUE(std::all_of(host.begin(), host.end(), [](unsigned char b) { return b == 0xFF; }));
}

#endif  // TILEOPS_WITH_CUDA

}  // namespace
