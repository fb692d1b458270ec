// GPU tests of the CUDA kernels of the MoE family (src/kernels/moe/*): grouped GEMM (simt, mma and
// wgmma variants, plain and with fused silu/gelu gating), pre-permute, post-permute and top-k
// routing, against CPU references written here. Skipped without CUDA or without a device.
//
// Every launch writes into outputs poisoned with 0xFF bytes (NaN for the floating types, -1 for
// int32). Inputs are random and never zero.
// - Grouped GEMM: double-precision reference from the rounded inputs; an element passes when
//   |got - ref| <= tol (1 + |ref|) + 2^-18 (sum_k |a_k b_k|) (the second term bounds the fp32
//   accumulation, which grows with K; gated: propagated through the activation), tol = 1.6e-2
//   (bf16), 2e-3 (fp16). Rows no expert covers must be exactly +0.
// - Pre-permute: offsets, inverse and every byte of permuted exactly.
// - Post-permute: |got - ref| / (1 + |ref|) <= 1e-5 (fp32), 2e-3 (fp16), 1.6e-2 (bf16) against a
//   double reference, and bit-exact against an fp32 emulation of the kernel's arithmetic.
// - Routing: ids exactly (inputs are regenerated where the top k + 1 selection scores come within
//   1e-5 relative of each other without being equal), weights within 1e-5 relative of a double
//   reference.
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
#include <numeric>
#include <sstream>
#include <thread>
#include <tuple>
#include <utility>

#include "gpu/kernel_test_util.h"
#include "kernels/moe/moe_cuda.h"
#include "tileops/core/dtype.h"
#include "tileops/core/error.h"
#endif

