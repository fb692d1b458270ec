#include "kernels/cpu/half_rows.h"

#include "kernels/cpu/elements.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define TILEOPS_HAVE_F16C_PATH 1
#endif

namespace tileops::cpu {
namespace {

#ifdef TILEOPS_HAVE_F16C_PATH
// Compiled for F16C whatever the library's baseline; called only where the CPU reports it.
[[gnu::target("avx,f16c")]] void convert_f16c(const Half* in, float* out, std::int64_t n) {
  const auto* bits = reinterpret_cast<const std::uint16_t*>(in);
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bits + i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) out[i] = _cvtsh_ss(bits[i]);
}

[[gnu::target("avx,f16c")]] void encode_f16c(const float* in, Half* out, std::int64_t n) {
  auto* bits = reinterpret_cast<std::uint16_t*>(out);
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h =
        _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(bits + i), h);
  }
  for (; i < n; ++i) bits[i] = _cvtss_sh(in[i], _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

bool has_f16c() {
  static const bool yes = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
  return yes;
}
#endif

}  // namespace

void half_row_to_float(const Half* in, float* out, std::int64_t n) {
#ifdef TILEOPS_HAVE_F16C_PATH
  if (has_f16c()) {
    convert_f16c(in, out, n);
    return;
  }
#endif
  for (std::int64_t i = 0; i < n; ++i) out[i] = to_float(in[i]);
}

void float_row_to_half(const float* in, Half* out, std::int64_t n) {
#ifdef TILEOPS_HAVE_F16C_PATH
  if (has_f16c()) {
    encode_f16c(in, out, n);
    return;
  }
#endif
  for (std::int64_t i = 0; i < n; ++i) out[i] = Half::from_float(in[i]);
}

}  // namespace tileops::cpu
