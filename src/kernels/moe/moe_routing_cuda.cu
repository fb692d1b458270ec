// MoE top-k routing kernel (see moe_routing_cuda.h for the semantics).
//
// One warp per token; the warp keeps the token's scores s_e and selection scores c_e in shared
// memory (lane l owns the experts l, l + 32, ...). Softmax: warp max, expf(l - max), warp sum
// (butterfly: every lane holds the same sum), s = ex / sum. The selection runs top_k rounds; each
// round takes the largest (c_e, e) key strictly below the previous round's key, where the key
// orders c descending with ties to the smaller e (NaN above +inf, -0 equal to +0). No expert is
// ever marked, so the rounds cost E / 32 comparisons per lane each. The round's lane (r % 32)
// writes id and raw weight; at the end each lane rescales the weights it wrote.
//
// Group-limited routing (a second instantiation; the plain one is unchanged): before the rounds,
// the groups are scored by their two largest c by the selection key (32 / n_group lanes a group,
// e.g. 4 for DeepSeek-V3's 8 groups: each scans a quarter from a lane-rotated start so that the
// lanes hit distinct banks, then the lanes' top two merge by shuffles), each group's key (score,
// group) goes to shared memory, and lane l ranks the groups l, l + 32, ... against all the keys;
// a group ranked topk_group or lower has its experts' c overwritten by an "excluded" NaN pattern
// whose key is 0, below every real key, so the unchanged rounds never pick it. Real NaN c are
// made the canonical quiet NaN first, so no input can spell the excluded pattern.
#include "kernels/moe/moe_routing_cuda.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <type_traits>

#include "kernels/common/vectors.cuh"
#include "tileops/core/error.h"