namespace {

#if !TILEOPS_WITH_CUDA

TEST(MoEKernels, RequiresCuda) {
  GTEST_SKIP() << "built without CUDA";
}

#else

using tileops::DType;
namespace ck = tileops::cuda_kernels;
using ck::GroupedGemmArgs;
using ck::GroupedGemmConfig;
using ck::GroupedGemmVariant;
using ck::MoEActivation;
using ck::MoEScoring;

using namespace tileops::kernel_test;  // NOLINT: the shared kernel-test helpers

const char* act_str(MoEActivation a) {
  return a == MoEActivation::none ? "none" : a == MoEActivation::silu_and_mul ? "silu" : "gelu";
}

// Runs fn(i) for i in [0, n) on all cores.
void parallel_for(int64_t n, const std::function<void(int64_t)>& fn) {
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
std::vector<int64_t> tidy_offsets(const std::vector<int32_t>& off, int64_t M) {
  std::vector<int64_t> o(off.size());
  int64_t run = 0;
  for (size_t i = 0; i < off.size(); ++i) {
    const int64_t c = std::min<int64_t>(std::max<int64_t>(off[i], 0), M);
    run = std::max(run, c);
    o[i] = run;
  }
  return o;
}

std::vector<int32_t> uniform_offsets(int64_t E, int64_t rows_per_expert) {
  std::vector<int32_t> off(static_cast<size_t>(E + 1));
  for (int64_t e = 0; e <= E; ++e)
    off[static_cast<size_t>(e)] = static_cast<int32_t>(e * rows_per_expert);
  return off;
}

std::vector<int32_t> random_offsets(int64_t E, int64_t M, Rng& rng) {
  std::vector<int32_t> cuts(static_cast<size_t>(E - 1));
  for (auto& c : cuts) c = static_cast<int32_t>(rng.below(M + 1));
  std::sort(cuts.begin(), cuts.end());
  std::vector<int32_t> off;
  off.push_back(0);
  off.insert(off.end(), cuts.begin(), cuts.end());
  off.push_back(static_cast<int32_t>(M));
  return off;
}

double silu_d(double g) {
  return g / (1.0 + std::exp(-g));
}
double gelu_tanh_d(double g) {
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

const std::vector<DType> kGemmDtypes = {DType::bfloat16, DType::float16};
const std::vector<MoEActivation> kActs = {MoEActivation::none, MoEActivation::silu_and_mul,
                                          MoEActivation::gelu_and_mul};

GroupedGemmConfig simt_config() {
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
GroupedGemmConfig mma_config() {
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

GroupedGemmConfig wgmma_config() {
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

GroupedGemmArgs shape_args(const GemmCase& c, DType dtype, MoEActivation act) {
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
std::vector<GroupedGemmConfig> variant_configs(const GemmCase& c, DType dtype, MoEActivation act) {
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

void check_gemm_case(const GemmCase& c, bool all_configs = false) {
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

std::vector<GemmCase> small_gemm_cases() {
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

TEST(MoEGroupedGemm, SmallShapesEveryVariant) {
  SKIP_WITHOUT_GPU();
  for (const GemmCase& c : small_gemm_cases()) ASSERT_NO_FATAL_FAILURE(check_gemm_case(c));
}

// a not 16-byte aligned: the tensor-core configurations fall back to simt by themselves.
TEST(MoEGroupedGemm, MisalignedA) {
  SKIP_WITHOUT_GPU();
  GemmCase c;
  c.name = "misaligned_a";
  c.M = 96;
  c.N = 128;
  c.K = 64;
  c.offsets = {0, 40, 96};
  c.a_offset = 1;
  c.seed = 77;
  ASSERT_NO_FATAL_FAILURE(check_gemm_case(c));
}

// Every configuration of the tuning space (and each with one block per SM) on shapes with tails
// in M, N and K, an empty expert and uncovered rows.
TEST(MoEGroupedGemm, EveryTuningConfig) {
  SKIP_WITHOUT_GPU();
  GemmCase c;
  c.name = "tuning_space";
  c.M = 700;
  c.N = 392;
  c.K = 328;
  c.offsets = {3, 150, 150, 151, 420, 690};
  c.seed = 99;
  ASSERT_NO_FATAL_FAILURE(check_gemm_case(c, true));
  GemmCase d;
  d.name = "tuning_space_decode";
  d.M = 16 * 24;
  d.N = 512;
  d.K = 512;
  d.offsets = uniform_offsets(24, 16);
  d.seed = 100;
  ASSERT_NO_FATAL_FAILURE(check_gemm_case(d, true));
  // Full 128-row tiles in several experts (the tma_store epilogue's path) next to partial ones,
  // N_out % 8 == 0 with and without the gate (N / 2 = 264) and an N tail inside the last chunk.
  GemmCase f;
  f.name = "tuning_space_full_tiles";
  f.M = 640;
  f.N = 528;
  f.K = 192;
  f.offsets = {0, 256, 320, 384, 640};
  f.seed = 101;
  ASSERT_NO_FATAL_FAILURE(check_gemm_case(f, true));
}

// The wgmma configurations with thread-block clusters along M (cluster_m = 2).
std::vector<GroupedGemmConfig> cluster_configs() {
  std::vector<GroupedGemmConfig> out;
  for (const auto& [bm, bn, stages] :
       {std::tuple{128, 256, 4}, std::tuple{128, 128, 6}, std::tuple{64, 256, 5}}) {
    GroupedGemmConfig c = wgmma_config();
    c.block_m = bm;
    c.block_n = bn;
    c.warps_m = bm / 64;
    c.stages = stages;
    c.cluster_m = 2;
    out.push_back(c);
  }
  return out;
}

// Each cluster configuration (and each with one block per multiprocessor: many units per
// cluster), both dtypes, every activation. The two blocks of a cluster take consecutive m-tiles
// of one expert: experts with an odd m-tile count (the second block has no rows), empty experts,
// uncovered rows, tails in N and K, more clusters than units.
TEST(MoEGroupedGemm, ClusterConfigs) {
  SKIP_WITHOUT_GPU();
  std::vector<GroupedGemmConfig> configs = cluster_configs();
  {
    // Where the experts are large enough, the tuning space offers them.
    GemmCase big;
    big.M = 8 * 512;
    big.N = 1024;
    big.K = 1024;
    big.offsets = uniform_offsets(8, 512);
    const auto space =
        ck::grouped_gemm_tuning_space(shape_args(big, DType::bfloat16, MoEActivation::none), 0);
    const bool wgmma = std::any_of(space.begin(), space.end(), [](const GroupedGemmConfig& g) {
      return g.variant == GroupedGemmVariant::wgmma;
    });
    for (const auto& g : configs) {
      EXPECT_EQ(std::find(space.begin(), space.end(), g) != space.end(), wgmma) << g.str();
      EXPECT_NE(g.str().find("cluster_m=2"), std::string::npos) << g.str();
    }
  }
  const size_t n = configs.size();
  for (size_t i = 0; i < n; ++i) {
    GroupedGemmConfig one = configs[i];
    one.blocks_per_sm = 1;
    configs.push_back(one);
  }
  Rng rng(31);
  std::vector<GemmCase> cases;
  const auto add = [&](std::string name, int64_t M, int64_t N, int64_t K,
                       std::vector<int32_t> off) {
    GemmCase c;
    c.name = std::move(name);
    c.M = M;
    c.N = N;
    c.K = K;
    c.offsets = std::move(off);
    c.seed = 300 + cases.size();
    cases.push_back(c);
  };
  // Rows per expert 0, 1, 127, 128, 129, 0, 64, 193, 256, 100 (odd and even m-tile counts for
  // block_m 64 and 128), rows [0, 2) and [1000, 1010) uncovered.
  add("cluster_odd_m_tiles", 1010, 520, 328, {2, 2, 3, 130, 258, 387, 387, 451, 644, 900, 1000});
  add("cluster_full_pairs", 6 * 256, 768, 512, uniform_offsets(6, 256));
  add("cluster_random_split", 2048, 264, 200, random_offsets(9, 2048, rng));
  add("cluster_single_rows", 5, 136, 72, {0, 1, 2, 2, 5});
  for (const GemmCase& c : cases) {
    for (const DType dtype : kGemmDtypes) {
      GemmRunner runner(c, dtype);
      ASSERT_NO_FATAL_FAILURE(runner.prepare()) << c.name;
      for (const MoEActivation act : kActs) {
        if (act != MoEActivation::none && c.N % 2 != 0) continue;
        for (const auto& cfg : configs)
          ASSERT_NO_FATAL_FAILURE(runner.run_and_check(act, cfg)) << runner.describe(act);
      }
    }
  }
}

// Larger shapes, rows sampled: many tiles per block, many experts, realistic K.
TEST(MoEGroupedGemm, LargeShapesSampled) {
  SKIP_WITHOUT_GPU();
  Rng rng(9);
  std::vector<GemmCase> cases;
  {
    GemmCase c;
    c.name = "e64_random_n1024_k2048";
    c.M = 64 * 96;
    c.N = 1024;
    c.K = 2048;
    c.offsets = random_offsets(64, c.M, rng);
    c.row_sample = 13;
    c.seed = 201;
    cases.push_back(c);
  }
  {
    GemmCase c;
    c.name = "e32_uniform256_n768_k1536";
    c.M = 32 * 256;
    c.N = 768;
    c.K = 1536;
    c.offsets = uniform_offsets(32, 256);
    c.row_sample = 17;
    c.seed = 202;
    cases.push_back(c);
  }
  {
    GemmCase c;
    c.name = "e32_uniform16_n512_k7168";
    c.M = 32 * 16;
    c.N = 512;
    c.K = 7168;
    c.offsets = uniform_offsets(32, 16);
    c.row_sample = 7;
    c.seed = 203;
    cases.push_back(c);
  }
  for (const GemmCase& c : cases) ASSERT_NO_FATAL_FAILURE(check_gemm_case(c));
}

TEST(MoEGroupedGemm, InvalidArguments) {
  SKIP_WITHOUT_GPU();
  DeviceBuffer buf(1 << 20);
  ASSERT_NE(buf.ptr, nullptr);
  CUDA_OK(cudaMemset(buf.ptr, 0, buf.bytes));
  GroupedGemmArgs a;
  a.a = buf.at(0);
  a.b = buf.at(0);
  a.c = buf.at(1 << 19);
  a.expert_offsets = buf.at<int32_t>(0);  // zeros: every row uncovered
  a.M = 8;
  a.N = 16;
  a.K = 16;
  a.E = 2;
  a.dtype = DType::bfloat16;
  const GroupedGemmConfig def = ck::grouped_gemm_default_config(a, 0);
  EXPECT_NO_THROW(ck::launch_grouped_gemm(a, def, nullptr));
  CUDA_OK(cudaDeviceSynchronize());

  GroupedGemmArgs bad = a;
  bad.N = 15;
  bad.activation = MoEActivation::silu_and_mul;
  EXPECT_THROW(ck::launch_grouped_gemm(bad, def, nullptr), tileops::SignatureError);
  bad = a;
  bad.dtype = DType::float32;
  EXPECT_THROW(ck::launch_grouped_gemm(bad, def, nullptr), tileops::SignatureError);
  EXPECT_THROW(ck::grouped_gemm_default_config(bad, 0), tileops::SignatureError);
  bad = a;
  bad.c = nullptr;
  EXPECT_THROW(ck::launch_grouped_gemm(bad, def, nullptr), tileops::SignatureError);
  bad = a;
  bad.expert_offsets = nullptr;
  EXPECT_THROW(ck::launch_grouped_gemm(bad, def, nullptr), tileops::SignatureError);
  bad = a;
  bad.a = nullptr;
  EXPECT_THROW(ck::launch_grouped_gemm(bad, def, nullptr), tileops::SignatureError);
  bad = a;
  bad.K = -1;
  EXPECT_THROW(ck::launch_grouped_gemm(bad, def, nullptr), tileops::SignatureError);
  GroupedGemmConfig nokernel = mma_config();
  nokernel.stages = 7;
  EXPECT_THROW(ck::launch_grouped_gemm(a, nokernel, nullptr), tileops::SignatureError);
  nokernel = simt_config();
  nokernel.block_m = 32;
  EXPECT_THROW(ck::launch_grouped_gemm(a, nokernel, nullptr), tileops::SignatureError);
  nokernel = mma_config();
  nokernel.cluster_m = 2;
  EXPECT_THROW(ck::launch_grouped_gemm(a, nokernel, nullptr), tileops::SignatureError);
  nokernel = wgmma_config();
  nokernel.cluster_m = 4;
  EXPECT_THROW(ck::launch_grouped_gemm(a, nokernel, nullptr), tileops::SignatureError);
  // The TMA store epilogue exists for the wgmma kernels without clusters only.
  nokernel = mma_config();
  nokernel.tma_store = true;
  EXPECT_THROW(ck::launch_grouped_gemm(a, nokernel, nullptr), tileops::SignatureError);
  nokernel = wgmma_config();
  nokernel.cluster_m = 2;
  nokernel.tma_store = true;
  EXPECT_THROW(ck::launch_grouped_gemm(a, nokernel, nullptr), tileops::SignatureError);
  // Empty problems launch nothing (null pointers are then fine).
  GroupedGemmArgs empty;
  empty.M = 0;
  empty.N = 16;
  empty.K = 16;
  empty.E = 4;
  EXPECT_NO_THROW(ck::launch_grouped_gemm(empty, def, nullptr));
  empty.M = 4;
  empty.N = 0;
  EXPECT_NO_THROW(ck::launch_grouped_gemm(empty, def, nullptr));
  CUDA_OK(cudaDeviceSynchronize());
}

TEST(MoEGroupedGemm, ConfigFunctions) {
  SKIP_WITHOUT_GPU();
  for (const GemmCase& c : small_gemm_cases()) {
    for (const DType dtype : kGemmDtypes) {
      for (const MoEActivation act : kActs) {
        const GroupedGemmArgs a = shape_args(c, dtype, act);
        const auto space = ck::grouped_gemm_tuning_space(a, 0);
        ASSERT_FALSE(space.empty());
        EXPECT_EQ(space.front(), ck::grouped_gemm_default_config(a, 0));
        const bool has_simt = std::find(space.begin(), space.end(), simt_config()) != space.end();
        EXPECT_EQ(has_simt, c.K % 8 != 0) << c.name;
        for (const auto& g : space) EXPECT_FALSE(g.str().empty());
        if (c.K % 8 != 0) {
          EXPECT_EQ(space.size(), 1u) << c.name;
        }
      }
    }
  }
}

// =============================================================================================
// Pre-permute

struct PermuteCase {
  std::string name;
  DType dtype = DType::bfloat16;
  int64_t T = 1, K = 1, E = 1, H = 1;
  int64_t x_stride = 0;          // 0: H
  int64_t x_offset = 0;          // elements (misaligned when odd)
  int64_t id_lo = 0, id_hi = 1;  // ids uniform in [id_lo, id_hi)
  int64_t map_size = 0;          // > 0: an expert map of this size (local ids and -1)
  uint64_t seed = 1;
};

void check_permute(const PermuteCase& c) {
  const std::string where = c.name + " " + dtype_str(c.dtype) + " T " + std::to_string(c.T) +
                            " K " + std::to_string(c.K) + " E " + std::to_string(c.E) + " H " +
                            std::to_string(c.H);
  const int64_t xs = c.x_stride > 0 ? c.x_stride : c.H;
  const size_t es = tileops::element_size(c.dtype);
  const int64_t P = c.T * c.K;
  Rng rng(c.seed);
  HostTensor x(c.dtype,
               static_cast<size_t>(c.x_offset + std::max<int64_t>(c.T - 1, 0) * xs + c.H + 8));
  fill_random(x, rng, -3.0f, 3.0f);
  std::vector<int32_t> ids(static_cast<size_t>(P));
  for (auto& id : ids) id = static_cast<int32_t>(c.id_lo + rng.below(c.id_hi - c.id_lo));
  std::vector<int32_t> map(static_cast<size_t>(c.map_size));
  for (auto& m : map) m = rng.below(3) == 0 ? -1 : static_cast<int32_t>(rng.below(c.E + 2)) - 1;

  // Reference.
  std::vector<int64_t> local(static_cast<size_t>(P));
  for (int64_t p = 0; p < P; ++p) {
    const int64_t g = ids[static_cast<size_t>(p)];
    int64_t e = g;
    if (c.map_size > 0) e = (g >= 0 && g < c.map_size) ? map[static_cast<size_t>(g)] : -1;
    local[static_cast<size_t>(p)] = (e >= 0 && e < c.E) ? e : -1;
  }
  std::vector<int64_t> order;
  for (int64_t p = 0; p < P; ++p)
    if (local[static_cast<size_t>(p)] >= 0) order.push_back(p);
  std::stable_sort(order.begin(), order.end(), [&](int64_t l, int64_t r) {
    return local[static_cast<size_t>(l)] < local[static_cast<size_t>(r)];
  });
  std::vector<int32_t> ref_off(static_cast<size_t>(c.E + 1), 0);
  for (const int64_t p : order) ++ref_off[static_cast<size_t>(local[static_cast<size_t>(p)] + 1)];
  for (int64_t e = 0; e < c.E; ++e)
    ref_off[static_cast<size_t>(e + 1)] += ref_off[static_cast<size_t>(e)];
  std::vector<int32_t> ref_inv(static_cast<size_t>(P), -1);
  std::vector<unsigned char> ref_perm(static_cast<size_t>(P * c.H) * es, 0);
  for (size_t i = 0; i < order.size(); ++i) {
    const int64_t p = order[i];
    ref_inv[static_cast<size_t>(p)] = static_cast<int32_t>(i);
    const int64_t t = p / c.K;
    std::memcpy(&ref_perm[i * static_cast<size_t>(c.H) * es],
                &x.bytes[static_cast<size_t>(c.x_offset + t * xs) * es],
                static_cast<size_t>(c.H) * es);
  }

  DeviceBuffer dx(x.bytes.size());
  DeviceBuffer dids(ids.size() * 4);
  DeviceBuffer dmap(map.size() * 4);
  DeviceBuffer dperm(static_cast<size_t>(P * c.H) * es);
  DeviceBuffer doff(static_cast<size_t>(c.E + 1) * 4);
  DeviceBuffer dinv(static_cast<size_t>(P) * 4);
  ASSERT_TRUE(dx.ptr && dids.ptr && dmap.ptr && dperm.ptr && doff.ptr && dinv.ptr);
  CUDA_OK(cudaMemcpy(dx.ptr, x.bytes.data(), x.bytes.size(), cudaMemcpyHostToDevice));
  if (P > 0) CUDA_OK(cudaMemcpy(dids.ptr, ids.data(), ids.size() * 4, cudaMemcpyHostToDevice));
  if (!map.empty())
    CUDA_OK(cudaMemcpy(dmap.ptr, map.data(), map.size() * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(dperm.ptr, 0xFF, dperm.bytes));
  CUDA_OK(cudaMemset(doff.ptr, 0xFF, doff.bytes));
  CUDA_OK(cudaMemset(dinv.ptr, 0xFF, dinv.bytes));

  ck::PrePermuteArgs a;
  a.x = dx.at(static_cast<size_t>(c.x_offset) * es);
  a.x_row_stride = xs;
  a.topk_ids = dids.at<int32_t>(0);
  a.expert_map = c.map_size > 0 ? dmap.at<int32_t>(0) : nullptr;
  a.map_size = c.map_size;
  a.permuted = dperm.ptr;
  a.expert_offsets = doff.at<int32_t>(0);
  a.inverse = dinv.at<int32_t>(0);
  a.tokens = c.T;
  a.hidden = c.H;
  a.top_k = c.K;
  a.num_experts = c.E;
  a.dtype = c.dtype;
  try {
    ck::launch_moe_pre_permute(a, nullptr);
  } catch (const std::exception& e) {
    FAIL() << where << ": launch threw: " << e.what();
  }
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaGetLastError());

  std::vector<int32_t> off(ref_off.size());
  std::vector<int32_t> inv(static_cast<size_t>(P));
  std::vector<unsigned char> perm(ref_perm.size());
  CUDA_OK(cudaMemcpy(off.data(), doff.ptr, off.size() * 4, cudaMemcpyDeviceToHost));
  if (P > 0) CUDA_OK(cudaMemcpy(inv.data(), dinv.ptr, inv.size() * 4, cudaMemcpyDeviceToHost));
  if (!perm.empty())
    CUDA_OK(cudaMemcpy(perm.data(), dperm.ptr, perm.size(), cudaMemcpyDeviceToHost));
  EXPECT_EQ(off, ref_off) << where << ": offsets";
  EXPECT_EQ(inv, ref_inv) << where << ": inverse";
  if (perm != ref_perm) {
    size_t first = 0;
    while (first < perm.size() && perm[first] == ref_perm[first]) ++first;
    ADD_FAILURE() << where << ": permuted differs, first at byte " << first << " (row "
                  << first / std::max<size_t>(1, static_cast<size_t>(c.H) * es) << ")";
  }
}

TEST(MoEPrePermute, Cases) {
  SKIP_WITHOUT_GPU();
  std::vector<PermuteCase> cases;
  uint64_t seed = 300;
  const auto add = [&](PermuteCase c) {
    c.seed = ++seed;
    cases.push_back(c);
  };
  for (const DType dtype : {DType::bfloat16, DType::float16, DType::float32}) {
    add({"basic", dtype, 37, 4, 8, 128, 0, 0, 0, 8, 0});
    add({"dropped_ids_odd_hidden_strided", dtype, 53, 3, 6, 77, 91, 0, -2, 9, 0});
    add({"expert_map", dtype, 40, 6, 4, 64, 0, 0, -2, 20, 16});
    add({"misaligned_x", dtype, 19, 2, 5, 96, 101, 1, 0, 5, 0});
    add({"top_k_1", dtype, 100, 1, 3, 8, 0, 0, 0, 3, 0});
  }
  add({"deepseek_like", DType::bfloat16, 4096, 8, 256, 2048, 0, 0, 0, 256, 0});
  add({"e512", DType::bfloat16, 4096, 8, 512, 256, 0, 0, 0, 512, 0});
  add({"e1000", DType::float16, 300, 6, 1000, 40, 0, 0, -5, 1010, 0});
  add({"e20000_optin_smem", DType::bfloat16, 100, 3, 20000, 16, 0, 0, 0, 20000, 0});
  add({"expert_parallel_map", DType::bfloat16, 512, 8, 32, 512, 0, 0, 0, 256, 256});
  add({"no_tokens", DType::bfloat16, 0, 8, 16, 64, 0, 0, 0, 16, 0});
  add({"no_experts", DType::bfloat16, 9, 2, 0, 32, 0, 0, 0, 4, 0});
  add({"hidden_0", DType::bfloat16, 9, 2, 4, 0, 0, 0, 0, 4, 0});
  for (const PermuteCase& c : cases) ASSERT_NO_FATAL_FAILURE(check_permute(c));
}

// Ids all equal, or all distinct: the stable order by pair index.
TEST(MoEPrePermute, Extremes) {
  SKIP_WITHOUT_GPU();
  ASSERT_NO_FATAL_FAILURE(
      check_permute({"all_one_expert", DType::bfloat16, 1000, 2, 7, 64, 0, 0, 3, 4, 0, 1}));
  ASSERT_NO_FATAL_FAILURE(
      check_permute({"all_dropped", DType::bfloat16, 50, 2, 7, 64, 0, 0, 7, 100, 0, 2}));
}

TEST(MoEPrePermute, InvalidArguments) {
  SKIP_WITHOUT_GPU();
  DeviceBuffer buf(1 << 16);
  ASSERT_NE(buf.ptr, nullptr);
  ck::PrePermuteArgs a;
  a.x = buf.at(0);
  a.x_row_stride = 16;
  a.topk_ids = buf.at<int32_t>(0);
  a.permuted = buf.at(0);
  a.expert_offsets = buf.at<int32_t>(0);
  a.inverse = buf.at<int32_t>(0);
  a.tokens = 2;
  a.hidden = 16;
  a.top_k = 2;
  a.num_experts = 4;
  ck::PrePermuteArgs bad = a;
  bad.dtype = DType::int32;
  EXPECT_THROW(ck::launch_moe_pre_permute(bad, nullptr), tileops::SignatureError);
  bad = a;
  bad.expert_offsets = nullptr;
  EXPECT_THROW(ck::launch_moe_pre_permute(bad, nullptr), tileops::SignatureError);
  bad = a;
  bad.topk_ids = nullptr;
  EXPECT_THROW(ck::launch_moe_pre_permute(bad, nullptr), tileops::SignatureError);
  bad = a;
  bad.top_k = -1;
  EXPECT_THROW(ck::launch_moe_pre_permute(bad, nullptr), tileops::SignatureError);
}

// =============================================================================================
// Post-permute

struct CombineCase {
  std::string name;
  DType dtype = DType::bfloat16;
  int64_t T = 1, K = 1, H = 1, R = 1;
  int64_t out_offset = 0;  // elements (misaligned when odd: scalar path)
  float scale = 1.0f;
  uint64_t seed = 1;
};

void check_combine(const CombineCase& c) {
  const std::string where = c.name + " " + dtype_str(c.dtype) + " T " + std::to_string(c.T) +
                            " K " + std::to_string(c.K) + " H " + std::to_string(c.H) + " R " +
                            std::to_string(c.R);
  const size_t es = tileops::element_size(c.dtype);
  Rng rng(c.seed);
  HostTensor eo(c.dtype, static_cast<size_t>(c.R * c.H));
  fill_random(eo, rng, -2.0f, 2.0f);
  std::vector<float> w(static_cast<size_t>(c.T * c.K));
  for (auto& v : w) v = rng.uniform(0.01f, 1.0f);
  std::vector<int32_t> inv(static_cast<size_t>(c.T * c.K));
  for (auto& v : inv) {
    const int64_t u = rng.below(10);
    v = u == 0   ? -1
        : u == 1 ? static_cast<int32_t>(c.R + rng.below(3))
                 : static_cast<int32_t>(rng.below(c.R));
  }
  // References: double, and the kernel's fp32 arithmetic (products and sums rounded each).
  HostTensor exact(c.dtype, static_cast<size_t>(c.T * c.H));
  std::vector<double> ref(static_cast<size_t>(c.T * c.H));
  for (int64_t t = 0; t < c.T; ++t)
    for (int64_t h = 0; h < c.H; ++h) {
      double s = 0.0;
      float f = 0.0f;
      for (int64_t k = 0; k < c.K; ++k) {
        const int32_t r = inv[static_cast<size_t>(t * c.K + k)];
        if (r < 0 || r >= c.R) continue;
        const float x = eo.get(static_cast<size_t>(r * c.H + h));
        const float wk = w[static_cast<size_t>(t * c.K + k)];
        s += static_cast<double>(wk) * x;
        const float prod = wk * x;
        f = f + prod;
      }
      ref[static_cast<size_t>(t * c.H + h)] = static_cast<double>(c.scale) * s;
      const float scaled = c.scale * f;
      exact.set(static_cast<size_t>(t * c.H + h), scaled);
    }

  DeviceBuffer deo(eo.bytes.size());
  DeviceBuffer dw(w.size() * 4);
  DeviceBuffer dinv(inv.size() * 4);
  const size_t out_elems = static_cast<size_t>(c.out_offset + c.T * c.H + 8);
  DeviceBuffer dout(out_elems * es);
  ASSERT_TRUE(deo.ptr && dw.ptr && dinv.ptr && dout.ptr);
  CUDA_OK(cudaMemcpy(deo.ptr, eo.bytes.data(), eo.bytes.size(), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dw.ptr, w.data(), w.size() * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dinv.ptr, inv.data(), inv.size() * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(dout.ptr, 0xFF, dout.bytes));
  ck::PostPermuteArgs a;
  a.expert_out = deo.ptr;
  a.rows = c.R;
  a.topk_weights = dw.at<float>(0);
  a.inverse = dinv.at<int32_t>(0);
  a.out = dout.at(static_cast<size_t>(c.out_offset) * es);
  a.tokens = c.T;
  a.hidden = c.H;
  a.top_k = c.K;
  a.scale = c.scale;
  a.dtype = c.dtype;
  try {
    ck::launch_moe_post_permute(a, nullptr);
  } catch (const std::exception& e) {
    FAIL() << where << ": launch threw: " << e.what();
  }
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaGetLastError());
  HostTensor out(c.dtype, out_elems);
  CUDA_OK(cudaMemcpy(out.bytes.data(), dout.ptr, out.bytes.size(), cudaMemcpyDeviceToHost));
  const double tol = c.dtype == DType::float32 ? 1e-5 : c.dtype == DType::float16 ? 2e-3 : 1.6e-2;
  int64_t bad = 0;
  int64_t inexact = 0;
  int64_t touched = 0;
  std::string first;
  for (size_t i = 0; i < out_elems; ++i) {
    const bool inside =
        i >= static_cast<size_t>(c.out_offset) && i < static_cast<size_t>(c.out_offset + c.T * c.H);
    if (!inside) {
      if (out.bits(i) != (es == 4 ? 0xFFFFFFFFu : 0xFFFFu)) ++touched;
      continue;
    }
    const size_t j = i - static_cast<size_t>(c.out_offset);
    const double got = out.get(i);
    const double err = std::fabs(got - ref[j]) / (1.0 + std::fabs(ref[j]));
    if (!(err <= tol) && bad++ == 0) {
      std::ostringstream os;
      os << "out[" << j << "] = " << got << ", reference " << ref[j];
      first = os.str();
    }
    if (out.bits(i) != exact.bits(j)) ++inexact;
  }
  EXPECT_EQ(bad, 0) << where << ": " << bad << " wrong elements, first " << first;
  EXPECT_EQ(inexact, 0) << where << ": " << inexact
                        << " elements differ from the fp32 emulation of the kernel";
  EXPECT_EQ(touched, 0) << where << ": written outside out";
}

TEST(MoEPostPermute, Cases) {
  SKIP_WITHOUT_GPU();
  uint64_t seed = 500;
  for (const DType dtype : {DType::bfloat16, DType::float16, DType::float32}) {
    for (const CombineCase& base : std::vector<CombineCase>{
             {"basic", dtype, 37, 8, 256, 37 * 8, 0, 1.0f, 0},
             {"scaled_k9", dtype, 20, 9, 128, 150, 0, 2.5f, 0},
             {"odd_hidden", dtype, 13, 3, 77, 40, 0, 0.7f, 0},
             {"misaligned_out", dtype, 11, 2, 64, 22, 1, 1.0f, 0},
             {"one_token", dtype, 1, 8, 7168, 8, 0, 1.0f, 0},
             {"k1", dtype, 64, 1, 96, 64, 0, 1.0f, 0},
         }) {
      CombineCase c = base;
      c.seed = ++seed;
      ASSERT_NO_FATAL_FAILURE(check_combine(c));
    }
  }
  ASSERT_NO_FATAL_FAILURE(
      check_combine({"deepseek_like", DType::bfloat16, 512, 8, 7168, 4096, 0, 1.0f, 999}));
}

TEST(MoEPostPermute, InvalidArguments) {
  SKIP_WITHOUT_GPU();
  DeviceBuffer buf(1 << 16);
  ASSERT_NE(buf.ptr, nullptr);
  ck::PostPermuteArgs a;
  a.expert_out = buf.at(0);
  a.rows = 4;
  a.topk_weights = buf.at<float>(0);
  a.inverse = buf.at<int32_t>(0);
  a.out = buf.at(4096);
  a.tokens = 2;
  a.hidden = 8;
  a.top_k = 2;
  ck::PostPermuteArgs bad = a;
  bad.dtype = DType::int8;
  EXPECT_THROW(ck::launch_moe_post_permute(bad, nullptr), tileops::SignatureError);
  bad = a;
  bad.out = nullptr;
  EXPECT_THROW(ck::launch_moe_post_permute(bad, nullptr), tileops::SignatureError);
  bad = a;
  bad.inverse = nullptr;
  EXPECT_THROW(ck::launch_moe_post_permute(bad, nullptr), tileops::SignatureError);
}

// =============================================================================================
// Top-k routing

struct RouteCase {
  std::string name;
  DType dtype = DType::float32;
  int64_t T = 1, E = 8, K = 2;
  MoEScoring scoring = MoEScoring::softmax;
  bool bias = false;
  bool renormalize = false;
  float scaling = 1.0f;
  uint64_t seed = 1;
};

struct RouteRef {
  std::vector<int32_t> ids;
  std::vector<double> weights;
  bool ok = true;  // false: a near-tie among the top k + 1 selection scores
};

// Double reference of one token (scores from the rounded logits).
RouteRef route_token(const std::vector<float>& logits, const std::vector<float>& bias,
                     const RouteCase& c) {
  const auto E = static_cast<size_t>(c.E);
  std::vector<double> s(E);
  if (c.scoring == MoEScoring::softmax) {
    double mx = -INFINITY;
    for (const float v : logits) mx = std::max(mx, static_cast<double>(v));
    double sum = 0.0;
    for (size_t e = 0; e < E; ++e) {
      s[e] = std::exp(static_cast<double>(logits[e]) - mx);
      sum += s[e];
    }
    for (double& v : s) v /= sum;
  } else {
    for (size_t e = 0; e < E; ++e) s[e] = 1.0 / (1.0 + std::exp(-static_cast<double>(logits[e])));
  }
  std::vector<double> sel(E);
  for (size_t e = 0; e < E; ++e) sel[e] = s[e] + (c.bias ? bias[e] : 0.0);
  std::vector<int32_t> order(E);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return sel[static_cast<size_t>(a)] > sel[static_cast<size_t>(b)];
  });
  RouteRef r;
  const size_t K = static_cast<size_t>(c.K);
  for (size_t i = 0; i + 1 < std::min(K + 1, E); ++i) {
    const double x = sel[static_cast<size_t>(order[i])];
    const double y = sel[static_cast<size_t>(order[i + 1])];
    if (x != y && x - y < 1e-5 * std::fabs(x)) r.ok = false;
  }
  // Exact ties in the fp32 scores (same logit and bias) are fine: both sides pick the smaller e.
  double sum = 0.0;
  for (size_t k = 0; k < K; ++k) {
    r.ids.push_back(order[k]);
    r.weights.push_back(s[static_cast<size_t>(order[k])]);
    sum += s[static_cast<size_t>(order[k])];
  }
  for (double& w : r.weights) w = (c.renormalize ? w / sum : w) * c.scaling;
  return r;
}

void check_route(const RouteCase& c) {
  const std::string where = c.name + " " + dtype_str(c.dtype) + " T " + std::to_string(c.T) +
                            " E " + std::to_string(c.E) + " K " + std::to_string(c.K) +
                            (c.scoring == MoEScoring::softmax ? " softmax" : " sigmoid") +
                            (c.bias ? " bias" : "") + (c.renormalize ? " renorm" : "");
  Rng rng(c.seed);
  HostTensor logits(c.dtype, static_cast<size_t>(c.T * c.E));
  std::vector<float> bias(static_cast<size_t>(c.E));
  for (auto& b : bias) b = rng.uniform(-0.1f, 0.1f);
  std::vector<int32_t> ref_ids;
  std::vector<double> ref_w;
  std::vector<float> row(static_cast<size_t>(c.E));
  for (int64_t t = 0; t < c.T; ++t) {
    RouteRef r;
    for (int attempt = 0; attempt < 100; ++attempt) {
      for (int64_t e = 0; e < c.E; ++e) {
        const size_t i = static_cast<size_t>(t * c.E + e);
        logits.set(i, rng.uniform(-4.0f, 4.0f));
        row[static_cast<size_t>(e)] = logits.get(i);
      }
      r = route_token(row, bias, c);
      if (r.ok) break;
    }
    ASSERT_TRUE(r.ok) << where << ": could not draw logits without near-ties";
    ref_ids.insert(ref_ids.end(), r.ids.begin(), r.ids.end());
    ref_w.insert(ref_w.end(), r.weights.begin(), r.weights.end());
  }
  DeviceBuffer dl(logits.bytes.size());
  DeviceBuffer db(bias.size() * 4);
  DeviceBuffer dw(static_cast<size_t>(c.T * c.K) * 4);
  DeviceBuffer did(static_cast<size_t>(c.T * c.K) * 4);
  ASSERT_TRUE(dl.ptr && db.ptr && dw.ptr && did.ptr);
  CUDA_OK(cudaMemcpy(dl.ptr, logits.bytes.data(), logits.bytes.size(), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(db.ptr, bias.data(), bias.size() * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(dw.ptr, 0xFF, dw.bytes));
  CUDA_OK(cudaMemset(did.ptr, 0xFF, did.bytes));
  ck::TopKRoutingArgs a;
  a.logits = dl.ptr;
  a.correction_bias = c.bias ? db.at<float>(0) : nullptr;
  a.topk_weights = dw.at<float>(0);
  a.topk_ids = did.at<int32_t>(0);
  a.tokens = c.T;
  a.num_experts = c.E;
  a.top_k = c.K;
  a.scoring = c.scoring;
  a.renormalize = c.renormalize;
  a.routed_scaling_factor = c.scaling;
  a.logits_dtype = c.dtype;
  try {
    ck::launch_moe_topk_routing(a, nullptr);
  } catch (const std::exception& e) {
    FAIL() << where << ": launch threw: " << e.what();
  }
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaGetLastError());
  std::vector<int32_t> ids(static_cast<size_t>(c.T * c.K));
  std::vector<float> w(static_cast<size_t>(c.T * c.K));
  CUDA_OK(cudaMemcpy(ids.data(), did.ptr, ids.size() * 4, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(w.data(), dw.ptr, w.size() * 4, cudaMemcpyDeviceToHost));
  EXPECT_EQ(ids, ref_ids) << where << ": ids";
  int64_t bad = 0;
  std::string first;
  for (size_t i = 0; i < w.size(); ++i) {
    const double err = std::fabs(w[i] - ref_w[i]);
    if (!(err <= 1e-5 * std::fabs(ref_w[i]) + 1e-12) && bad++ == 0) {
      std::ostringstream os;
      os << "weight[" << i << "] = " << w[i] << ", reference " << ref_w[i];
      first = os.str();
    }
  }
  EXPECT_EQ(bad, 0) << where << ": " << bad << " wrong weights, first " << first;
}

TEST(MoETopKRouting, Cases) {
  SKIP_WITHOUT_GPU();
  uint64_t seed = 700;
  for (const DType dtype : {DType::float32, DType::float16, DType::bfloat16})
    for (const MoEScoring scoring : {MoEScoring::softmax, MoEScoring::sigmoid})
      for (const bool bias : {false, true})
        for (const bool renorm : {false, true})
          for (const auto& ek : std::vector<std::pair<int64_t, int64_t> >{
                   {8, 2}, {64, 6}, {256, 8}, {384, 8}, {512, 1}, {33, 33}, {1000, 16}}) {
            RouteCase c;
            c.name = "grid";
            c.dtype = dtype;
            c.T = ek.first >= 512 ? 17 : 37;
            c.E = ek.first;
            c.K = ek.second;
            c.scoring = scoring;
            c.bias = bias;
            c.renormalize = renorm;
            c.scaling = renorm ? 2.5f : 1.0f;
            c.seed = ++seed;
            ASSERT_NO_FATAL_FAILURE(check_route(c));
          }
}

TEST(MoETopKRouting, LargeAndSpecial) {
  SKIP_WITHOUT_GPU();
  // DeepSeek-V3-like (sigmoid, bias, renormalize, scaling) and Qwen3-like (softmax, renormalize).
  ASSERT_NO_FATAL_FAILURE(check_route(
      {"deepseek", DType::float32, 4096, 256, 8, MoEScoring::sigmoid, true, true, 2.5f, 801}));
  ASSERT_NO_FATAL_FAILURE(check_route(
      {"qwen3", DType::bfloat16, 4096, 128, 8, MoEScoring::softmax, false, true, 1.0f, 802}));
  // More experts than 48 KB of shared memory holds for one warp (opt-in path), and k = 1.
  ASSERT_NO_FATAL_FAILURE(check_route(
      {"e8192", DType::float32, 5, 8192, 4, MoEScoring::softmax, true, false, 1.0f, 803}));
  ASSERT_NO_FATAL_FAILURE(
      check_route({"k1", DType::float16, 100, 64, 1, MoEScoring::sigmoid, false, true, 1.0f, 804}));
}

// Equal logits: ties go to the smaller expert; softmax weights 1/E each.
TEST(MoETopKRouting, Ties) {
  SKIP_WITHOUT_GPU();
  const int64_t T = 3;
  const int64_t E = 40;
  const int64_t K = 5;
  std::vector<float> logits(static_cast<size_t>(T * E), 0.75f);
  DeviceBuffer dl(logits.size() * 4);
  DeviceBuffer dw(static_cast<size_t>(T * K) * 4);
  DeviceBuffer did(static_cast<size_t>(T * K) * 4);
  ASSERT_TRUE(dl.ptr && dw.ptr && did.ptr);
  CUDA_OK(cudaMemcpy(dl.ptr, logits.data(), logits.size() * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(dw.ptr, 0xFF, dw.bytes));
  CUDA_OK(cudaMemset(did.ptr, 0xFF, did.bytes));
  ck::TopKRoutingArgs a;
  a.logits = dl.ptr;
  a.topk_weights = dw.at<float>(0);
  a.topk_ids = did.at<int32_t>(0);
  a.tokens = T;
  a.num_experts = E;
  a.top_k = K;
  ASSERT_NO_THROW(ck::launch_moe_topk_routing(a, nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<int32_t> ids(static_cast<size_t>(T * K));
  std::vector<float> w(static_cast<size_t>(T * K));
  CUDA_OK(cudaMemcpy(ids.data(), did.ptr, ids.size() * 4, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(w.data(), dw.ptr, w.size() * 4, cudaMemcpyDeviceToHost));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t k = 0; k < K; ++k) {
      EXPECT_EQ(ids[static_cast<size_t>(t * K + k)], k);
      EXPECT_NEAR(w[static_cast<size_t>(t * K + k)], 1.0 / E, 1e-7);
    }
}

TEST(MoETopKRouting, InvalidArguments) {
  SKIP_WITHOUT_GPU();
  DeviceBuffer buf(1 << 16);
  ASSERT_NE(buf.ptr, nullptr);
  ck::TopKRoutingArgs a;
  a.logits = buf.at(0);
  a.topk_weights = buf.at<float>(4096);
  a.topk_ids = buf.at<int32_t>(8192);
  a.tokens = 2;
  a.num_experts = 8;
  a.top_k = 2;
  ck::TopKRoutingArgs bad = a;
  bad.top_k = 0;
  EXPECT_THROW(ck::launch_moe_topk_routing(bad, nullptr), tileops::SignatureError);
  bad.top_k = 9;
  EXPECT_THROW(ck::launch_moe_topk_routing(bad, nullptr), tileops::SignatureError);
  bad = a;
  bad.logits_dtype = DType::int32;
  EXPECT_THROW(ck::launch_moe_topk_routing(bad, nullptr), tileops::SignatureError);
  bad = a;
  bad.topk_ids = nullptr;
  EXPECT_THROW(ck::launch_moe_topk_routing(bad, nullptr), tileops::SignatureError);
  bad = a;
  bad.tokens = 0;
  EXPECT_NO_THROW(ck::launch_moe_topk_routing(bad, nullptr));
}

#endif  // TILEOPS_WITH_CUDA

}  // namespace
