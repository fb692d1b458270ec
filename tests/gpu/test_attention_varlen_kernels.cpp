// GPU tests of the CUDA varlen attention kernel (src/kernels/attention/attention_varlen_*)
// through its launch API, against a double-precision reference computed here from the same
// (rounded) inputs. The GPU cases skip without a device; the argument checks and the adapter's
// refusals run everywhere.
//
// out and lse are poisoned with NaN (0xFF bytes) and followed by a guard region: every element
// must be written, nothing past the tensors. Tolerance, derived per dtype (unit roundoff u =
// 2^-8 for bfloat16, 2^-11 for float16, the rounding bound of the dtype with a factor 2 of
// margin): P is rounded to the dtype before P V (error <= u max|v| in the normalized sum) and out
// is rounded once (u |out|), so |out - ref| <= 2 u (max|v| + |ref|); the fp32 accumulation adds
// far less. lse is computed in fp32 from exact products: |lse - ref| <= 1e-4 (1 + |ref|). A query
// that sees no key: out exactly 0 and lse -inf.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#if TILEOPS_WITH_CUDA
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>

#include "gpu/kernel_test_util.h"
#include "kernels/attention/attention_varlen_cuda.h"
#include "kernels/attention/attention_varlen_cuda_impls.h"
#include "tileops/core/dtype.h"
#include "tileops/core/error.h"
#endif

namespace {

#if !TILEOPS_WITH_CUDA

TEST(AttentionVarlenKernels, RequiresCuda) {
  GTEST_SKIP() << "built without CUDA";
}

#else

using tileops::AttentionScores;
using tileops::DType;
using tileops::cuda_kernels::attention_varlen_default_config;
using tileops::cuda_kernels::attention_varlen_tuning_space;
using tileops::cuda_kernels::AttentionVarlenArgs;
using tileops::cuda_kernels::AttentionVarlenConfig;
using tileops::cuda_kernels::launch_attention_varlen;

using namespace tileops::kernel_test;  // NOLINT: the shared kernel-test helpers

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

struct AttnProblem {
  DType dtype = DType::bfloat16;
  int64_t head_dim = 128;
  int64_t heads_q = 4;
  int64_t heads_kv = 1;
  std::vector<int64_t> lq;  // queries per sequence
  std::vector<int64_t> lk;  // keys per sequence
  bool causal = true;
  int64_t window_left = -1;
  float softcap = 0.0f;
  float scale = 0.0f;    // 0: 1 / sqrt(head_dim)
  float q_range = 2.0f;  // q drawn from [-q_range, q_range): peaky scores when large
  // Key j of a sequence of sk keys scaled by 1 + key_ramp * (sk - 1 - j) / sk: scores grow toward
  // the first keys, which the kernel visits last, so a row's max keeps rising block by block.
  float key_ramp = 0.0f;
  uint64_t seed = 1;

  int64_t total_q() const { return sum(lq); }
  int64_t total_k() const { return sum(lk); }
  float softmax_scale() const {
    return scale != 0.0f ? scale : 1.0f / std::sqrt(static_cast<float>(head_dim));
  }
  static int64_t sum(const std::vector<int64_t>& v) {
    int64_t s = 0;
    for (const int64_t x : v) s += x;
    return s;
  }
  tileops::AttentionVarlenCall call() const {
    tileops::AttentionVarlenCall c;
    c.dtype = dtype;
    c.heads_q = heads_q;
    c.heads_kv = heads_kv;
    c.head_dim = head_dim;
    c.causal = causal;
    c.windowed = window_left >= 0;
    c.softcapped = softcap > 0.0f;
    return c;
  }
  std::string describe() const {
    std::ostringstream os;
    os << dtype_str(dtype) << " D " << head_dim << " heads " << heads_q << "/" << heads_kv
       << " lq {";
    for (const int64_t x : lq) os << x << " ";
    os << "} lk {";
    for (const int64_t x : lk) os << x << " ";
    os << "} causal " << causal << " window " << window_left << " softcap " << softcap << " scale "
       << softmax_scale() << " seed " << seed;
    return os.str();
  }
};

// How a launch is made: a configuration (nullopt: the default) and whether the kernel gets its
// tile counter (dynamic schedule) or not (fixed order).
struct LaunchChoice {
  std::optional<AttentionVarlenConfig> config;
  bool workspace = true;
};

class AttnRunner {
 public:
  explicit AttnRunner(AttnProblem p) : p_(std::move(p)) {}

