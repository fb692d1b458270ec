// Internal to the GPU tests of the CUDA grouped GEMM (test_moe_grouped_gemm_*.cpp): the problem
// cases, a runner that makes a case's inputs once and runs any configuration, the variants'
// configurations, and the check against a double-precision CPU reference.
//
// Every launch writes into outputs poisoned with 0xFF bytes (NaN for the floating types, -1 for
// int32). Inputs are random and never zero.
// - Grouped GEMM: double-precision reference from the rounded inputs; an element passes when
//   |got - ref| <= tol (1 + |ref|) + 2^-18 (sum_k |a_k b_k|) (the second term bounds the fp32
//   accumulation, which grows with K; gated: propagated through the activation), tol = 1.6e-2
//   (bf16), 2e-3 (fp16). Rows no expert covers must be exactly +0.
#pragma once

#if TILEOPS_WITH_CUDA
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "gpu/kernel_test_util.h"
#include "kernels/moe/grouped_gemm_cuda.h"
#include "tileops/core/dtype.h"
#include "tileops/core/error.h"

namespace tileops::grouped_gemm_test {

using tileops::DType;
namespace ck = tileops::cuda_kernels;
using ck::GroupedGemmArgs;
using ck::GroupedGemmConfig;
using ck::GroupedGemmVariant;
using tileops::MoEActivation;

using namespace tileops::kernel_test;  // NOLINT: the shared kernel-test helpers

inline const char* act_str(MoEActivation a) {
  return a == MoEActivation::none ? "none" : a == MoEActivation::silu_and_mul ? "silu" : "gelu";
}

// Runs fn(i) for i in [0, n) on all cores.
inline void parallel_for(int64_t n, const std::function<void(int64_t)>& fn) {
  const int64_t workers =
      std::max<int64_t>(1, std::min<int64_t>(n, std::thread::hardware_concurrency()));
  std::vector<std::thread> threads;
  for (int64_t w = 0; w < workers; ++w)
    threads.emplace_back([&, w] {
      for (int64_t i = w; i < n; i += workers) fn(i);
    });
  for (auto& t : threads) t.join();
}

// =============================================================================================
// Grouped GEMM

struct GemmCase {
  std::string name;
  int64_t M = 0, N = 0, K = 0;
  std::vector<int32_t> offsets;  // E + 1 entries, as passed to the kernel (may be untidy)
  int64_t a_offset = 0;          // elements added to a's base pointer (misaligned when odd)
  int64_t row_sample = 1;        // check every row_sample-th row (and each expert's first/last)
  uint64_t seed = 1;
};

// The offsets made safe as the kernels document: clamped to [0, M], then a running maximum.
inline std::vector<int64_t> tidy_offsets(const std::vector<int32_t>& off, int64_t M) {
  std::vector<int64_t> o(off.size());
  int64_t run = 0;
  for (size_t i = 0; i < off.size(); ++i) {
    const int64_t c = std::min<int64_t>(std::max<int64_t>(off[i], 0), M);
    run = std::max(run, c);
    o[i] = run;
  }
  return o;
}

inline std::vector<int32_t> uniform_offsets(int64_t E, int64_t rows_per_expert) {
  std::vector<int32_t> off(static_cast<size_t>(E + 1));
  for (int64_t e = 0; e <= E; ++e)
    off[static_cast<size_t>(e)] = static_cast<int32_t>(e * rows_per_expert);
  return off;
}

inline std::vector<int32_t> random_offsets(int64_t E, int64_t M, Rng& rng) {
  std::vector<int32_t> cuts(static_cast<size_t>(E - 1));
  for (auto& c : cuts) c = static_cast<int32_t>(rng.below(M + 1));
  std::sort(cuts.begin(), cuts.end());
  std::vector<int32_t> off;
  off.push_back(0);
  off.insert(off.end(), cuts.begin(), cuts.end());
  off.push_back(static_cast<int32_t>(M));
  return off;
}

inline double silu_d(double g) {
  return g / (1.0 + std::exp(-g));
}
inline double gelu_tanh_d(double g) {
  const double k0 = std::sqrt(2.0 / 3.14159265358979323846);
  return 0.5 * g * (1.0 + std::tanh(k0 * (g + 0.044715 * g * g * g)));
}

class GemmRunner {
 public:
  GemmRunner(GemmCase c, DType dtype) : c_(std::move(c)), dtype_(dtype) {}

  std::string describe(MoEActivation act) const {
    std::ostringstream os;
    os << c_.name << " " << dtype_str(dtype_) << " " << act_str(act) << " M " << c_.M << " N "
       << c_.N << " K " << c_.K << " E " << num_experts() << " a_offset " << c_.a_offset << " seed "
       << c_.seed;
    return os.str();
  }

