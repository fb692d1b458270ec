// A C entry point over launch_attention_varlen (src/kernels/attention/attention_varlen_cuda.h)
// for bench.py, which loads it with ctypes: the kernel timed and checked from the same process as
// the PyTorch peers, without the op class. Built by build.sh into a shared library.
#include <cstdint>
#include <cstring>
#include <exception>

#include "kernels/attention/attention_varlen_cuda.h"

extern "C" int tileops_attention_varlen(const void* q, const void* k, const void* v, void* out,
                                        float* lse, const int32_t* cu_q, const int32_t* cu_k,
                                        int64_t total_q, int64_t total_k, int64_t batch,
                                        int64_t heads_q, int64_t heads_kv, int64_t head_dim,
                                        int dtype_f16, float softmax_scale, int causal,
                                        int64_t window_left, float softcap, int block_n, int stages,
                                        int pingpong, int blocks, int32_t* workspace, void* stream,
                                        char* error, int error_len) {
  using namespace tileops;
  cuda_kernels::AttentionVarlenArgs a;
  a.q = q;
  a.k = k;
  a.v = v;
  a.out = out;
  a.lse = lse;
  a.cu_seqlens_q = cu_q;
  a.cu_seqlens_k = cu_k;
  a.total_q = total_q;
  a.total_k = total_k;
  a.batch = batch;
  a.heads_q = heads_q;
  a.heads_kv = heads_kv;
  a.head_dim = head_dim;
  a.dtype = dtype_f16 != 0 ? DType::float16 : DType::bfloat16;
  a.scores.softmax_scale = softmax_scale;
  a.scores.causal = causal != 0;
  a.scores.window_left = window_left;
  a.scores.softcap = softcap;
  a.workspace = workspace;
  AttentionVarlenCall call;
  call.dtype = a.dtype;
  call.heads_q = heads_q;
  call.heads_kv = heads_kv;
  call.head_dim = head_dim;
  call.causal = causal != 0;
  call.windowed = window_left >= 0;
  call.softcapped = softcap > 0.0f;
  cuda_kernels::AttentionVarlenConfig c = cuda_kernels::attention_varlen_default_config(call, 0);
  if (block_n > 0) c.block_n = block_n;
  if (stages > 0) c.stages = stages;
  if (pingpong >= 0) c.pingpong = pingpong != 0;
  c.blocks = blocks;
  try {
    cuda_kernels::launch_attention_varlen(a, c, stream);
  } catch (const std::exception& e) {
    if (error != nullptr && error_len > 0) {
      std::strncpy(error, e.what(), static_cast<size_t>(error_len - 1));
      error[error_len - 1] = '\0';
    }
    return 1;
  }
  return 0;
}