  void prepare() {
    Rng rng(p_.seed, 11);
    const size_t d = static_cast<size_t>(p_.head_dim);
    const size_t nq = static_cast<size_t>(p_.total_q() * p_.heads_q) * d;
    const size_t nk = static_cast<size_t>(p_.total_k() * p_.heads_kv) * d;
    q_ = std::make_unique<HostTensor>(p_.dtype, nq);
    k_ = std::make_unique<HostTensor>(p_.dtype, nk);
    v_ = std::make_unique<HostTensor>(p_.dtype, nk);
    fill_random(*q_, rng, -p_.q_range, p_.q_range);
    fill_random(*k_, rng, -2.0f, 2.0f);
    fill_random(*v_, rng, -1.0f, 1.0f);
    cu_q_ = {0};
    cu_k_ = {0};
    for (size_t b = 0; b < p_.lq.size(); ++b) {
      cu_q_.push_back(cu_q_.back() + static_cast<int32_t>(p_.lq[b]));
      cu_k_.push_back(cu_k_.back() + static_cast<int32_t>(p_.lk[b]));
    }
    if (p_.key_ramp != 0.0f) {
      const size_t row = static_cast<size_t>(p_.heads_kv) * d;  // one token's keys
      for (size_t b = 0; b < p_.lk.size(); ++b) {
        const int64_t sk = p_.lk[b];
        for (int64_t j = 0; j < sk; ++j) {
          const float r =
              1.0f + p_.key_ramp * static_cast<float>(sk - 1 - j) / static_cast<float>(sk);
          const size_t first = static_cast<size_t>(cu_k_[b] + j) * row;
          for (size_t i = first; i < first + row; ++i) k_->set(i, k_->get(i) * r);
        }
      }
    }
    dq_ = upload(*q_);
    dk_ = upload(*k_);
    dv_ = upload(*v_);
    dcu_q_ = std::make_unique<DeviceBuffer>(cu_q_.size() * 4);
    dcu_k_ = std::make_unique<DeviceBuffer>(cu_k_.size() * 4);
    ASSERT_NE(dcu_q_->ptr, nullptr);
    ASSERT_NE(dcu_k_->ptr, nullptr);
    CUDA_OK(cudaMemcpy(dcu_q_->ptr, cu_q_.data(), cu_q_.size() * 4, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(dcu_k_->ptr, cu_k_.data(), cu_k_.size() * 4, cudaMemcpyHostToDevice));
    out_elems_ = nq;
    lse_elems_ = static_cast<size_t>(p_.heads_q * p_.total_q());
    dout_ = std::make_unique<DeviceBuffer>((out_elems_ + kGuard) * element_size(p_.dtype));
    dlse_ = std::make_unique<DeviceBuffer>((lse_elems_ + kGuard) * 4);
    dws_ = std::make_unique<DeviceBuffer>(16);
    ASSERT_NE(dout_->ptr, nullptr);
    ASSERT_NE(dlse_->ptr, nullptr);
    ASSERT_NE(dws_->ptr, nullptr);
    reference();
  }

  void run_and_check(const LaunchChoice& choice) {
    CUDA_OK(cudaMemset(dout_->ptr, 0xFF, dout_->bytes));  // NaN poison and guard
    CUDA_OK(cudaMemset(dlse_->ptr, 0xFF, dlse_->bytes));
    CUDA_OK(cudaMemset(dws_->ptr, 0x7F, dws_->bytes));  // the launch must zero it
    AttentionVarlenArgs a;
    a.q = dq_->ptr;
    a.k = dk_->ptr;
    a.v = dv_->ptr;
    a.out = dout_->ptr;
    a.lse = static_cast<float*>(dlse_->ptr);
    a.cu_seqlens_q = static_cast<const int32_t*>(dcu_q_->ptr);
    a.cu_seqlens_k = static_cast<const int32_t*>(dcu_k_->ptr);
    a.total_q = p_.total_q();
    a.total_k = p_.total_k();
    a.batch = static_cast<int64_t>(p_.lq.size());
    a.heads_q = p_.heads_q;
    a.heads_kv = p_.heads_kv;
    a.head_dim = p_.head_dim;
    a.dtype = p_.dtype;
    a.scores.softmax_scale = p_.softmax_scale();
    a.scores.causal = p_.causal;
    a.scores.window_left = p_.window_left;
    a.scores.softcap = p_.softcap;
    a.workspace = choice.workspace ? static_cast<int32_t*>(dws_->ptr) : nullptr;
    const AttentionVarlenConfig cfg =
        choice.config ? *choice.config : attention_varlen_default_config(p_.call(), 0);
    const std::string where =
        p_.describe() + " config {" + cfg.str() + "}" + (choice.workspace ? " dynamic" : " static");
    try {
      launch_attention_varlen(a, cfg, nullptr);
    } catch (const std::exception& e) {
      FAIL() << where << ": launch threw: " << e.what();
    }
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaGetLastError());

    HostTensor out(p_.dtype, out_elems_ + kGuard);
    std::vector<float> lse(lse_elems_ + kGuard);
    CUDA_OK(cudaMemcpy(out.bytes.data(), dout_->ptr, out.bytes.size(), cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(lse.data(), dlse_->ptr, lse.size() * 4, cudaMemcpyDeviceToHost));

    const double u = p_.dtype == DType::bfloat16 ? 0x1p-8 : 0x1p-11;
    int64_t bad = 0;
    std::string first_bad;
    auto note = [&](const std::string& what) {
      if (bad++ == 0) first_bad = what;
    };
    const size_t d = static_cast<size_t>(p_.head_dim);
    for (size_t i = 0; i < out_elems_; ++i) {
      const double got = out.get(i);
      const double ref = ref_out_[i];
      const size_t row = i / d;  // token * heads_q + head
      const bool no_key = std::isinf(ref_lse_at_row(row));
      const double bound = 2.0 * u * (vmax_ + std::fabs(ref)) + 1e-6;
      if (no_key ? got != 0.0 : !(std::fabs(got - ref) <= bound)) {
        std::ostringstream os;
        os << "out[" << i << "] = " << got << ", reference " << ref << (no_key ? " (no key)" : "");
        note(os.str());
      }
    }
    for (size_t i = 0; i < lse_elems_; ++i) {
      const double got = lse[i];
      const double ref = ref_lse_[i];
      const bool ok = std::isinf(ref) ? (std::isinf(got) && got < 0)
                                      : std::fabs(got - ref) <= 1e-4 * (1.0 + std::fabs(ref));
      if (!ok) {
        std::ostringstream os;
        os << "lse[" << i << "] = " << got << ", reference " << ref;
        note(os.str());
      }
    }
    EXPECT_EQ(bad, 0) << where << ": " << bad << " wrong elements, first " << first_bad;
    int64_t touched = 0;
    for (size_t i = out_elems_; i < out_elems_ + kGuard; ++i) touched += out.bits(i) != 0xFFFFu;
    for (size_t i = lse_elems_; i < lse_elems_ + kGuard; ++i)
      touched += float_bits(lse[i]) != 0xFFFFFFFFu;
    EXPECT_EQ(touched, 0) << where << ": " << touched << " elements past out / lse written";
  }

 private:
  static constexpr size_t kGuard = 64;

  std::unique_ptr<DeviceBuffer> upload(const HostTensor& t) {
    auto buf = std::make_unique<DeviceBuffer>(t.bytes.size());
    if (buf->ptr != nullptr && !t.bytes.empty())
      cudaMemcpy(buf->ptr, t.bytes.data(), t.bytes.size(), cudaMemcpyHostToDevice);
    return buf;
  }

  // lse of the query row (token * heads_q + head) of out.
  double ref_lse_at_row(size_t row) const {
    const size_t token = row / static_cast<size_t>(p_.heads_q);
    const size_t head = row % static_cast<size_t>(p_.heads_q);
    return ref_lse_[head * static_cast<size_t>(p_.total_q()) + token];
  }

  // Per sequence, head and query: the visible keys' scores in double, then lse and out.
  void reference() {
    const int64_t d = p_.head_dim;
    const int64_t group = p_.heads_q / p_.heads_kv;
    const double scale = p_.softmax_scale();
    ref_out_.assign(out_elems_, 0.0);
    ref_lse_.assign(lse_elems_, kNegInf);
    auto widen = [](const HostTensor& t) {
      std::vector<double> w(t.size());
      for (size_t i = 0; i < w.size(); ++i) w[i] = t.get(i);
      return w;
    };
    const std::vector<double> q = widen(*q_);
    const std::vector<double> k = widen(*k_);
    const std::vector<double> v = widen(*v_);
    vmax_ = 0.0;
    for (const double x : v) vmax_ = std::max(vmax_, std::fabs(x));
    std::vector<double> scores;
    for (size_t b = 0; b < p_.lq.size(); ++b) {
      const int64_t sq = p_.lq[b];
      const int64_t sk = p_.lk[b];
      for (int64_t i = 0; i < sq; ++i) {
        const int64_t tq = cu_q_[b] + i;
        int64_t lo = 0;
        int64_t hi = sk;  // visible keys [lo, hi)
        if (p_.causal) hi = std::min(hi, i + sk - sq + 1);
        if (p_.window_left >= 0) lo = std::max<int64_t>(lo, i + sk - sq - p_.window_left);
        if (hi <= lo) continue;  // no key: out 0, lse -inf
        for (int64_t h = 0; h < p_.heads_q; ++h) {
          const int64_t hk = h / group;
          scores.assign(static_cast<size_t>(hi - lo), 0.0);
          double mx = kNegInf;
          for (int64_t j = lo; j < hi; ++j) {
            const int64_t tk = cu_k_[b] + j;
            double dot = 0.0;
            const double* qr = &q[static_cast<size_t>((tq * p_.heads_q + h) * d)];
            const double* kr = &k[static_cast<size_t>((tk * p_.heads_kv + hk) * d)];
            for (int64_t c = 0; c < d; ++c) dot += qr[c] * kr[c];
            double s = dot * scale;
            if (p_.softcap > 0.0f) s = p_.softcap * std::tanh(s / p_.softcap);
            scores[static_cast<size_t>(j - lo)] = s;
            mx = std::max(mx, s);
          }
          double sum = 0.0;
          for (double& s : scores) {
            s = std::exp(s - mx);
            sum += s;
          }
          ref_lse_[static_cast<size_t>(h * p_.total_q() + tq)] = mx + std::log(sum);
          double* o = &ref_out_[static_cast<size_t>((tq * p_.heads_q + h) * d)];
          for (int64_t j = lo; j < hi; ++j) {
            const int64_t tk = cu_k_[b] + j;
            const double w = scores[static_cast<size_t>(j - lo)] / sum;
            const double* vr = &v[static_cast<size_t>((tk * p_.heads_kv + hk) * d)];
            for (int64_t c = 0; c < d; ++c) o[c] += w * vr[c];
          }
        }
      }
    }
  }

  AttnProblem p_;
  std::unique_ptr<HostTensor> q_, k_, v_;
  std::vector<int32_t> cu_q_, cu_k_;
  std::unique_ptr<DeviceBuffer> dq_, dk_, dv_, dcu_q_, dcu_k_, dout_, dlse_, dws_;
  size_t out_elems_ = 0;
  size_t lse_elems_ = 0;
  std::vector<double> ref_out_;
  std::vector<double> ref_lse_;
  double vmax_ = 0.0;
};

void check_problem(const AttnProblem& p, const std::vector<LaunchChoice>& choices = {{}}) {
  AttnRunner runner(p);
  ASSERT_NO_FATAL_FAILURE(runner.prepare()) << p.describe();
  for (const auto& c : choices) ASSERT_NO_FATAL_FAILURE(runner.run_and_check(c)) << p.describe();
}

const DType kDtypes[] = {DType::bfloat16, DType::float16};
const int64_t kHeadDims[] = {64, 128, 256};

// Every head dim and dtype: causal varlen (lengths around the 128-query and 128-key tiles) at
// GQA 4, non-causal with empty sequences at GQA 8, and MHA (GQA 1) with peaky scores.
TEST(AttentionVarlenKernels, HeadDimsDtypesCausalAndNot) {
  SKIP_WITHOUT_GPU();
  uint64_t seed = 10;
  for (const DType dtype : kDtypes)
    for (const int64_t d : kHeadDims) {
      AttnProblem causal;
      causal.dtype = dtype;
      causal.head_dim = d;
      causal.heads_q = 8;
      causal.heads_kv = 2;
      causal.lq = causal.lk = {1, 127, 128, 129, 300};
      causal.seed = ++seed;
      ASSERT_NO_FATAL_FAILURE(check_problem(causal));

      AttnProblem plain = causal;
      plain.causal = false;
      plain.heads_q = 8;
      plain.heads_kv = 1;
      plain.lq = {0, 200, 65, 0, 130};
      plain.lk = {37, 0, 300, 5, 129};
      plain.seed = ++seed;
      ASSERT_NO_FATAL_FAILURE(check_problem(plain));

      AttnProblem mha = causal;
      mha.heads_q = mha.heads_kv = 2;
      mha.lq = mha.lk = {257};
      mha.q_range = 8.0f;
      mha.seed = ++seed;
      ASSERT_NO_FATAL_FAILURE(check_problem(mha));
    }
}

// Chunked prefill (sq < sk, causal aligned bottom-right) and sq > sk (the first sq - sk queries
// see no key), window (causal and not, window 0), softcap, sequences without keys, a negative
// scale (the kernel's transformed-score path).
TEST(AttentionVarlenKernels, MasksAndScores) {
  SKIP_WITHOUT_GPU();
  uint64_t seed = 100;
  for (const DType dtype : kDtypes)
    for (const int64_t d : kHeadDims) {
      AttnProblem base;
      base.dtype = dtype;
      base.head_dim = d;
      base.heads_q = 4;
      base.heads_kv = 1;

      AttnProblem chunked = base;
      chunked.lq = {200, 1, 0, 64};
      chunked.lk = {520, 33, 9, 64};
      chunked.seed = ++seed;
      ASSERT_NO_FATAL_FAILURE(check_problem(chunked));

      AttnProblem no_key = base;
      no_key.lq = {300, 64};
      no_key.lk = {100, 1};
      no_key.seed = ++seed;
      ASSERT_NO_FATAL_FAILURE(check_problem(no_key));

      AttnProblem window = base;
      window.lq = {260, 70};
      window.lk = {260, 400};
      window.window_left = 50;
      window.seed = ++seed;
      ASSERT_NO_FATAL_FAILURE(check_problem(window));

      AttnProblem window0 = window;
      window0.causal = false;
      window0.window_left = 0;
      window0.seed = ++seed;
      ASSERT_NO_FATAL_FAILURE(check_problem(window0));

      AttnProblem capped = base;
      capped.lq = {150, 40};
      capped.lk = {150, 200};
      capped.softcap = 30.0f;
      capped.q_range = 8.0f;
      capped.seed = ++seed;
      ASSERT_NO_FATAL_FAILURE(check_problem(capped));

      AttnProblem no_keys_at_all = base;
      no_keys_at_all.lq = {70, 3};
      no_keys_at_all.lk = {0, 0};
      no_keys_at_all.seed = ++seed;
      ASSERT_NO_FATAL_FAILURE(check_problem(no_keys_at_all));

      AttnProblem negative = base;
      negative.causal = false;
      negative.lq = {90};
      negative.lk = {140};
      negative.scale = -0.09f;
      negative.seed = ++seed;
      ASSERT_NO_FATAL_FAILURE(check_problem(negative));
    }
}

// Scores that rise block after block toward the keys visited last: a row's max grows by less than
// the kernel's slack (no rescale of O, P up to 2^8) on some blocks and by more on others.
TEST(AttentionVarlenKernels, ScoresRisingAcrossKeyBlocks) {
  SKIP_WITHOUT_GPU();
  uint64_t seed = 200;
  for (const DType dtype : kDtypes)
    for (const int64_t d : kHeadDims)
      for (const bool causal : {false, true}) {
        AttnProblem p;
        p.dtype = dtype;
        p.head_dim = d;
        p.heads_q = 4;
        p.heads_kv = 2;
        p.causal = causal;
        p.lq = {300, 1};
        p.lk = {1100, 700};
        p.key_ramp = 5.0f;
        p.seed = ++seed;
        ASSERT_NO_FATAL_FAILURE(check_problem(p));
        p.softcap = 40.0f;  // the TRANSFORM instances
        p.q_range = 6.0f;
        p.seed = ++seed;
        ASSERT_NO_FATAL_FAILURE(check_problem(p));
      }
}

// Every configuration of the tuning space, with and without the tile counter, and a grid of
// few blocks (many tiles each: the schedule's rounds), at GQA 8.
TEST(AttentionVarlenKernels, ConfigurationsAndSchedules) {
  SKIP_WITHOUT_GPU();
  uint64_t seed = 200;
  for (const int64_t d : kHeadDims) {
    AttnProblem p;
    p.dtype = d == 128 ? DType::float16 : DType::bfloat16;
    p.head_dim = d;
    p.heads_q = 8;
    p.heads_kv = 1;
    p.lq = p.lk = {520, 3, 0, 384};
    p.seed = ++seed;
    std::vector<LaunchChoice> choices;
    for (const AttentionVarlenConfig& c : attention_varlen_tuning_space(p.call(), 0)) {
      choices.push_back({c, true});
      choices.push_back({c, false});
    }
    AttentionVarlenConfig few = attention_varlen_default_config(p.call(), 0);
    few.blocks = 3;
    choices.push_back({few, true});
    choices.push_back({few, false});
    ASSERT_NO_FATAL_FAILURE(check_problem(p, choices));
  }
}

// A few small launches of every head dim (every mask kind among them): the cases
// compute-sanitizer's memcheck and racecheck run (`--gtest_filter=*SanitizerSmall`).
TEST(AttentionVarlenKernels, SanitizerSmall) {
  SKIP_WITHOUT_GPU();
  uint64_t seed = 300;
  for (const int64_t d : kHeadDims) {
    AttnProblem p;
    p.dtype = d == 64 ? DType::float16 : DType::bfloat16;
    p.head_dim = d;
    p.heads_q = 4;
    p.heads_kv = 2;
    p.lq = {130, 0, 7};
    p.lk = {200, 5, 7};
    p.window_left = d == 128 ? 60 : -1;
    p.softcap = d == 64 ? 20.0f : 0.0f;
    p.seed = ++seed;
    ASSERT_NO_FATAL_FAILURE(check_problem(p));
  }
}

// Arguments the kernel cannot take: SignatureError naming what is wrong (no device needed).
TEST(AttentionVarlenKernels, ArgumentErrors) {
  AttentionVarlenArgs a;
  alignas(16) static unsigned char dummy[64];
  a.q = a.k = a.v = a.out = dummy;
  a.lse = reinterpret_cast<float*>(dummy);
  a.cu_seqlens_q = a.cu_seqlens_k = reinterpret_cast<const int32_t*>(dummy);
  a.total_q = a.total_k = 1;
  a.batch = 1;
  a.heads_q = 4;
  a.heads_kv = 2;
  a.head_dim = 96;
  tileops::AttentionVarlenCall call;
  call.heads_q = 4;
  call.heads_kv = 2;
  call.head_dim = 128;
  const AttentionVarlenConfig c = attention_varlen_default_config(call, 0);
  auto message = [&](const AttentionVarlenArgs& args, const AttentionVarlenConfig& cfg) {
    try {
      launch_attention_varlen(args, cfg, nullptr);
    } catch (const tileops::SignatureError& e) {
      return std::string(e.what());
    }
    return std::string("no SignatureError");
  };
  const std::string dim = message(a, c);
  EXPECT_NE(dim.find("64, 128 or 256"), std::string::npos) << dim;
  a.head_dim = 128;
  a.dtype = DType::float32;
  EXPECT_NE(message(a, c).find("float16 or bfloat16"), std::string::npos) << message(a, c);
  a.dtype = DType::bfloat16;
  a.heads_kv = 3;
  EXPECT_NE(message(a, c).find("multiple of heads_kv"), std::string::npos) << message(a, c);
  a.heads_kv = 2;
  a.q = dummy + 2;
  EXPECT_NE(message(a, c).find("16-byte aligned"), std::string::npos) << message(a, c);
  a.q = dummy;
  AttentionVarlenConfig odd = c;
  odd.block_n = 96;
  EXPECT_NE(message(a, odd).find("no kernel for config"), std::string::npos) << message(a, odd);
  // Nothing to compute: no launch, no error, even without a device.
  a.total_q = 0;
  EXPECT_NO_THROW(launch_attention_varlen(a, c, nullptr));
}

// The adapter refuses what the kernel cannot serve, naming it (no device needed).
TEST(AttentionVarlenKernels, AdapterRefusals) {
  tileops::AttentionVarlenCall call;
  call.dtype = DType::bfloat16;
  call.heads_q = 32;
  call.heads_kv = 8;
  call.head_dim = 128;
  EXPECT_FALSE(tileops::AttentionVarlenCuda::refusal(call).has_value());
  call.head_dim = 96;
  const auto dim = tileops::AttentionVarlenCuda::refusal(call);
  ASSERT_TRUE(dim.has_value());
  EXPECT_NE(dim->find("64, 128 or 256"), std::string::npos) << *dim;
  call.head_dim = 256;
  call.dtype = DType::float32;
  const auto dtype = tileops::AttentionVarlenCuda::refusal(call);
  ASSERT_TRUE(dtype.has_value());
  EXPECT_NE(dtype->find("float32"), std::string::npos) << *dtype;
}

#endif  // TILEOPS_WITH_CUDA

}  // namespace