namespace tileops::cuda_kernels {
namespace {

constexpr int kRouteMaxWarps = 4;

struct RouteParams {
  const void* logits;
  const float* bias;
  float* weights;
  int32_t* ids;
  int64_t tokens;
  int E;
  int K;
  int warps;  // tokens per block
  int n_group;
  int group_size;   // E / n_group
  int group_lanes;  // lanes scanning one group: a power of two, <= group_size, * n_group <= 32
  int topk_group;
  MoEScoring scoring;
  bool renormalize;
  float scaling;
};

using vec::to_float;

// The c of an expert outside the kept groups (a negative NaN no arithmetic result spells: c values
// are canonicalised to 0x7fc00000 first) and its key, 0, which no round selects.
constexpr uint32_t kExcludedBits = 0xffffffffu;
constexpr uint32_t kQuietNaNBits = 0x7fc00000u;

// Larger key = selected first: c descending, then e ascending. Never 0.
__device__ __forceinline__ unsigned long long selection_key(float c, int e) {
  uint32_t k;
  if (c != c) {
    k = 0xffc00000u;  // every NaN: above +inf (0xff800000)
  } else {
    if (c == 0.0f) c = 0.0f;  // -0 -> +0
    const uint32_t b = __float_as_uint(c);
    k = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
  }
  return (static_cast<unsigned long long>(k) << 32) |
         static_cast<uint32_t>(~static_cast<uint32_t>(e));
}

template <bool kGrouped>
__device__ __forceinline__ unsigned long long candidate_key(float c, int e) {
  if constexpr (kGrouped) {
    if (__float_as_uint(c) == kExcludedBits) return 0;
  }
  return selection_key(c, e);
}

// The float a selection key was made of (NaN for NaN, +0 for either zero); -inf for key 0, the
// "no expert" of a group of one.
__device__ __forceinline__ float key_value(unsigned long long k) {
  if (k == 0) return -INFINITY;
  const auto h = static_cast<uint32_t>(k >> 32);
  return __uint_as_float((h & 0x80000000u) ? (h & 0x7fffffffu) : ~h);
}

// Group-limited selection: overwrites the c of the experts outside the topk_group best groups
// with kExcludedBits. `keys` holds n_group slots of this warp. A group is scanned by group_lanes
// consecutive lanes (each from a rotated start, so that the lanes of a round hit distinct banks
// when the group size is a multiple of 32), whose two largest keys then merge by shuffles.
__device__ __forceinline__ void exclude_groups(const RouteParams& p, float* c,
                                               unsigned long long* keys, int lane) {
  const int G = p.group_size;
  const int P = p.group_lanes;
  const int per_round = 32 / P;
  const int sub = lane & (P - 1);
  const int rounds = (p.n_group + per_round - 1) / per_round;
  for (int round = 0; round < rounds; ++round) {  // the same count on every lane
    const int g = round * per_round + lane / P;
    unsigned long long k1 = 0, k2 = 0;
    if (g < p.n_group) {
      int j = (sub + P * g) % G;
      for (int i = sub; i < G; i += P) {
        const int e = g * G + j;
        j += P;
        if (j >= G) j -= G;
        const unsigned long long k = selection_key(c[e], e);
        if (k > k1) {
          k2 = k1;
          k1 = k;
        } else if (k > k2) {
          k2 = k;
        }
      }
    }
    for (int o = P >> 1; o > 0; o >>= 1) {
      const unsigned long long o1 = __shfl_xor_sync(0xffffffffu, k1, o);
      const unsigned long long o2 = __shfl_xor_sync(0xffffffffu, k2, o);
      if (o1 > k1) {
        k2 = k1 > o2 ? k1 : o2;
        k1 = o1;
      } else if (o1 > k2) {
        k2 = o1;
      }
    }
    if (g < p.n_group && sub == 0) {
      const float first = key_value(k1);
      keys[g] = selection_key(p.bias != nullptr ? first + key_value(k2) : first, g);
    }
  }
  __syncwarp();  // every lane reads every group's key
  for (int g = lane; g < p.n_group; g += 32) {
    const unsigned long long mine = keys[g];
    int rank = 0;
    for (int h = 0; h < p.n_group; ++h) rank += keys[h] > mine ? 1 : 0;
    if (rank < p.topk_group) continue;
    int j = g % G;
    for (int i = 0; i < G; ++i) {
      c[g * G + j] = __uint_as_float(kExcludedBits);
      j = j + 1 == G ? 0 : j + 1;
    }
  }
}

template <typename L, bool kGrouped>
__global__ void __launch_bounds__(kRouteMaxWarps * 32) moe_topk_kernel(const RouteParams p) {
  // per warp: s[E], c[E] (grouped: then n_group 8-byte group keys)
  extern __shared__ __align__(16) float route_smem[];
  const int lane = static_cast<int>(threadIdx.x & 31u);
  const int warp = static_cast<int>(threadIdx.x >> 5);
  const int64_t t = static_cast<int64_t>(blockIdx.x) * p.warps + warp;
  if (t >= p.tokens) return;  // the whole warp
  const int E = p.E;
  float* s;
  if constexpr (kGrouped) {
    s = route_smem + static_cast<int64_t>(warp) * (2 * E + 2 * p.n_group);
  } else {
    s = route_smem + static_cast<int64_t>(warp) * 2 * E;
  }
  float* c = s + E;
  const L* lg = static_cast<const L*>(p.logits) + t * E;

  float mx = -INFINITY;
  for (int e = lane; e < E; e += 32) {
    const float x = to_float(lg[e]);
    s[e] = x;
    mx = fmaxf(mx, x);
  }
  if (p.scoring == MoEScoring::softmax) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    float sum = 0.f;
    for (int e = lane; e < E; e += 32) {
      const float ex = expf(s[e] - mx);
      s[e] = ex;
      sum += ex;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    for (int e = lane; e < E; e += 32) s[e] = s[e] / sum;
  } else {
    for (int e = lane; e < E; e += 32) s[e] = 1.0f / (1.0f + expf(-s[e]));
  }
  for (int e = lane; e < E; e += 32) {
    float v = p.bias != nullptr ? s[e] + __ldg(p.bias + e) : s[e];
    if constexpr (kGrouped) {
      if (v != v) v = __uint_as_float(kQuietNaNBits);
    }
    c[e] = v;
  }
  __syncwarp();  // s of any expert is read by every lane below
  if constexpr (kGrouped) {
    exclude_groups(p, c, reinterpret_cast<unsigned long long*>(c + E), lane);
    __syncwarp();  // the excluded c are read by every lane below
  }

  const int64_t row = t * p.K;
  unsigned long long prev = ~0ull;
  float selected_sum = 0.f;
  for (int r = 0; r < p.K; ++r) {
    unsigned long long best = 0;
    for (int e = lane; e < E; e += 32) {
      const unsigned long long k = candidate_key<kGrouped>(c[e], e);
      if (k < prev && k > best) best = k;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const unsigned long long y = __shfl_xor_sync(0xffffffffu, best, o);
      best = y > best ? y : best;
    }
    prev = best;
    const int e = static_cast<int>(~static_cast<uint32_t>(best & 0xffffffffull));
    const float w = s[e];
    selected_sum += w;
    if (lane == (r & 31)) {
      p.ids[row + r] = e;
      p.weights[row + r] = w;
    }
  }
  for (int r = lane; r < p.K; r += 32) {
    float w = p.weights[row + r];  // written by this lane above
    if (p.renormalize) w = w / selected_sum;
    p.weights[row + r] = w * p.scaling;
  }
}

[[noreturn]] void throw_cuda(cudaError_t err, const char* what) {
  throw UsageError(std::string("moe_topk_routing (CUDA): ") + what + ": " + cudaGetErrorName(err) +
                   ": " + cudaGetErrorString(err));
}

template <typename L, bool kGrouped>
void launch_kernel(const RouteParams& p, int64_t smem, cudaStream_t stream) {
  if (smem > 48 * 1024) {
    if (const cudaError_t err = cudaFuncSetAttribute(moe_topk_kernel<L, kGrouped>,
                                                     cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                     static_cast<int>(smem));
        err != cudaSuccess)
      throw_cuda(err, "cudaFuncSetAttribute(MaxDynamicSharedMemorySize)");
  }
  const int64_t blocks = (p.tokens + p.warps - 1) / p.warps;
  moe_topk_kernel<L, kGrouped>
      <<<static_cast<unsigned>(blocks), p.warps * 32, static_cast<size_t>(smem), stream>>>(p);
}

template <typename L>
void launch_typed(const RouteParams& p, int64_t smem, cudaStream_t stream) {
  if (p.n_group > 1) {
    launch_kernel<L, true>(p, smem, stream);
  } else {
    launch_kernel<L, false>(p, smem, stream);
  }
}

}  // namespace

void launch_moe_topk_routing(const TopKRoutingArgs& a, void* stream) {
  const DType dt = a.logits_dtype;
  if (dt != DType::float32 && dt != DType::float16 && dt != DType::bfloat16)
    throw SignatureError(
        "moe_topk_routing (CUDA): logits dtype must be float32, float16 or "
        "bfloat16, got " +
        std::string(dtype_name(dt)));
  if (a.tokens < 0 || a.num_experts < 0)
    throw SignatureError("moe_topk_routing (CUDA): negative size");
  if (a.top_k < 1 || a.top_k > a.num_experts)
    throw SignatureError("moe_topk_routing (CUDA): top_k must be in [1, num_experts], got " +
                         std::to_string(a.top_k) + " with " + std::to_string(a.num_experts) +
                         " experts");
  if (a.num_experts > INT_MAX) throw SignatureError("moe_topk_routing (CUDA): too many experts");
  if (a.n_group < 1 || a.num_experts % a.n_group != 0)
    throw SignatureError("moe_topk_routing (CUDA): n_group must be >= 1 and divide the " +
                         std::to_string(a.num_experts) + " experts, got " +
                         std::to_string(a.n_group));
  if (a.topk_group < 1 || a.topk_group > a.n_group)
    throw SignatureError("moe_topk_routing (CUDA): topk_group must be in [1, n_group = " +
                         std::to_string(a.n_group) + "], got " + std::to_string(a.topk_group));
  if (a.top_k > a.topk_group * (a.num_experts / a.n_group))
    throw SignatureError(
        "moe_topk_routing (CUDA): top_k " + std::to_string(a.top_k) + " exceeds the " +
        std::to_string(a.topk_group * (a.num_experts / a.n_group)) + " experts of the kept groups");
  if (a.tokens == 0) return;
  if (a.logits == nullptr || a.topk_weights == nullptr || a.topk_ids == nullptr)
    throw SignatureError(
        "moe_topk_routing (CUDA): logits, topk_weights and topk_ids must not be "
        "null");
  if (reinterpret_cast<uintptr_t>(a.logits) % element_size(dt) != 0)
    throw SignatureError("moe_topk_routing (CUDA): logits is not aligned to its element size");

  // s and c; grouped: and the group keys
  const int64_t per_warp = 8 * a.num_experts + (a.n_group > 1 ? 8 * a.n_group : 0);
  int warps = static_cast<int>(std::min<int64_t>(kRouteMaxWarps, (48 * 1024) / per_warp));
  if (warps < 1) {
    warps = 1;
    int device = 0;
    if (const cudaError_t err = cudaGetDevice(&device); err != cudaSuccess)
      throw_cuda(err, "cudaGetDevice");
    int optin = 0;
    if (const cudaError_t err =
            cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
        err != cudaSuccess)
      throw_cuda(err, "cudaDeviceGetAttribute(MaxSharedMemoryPerBlockOptin)");
    if (per_warp > optin)
      throw SignatureError("moe_topk_routing (CUDA): too many experts for shared memory: " +
                           std::to_string(a.num_experts));
  }
  warps = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(warps, a.tokens)));
  if ((a.tokens + warps - 1) / warps > INT_MAX)
    throw SignatureError("moe_topk_routing (CUDA): too many tokens");

  RouteParams p;
  p.logits = a.logits;
  p.bias = a.correction_bias;
  p.weights = a.topk_weights;
  p.ids = a.topk_ids;
  p.tokens = a.tokens;
  p.E = static_cast<int>(a.num_experts);
  p.K = static_cast<int>(a.top_k);
  p.warps = warps;
  p.n_group = static_cast<int>(a.n_group);
  p.group_size = static_cast<int>(a.num_experts / a.n_group);
  p.group_lanes = 1;
  while (p.group_lanes * 2 * a.n_group <= 32 && p.group_lanes * 2 <= p.group_size)
    p.group_lanes *= 2;
  p.topk_group = static_cast<int>(a.topk_group);
  p.scoring = a.scoring;
  p.renormalize = a.renormalize;
  p.scaling = a.routed_scaling_factor;
  const int64_t smem = per_warp * warps;
  const auto st = static_cast<cudaStream_t>(stream);
  switch (dt) {
    case DType::float32:
      launch_typed<float>(p, smem, st);
      break;
    case DType::float16:
      launch_typed<__half>(p, smem, st);
      break;
    default:
      launch_typed<__nv_bfloat16>(p, smem, st);
      break;
  }
  if (const cudaError_t err = cudaGetLastError(); err != cudaSuccess)
    throw_cuda(err, "kernel launch");
}

}  // namespace tileops::cuda_kernels