  int64_t num_experts() const { return static_cast<int64_t>(c_.offsets.size()) - 1; }

  void prepare() {
    const int64_t E = num_experts();
    Rng rng(c_.seed);
    a_ = std::make_unique<HostTensor>(dtype_, static_cast<size_t>(c_.M * c_.K + c_.a_offset));
    fill_random(*a_, rng, -1.0f, 1.0f);
    b_ = std::make_unique<HostTensor>(dtype_, static_cast<size_t>(E * c_.N * c_.K));
    fill_random(*b_, rng, -1.0f, 1.0f);
    da_ = std::make_unique<DeviceBuffer>(a_->bytes.size());
    db_ = std::make_unique<DeviceBuffer>(b_->bytes.size());
    doff_ = std::make_unique<DeviceBuffer>(c_.offsets.size() * 4);
    dc_ = std::make_unique<DeviceBuffer>(static_cast<size_t>(c_.M * c_.N) * 2);
    ASSERT_NE(da_->ptr, nullptr);
    ASSERT_NE(db_->ptr, nullptr);
    ASSERT_NE(doff_->ptr, nullptr);
    ASSERT_NE(dc_->ptr, nullptr);
    CUDA_OK(cudaMemcpy(da_->ptr, a_->bytes.data(), a_->bytes.size(), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(db_->ptr, b_->bytes.data(), b_->bytes.size(), cudaMemcpyHostToDevice));
    CUDA_OK(
        cudaMemcpy(doff_->ptr, c_.offsets.data(), c_.offsets.size() * 4, cudaMemcpyHostToDevice));
    tidy_ = tidy_offsets(c_.offsets, c_.M);
    // Reference accumulators (double) and sums of |a b| for the checked rows, all N columns.
    row_expert_.assign(static_cast<size_t>(c_.M), -1);
    for (int64_t e = 0; e < E; ++e)
      for (int64_t r = tidy_[static_cast<size_t>(e)]; r < tidy_[static_cast<size_t>(e + 1)]; ++r)
        row_expert_[static_cast<size_t>(r)] = e;
    checked_.assign(static_cast<size_t>(c_.M), false);
    for (int64_t r = 0; r < c_.M; ++r) {
      const int64_t e = row_expert_[static_cast<size_t>(r)];
      bool check = r % c_.row_sample == 0 || e < 0;
      if (e >= 0 &&
          (r == tidy_[static_cast<size_t>(e)] || r + 1 == tidy_[static_cast<size_t>(e + 1)]))
        check = true;
      checked_[static_cast<size_t>(r)] = check;
    }
    acc_.assign(static_cast<size_t>(c_.M * c_.N), 0.0);
    abs_.assign(static_cast<size_t>(c_.M * c_.N), 0.0);
    // Inputs as floats (exact; converted once), products and sums in double.
    std::vector<float> a(static_cast<size_t>(c_.M * c_.K));
    for (size_t i = 0; i < a.size(); ++i) a[i] = a_->get(i + static_cast<size_t>(c_.a_offset));
    std::vector<float> b(b_->size());
    for (size_t i = 0; i < b.size(); ++i) b[i] = b_->get(i);
    parallel_for(c_.M, [&](int64_t r) {
      const int64_t e = row_expert_[static_cast<size_t>(r)];
      if (e < 0 || !checked_[static_cast<size_t>(r)]) return;
      const float* ar = &a[static_cast<size_t>(r * c_.K)];
      for (int64_t n = 0; n < c_.N; ++n) {
        const float* br = &b[static_cast<size_t>((e * c_.N + n) * c_.K)];
        double s = 0.0;
        double sa = 0.0;
        for (int64_t k = 0; k < c_.K; ++k) {
          const double p = static_cast<double>(ar[k]) * br[k];
          s += p;
          sa += std::fabs(p);
        }
        acc_[static_cast<size_t>(r * c_.N + n)] = s;
        abs_[static_cast<size_t>(r * c_.N + n)] = sa;
      }
    });
  }

  // Poisons c, launches with `config`, checks every checked row.
  void run_and_check(MoEActivation act, const GroupedGemmConfig& config) {
    const bool is_gated = act != MoEActivation::none;
    const int64_t n_out = is_gated ? c_.N / 2 : c_.N;
    const size_t es = 2;
    CUDA_OK(cudaMemset(dc_->ptr, 0xFF, dc_->bytes));
    GroupedGemmArgs args;
    args.a = da_->at(static_cast<size_t>(c_.a_offset) * es);
    args.expert_offsets = doff_->at<int32_t>(0);
    args.b = db_->ptr;
    args.c = dc_->ptr;
    args.M = c_.M;
    args.N = c_.N;
    args.K = c_.K;
    args.E = num_experts();
    args.activation = act;
    args.dtype = dtype_;
    const std::string where = describe(act) + " config {" + config.str() + "}";
    try {
      ck::launch_grouped_gemm(args, config, nullptr);
    } catch (const std::exception& e) {
      FAIL() << where << ": launch threw: " << e.what();
    }
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaGetLastError());

    HostTensor out(dtype_, static_cast<size_t>(c_.M * n_out));
    CUDA_OK(cudaMemcpy(out.bytes.data(), dc_->ptr, out.bytes.size(), cudaMemcpyDeviceToHost));
    const double tol = dtype_ == DType::float16 ? 2e-3 : 1.6e-2;
    const double acc_eps = std::ldexp(1.0, -18);
    int64_t bad = 0;
    int64_t bad_zero = 0;
    std::string first_bad;
    double max_err = 0.0;
    for (int64_t r = 0; r < c_.M; ++r) {
      if (!checked_[static_cast<size_t>(r)]) continue;
      const bool covered = row_expert_[static_cast<size_t>(r)] >= 0;
      for (int64_t j = 0; j < n_out; ++j) {
        const size_t oi = static_cast<size_t>(r * n_out + j);
        if (!covered) {
          if (out.bits(oi) != 0u && bad_zero++ == 0 && first_bad.empty()) {
            std::ostringstream os;
            os << "uncovered row " << r << " col " << j << " bits " << std::hex << out.bits(oi);
            first_bad = os.str();
          }
          continue;
        }
        double ref;
        double bound;
        if (!is_gated) {
          const size_t i = static_cast<size_t>(r * c_.N + j);
          ref = acc_[i];
          bound = tol * (1.0 + std::fabs(ref)) + acc_eps * abs_[i];
        } else {
          const size_t gi = static_cast<size_t>(r * c_.N + j);
          const size_t ui = static_cast<size_t>(r * c_.N + j + c_.N / 2);
          const double g = acc_[gi];
          const double u = acc_[ui];
          const double fg = act == MoEActivation::silu_and_mul ? silu_d(g) : gelu_tanh_d(g);
          ref = fg * u;
          bound = tol * (1.0 + std::fabs(ref)) + 1.2 * acc_eps * abs_[gi] * std::fabs(u) +
                  acc_eps * abs_[ui] * std::fabs(fg);
        }
        const double got = out.get(oi);
        const double err = std::fabs(got - ref);
        if (!(err <= bound)) {
          if (bad++ == 0) {
            std::ostringstream os;
            os << "c[" << r << ", " << j << "] = " << got << ", reference " << ref << ", bound "
               << bound;
            first_bad = os.str();
          }
        }
        const double rel = err / (1.0 + std::fabs(ref));
        if (std::isnan(rel) || rel > max_err) max_err = std::isnan(rel) ? INFINITY : rel;
      }
    }
    EXPECT_EQ(bad, 0) << where << ": " << bad << " wrong elements, max err/(1+|ref|) " << max_err
                      << ", first " << first_bad;
    EXPECT_EQ(bad_zero, 0) << where << ": " << bad_zero
                           << " elements of uncovered rows not +0, first " << first_bad;
  }

 private:
  GemmCase c_;
  DType dtype_;
  std::unique_ptr<HostTensor> a_, b_;
  std::unique_ptr<DeviceBuffer> da_, db_, doff_, dc_;
  std::vector<int64_t> tidy_;
  std::vector<int64_t> row_expert_;
  std::vector<bool> checked_;
  std::vector<double> acc_, abs_;
};

inline const std::vector<DType> kGemmDtypes = {DType::bfloat16, DType::float16};
inline const std::vector<MoEActivation> kActs = {MoEActivation::none, MoEActivation::silu_and_mul,
                                                 MoEActivation::gelu_and_mul};

inline GroupedGemmConfig simt_config() {
  GroupedGemmConfig c;  // the defaults are the simt configuration
  c.variant = GroupedGemmVariant::simt;
  c.block_m = 64;
  c.block_n = 64;
  c.block_k = 16;
  c.warps_m = 1;
  c.warps_n = 1;
  c.stages = 1;
  return c;
}

// One mma configuration that always exists (used to check the automatic fallbacks).
inline GroupedGemmConfig mma_config() {
  GroupedGemmConfig c;
  c.variant = GroupedGemmVariant::mma;
  c.block_m = 128;
  c.block_n = 256;
  c.block_k = 64;
  c.warps_m = 2;
  c.warps_n = 4;
  c.stages = 3;
  return c;
}

inline GroupedGemmConfig wgmma_config() {
  GroupedGemmConfig c;
  c.variant = GroupedGemmVariant::wgmma;
  c.block_m = 128;
  c.block_n = 256;
  c.block_k = 64;
  c.warps_m = 2;
  c.warps_n = 1;
  c.stages = 4;
  return c;
}

inline GroupedGemmArgs shape_args(const GemmCase& c, DType dtype, MoEActivation act) {
  GroupedGemmArgs a;
  a.M = c.M;
  a.N = c.N;
  a.K = c.K;
  a.E = static_cast<int64_t>(c.offsets.size()) - 1;
  a.activation = act;
  a.dtype = dtype;
  return a;
}

// The default, the first configuration of each variant in the tuning space, and the explicit
// simt / mma / wgmma configurations (the tensor-core ones fall back by themselves where the shape
// or the pointers do not allow them).
inline std::vector<GroupedGemmConfig> variant_configs(const GemmCase& c, DType dtype,
                                                      MoEActivation act) {
  const GroupedGemmArgs a = shape_args(c, dtype, act);
  std::vector<GroupedGemmConfig> out;
  const auto add = [&](const GroupedGemmConfig& g) {
    if (std::find(out.begin(), out.end(), g) == out.end()) out.push_back(g);
  };
  add(ck::grouped_gemm_default_config(a, 0));
  for (const GroupedGemmVariant v :
       {GroupedGemmVariant::wgmma, GroupedGemmVariant::mma, GroupedGemmVariant::simt}) {
    for (const auto& g : ck::grouped_gemm_tuning_space(a, 0)) {
      if (g.variant == v) {
        add(g);
        break;
      }
    }
  }
  add(simt_config());
  add(mma_config());
  add(wgmma_config());
  return out;
}

inline void check_gemm_case(const GemmCase& c, bool all_configs = false) {
  for (const DType dtype : kGemmDtypes) {
    GemmRunner runner(c, dtype);
    ASSERT_NO_FATAL_FAILURE(runner.prepare()) << c.name;
    for (const MoEActivation act : kActs) {
      if (act != MoEActivation::none && c.N % 2 != 0) continue;
      std::vector<GroupedGemmConfig> configs;
      if (all_configs) {
        configs = ck::grouped_gemm_tuning_space(shape_args(c, dtype, act), 0);
        // Each again with one block per multiprocessor: many tiles per persistent block.
        const size_t n = configs.size();
        for (size_t i = 0; i < n; ++i) {
          GroupedGemmConfig one = configs[i];
          one.blocks_per_sm = 1;
          configs.push_back(one);
        }
      } else {
        configs = variant_configs(c, dtype, act);
      }
      for (const auto& cfg : configs)
        ASSERT_NO_FATAL_FAILURE(runner.run_and_check(act, cfg)) << runner.describe(act);
    }
  }
}

inline std::vector<GemmCase> small_gemm_cases() {
  std::vector<GemmCase> cases;
  Rng rng(4242);
  uint64_t seed = 10;
  const auto add = [&](std::string name, int64_t M, int64_t N, int64_t K,
                       std::vector<int32_t> off) {
    GemmCase c;
    c.name = std::move(name);
    c.M = M;
    c.N = N;
    c.K = K;
    c.offsets = std::move(off);
    c.seed = ++seed;
    cases.push_back(c);
  };
  add("empty_and_single_row_experts", 300, 256, 128, {0, 0, 1, 130, 300});
  add("one_expert_all_rows", 257, 192, 72, {0, 257});
  add("uncovered_head_and_tail_rows", 200, 136, 200, {5, 40, 40, 170});
  add("k_not_multiple_of_8", 97, 64, 100, {0, 33, 97});
  add("odd_n", 70, 77, 64, {0, 20, 70});
  add("odd_n_k_tail", 45, 33, 13, {0, 45});
  add("tiny", 1, 2, 8, {0, 1});
  add("k_equals_8", 130, 130, 8, {0, 65, 130});
  add("random_split_8_experts", 1024, 512, 512, random_offsets(8, 1024, rng));
  add("decreasing_and_out_of_range_offsets", 120, 96, 64, {-5, 50, 30, 400, 90});
  add("no_experts", 10, 16, 16, {0});
  add("one_expert_among_empty_ones", 64, 128, 64, {0, 0, 0, 64, 64, 64});
  add("all_rows_in_last_expert", 129, 256, 136, {0, 0, 0, 0, 129});
  add("n_tail_gated", 150, 520, 264, {0, 75, 150});
  add("rows_17_per_expert", 17 * 12, 256, 256, uniform_offsets(12, 17));
  return cases;
}

}  // namespace tileops::grouped_gemm_test

#endif  // TILEOPS_WITH_CUDA
