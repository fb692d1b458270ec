// The call specs of the kernel contracts: their text is the tuning database's key, so it is pinned
// here character for character (a change orphans recorded tunings); equal specs hash alike.
#include <gtest/gtest.h>

#include "tileops/kernel/attention.h"
#include "tileops/kernel/moe.h"
#include "tileops/kernel/norm.h"
#include "tileops/kernel/quant.h"
#include "tileops/kernel/rope.h"

namespace {

using tileops::Device;
using tileops::DType;

TEST(CallSpecs, NormAndRopeTextIsTheRecordedKey) {
  tileops::RMSNormCall norm;
  norm.device = Device::cpu();
  norm.rows = 2;
  norm.cols = 8;
  norm.dtype = DType::bfloat16;
  norm.fused_add = true;
  EXPECT_EQ(norm.str(), "RmsNormCall(rows=2, cols=8, dtype=bfloat16, fused_add=true, device=cpu)");
  tileops::LongRoPECall rope;
  rope.device = Device::cpu();
  rope.dtype = DType::float16;
  rope.half_dim = 48;
  EXPECT_EQ(rope.str(), "LongRopeCall(dtype=float16, positions=none, half_dim=48, device=cpu)");
  rope.has_positions = true;
  rope.positions_dtype = DType::int32;
  EXPECT_EQ(rope.str(), "LongRopeCall(dtype=float16, positions=int32, half_dim=48, device=cpu)");
}

TEST(CallSpecs, MoETextIsTheRecordedKey) {
  tileops::MoERoutingCall routing;
  routing.device = Device::cpu();
  routing.tokens = 4;
  routing.experts = 256;
  routing.top_k = 8;
  routing.scoring = tileops::MoEScoring::sigmoid;
  routing.renormalize = true;
  routing.has_bias = true;
  EXPECT_EQ(routing.str(),
            "MoeRoutingCall(tokens=4, experts=256, top_k=8, logits=float32, scoring=sigmoid, "
            "renormalize=true, bias=true, device=cpu)");
  routing.n_group = 8;
  routing.topk_group = 4;
  EXPECT_EQ(routing.str(),
            "MoeRoutingCall(tokens=4, experts=256, top_k=8, logits=float32, scoring=sigmoid, "
            "renormalize=true, bias=true, n_group=8, topk_group=4, device=cpu)");
  tileops::MoEPermuteCall permute;
  permute.device = Device::cpu();
  permute.tokens = 4;
  permute.hidden = 64;
  permute.top_k = 2;
  permute.num_experts = 8;
  EXPECT_EQ(permute.str(),
            "MoePermuteCall(tokens=4, hidden=64, top_k=2, num_experts=8, rows=0, dtype=bfloat16, "
            "map=false, device=cpu)");
  tileops::GroupedGemmCall gemm;
  gemm.device = Device::cpu();
  gemm.rows = 32;
  gemm.n = 64;
  gemm.k = 16;
  gemm.experts = 8;
  gemm.activation = tileops::MoEActivation::silu_and_mul;
  EXPECT_EQ(gemm.str(),
            "GroupedGemmCall(rows=32, n=64, k=16, experts=8, dtype=bfloat16, "
            "activation=silu_and_mul, device=cpu)");
  tileops::TokenGroupQuantCall quant;
  quant.device = Device::cpu();
  quant.rows = 4;
  quant.cols = 256;
  EXPECT_EQ(quant.str(),
            "TokenGroupQuantCall(rows=4, cols=256, group_size=128, dtype=bfloat16, device=cpu)");
  tileops::GroupedGemmFP8Call fp8;
  fp8.device = Device::cpu();
  fp8.rows = 4096;
  fp8.n = 4096;
  fp8.k = 7168;
  fp8.experts = 256;
  fp8.block_n = 64;
  EXPECT_EQ(fp8.str(),
            "GroupedGemmFP8Call(rows=4096, max_m=0, n=4096, k=7168, experts=256, block_n=64, "
            "block_k=128, activation=none, device=cpu)");
  tileops::GroupedGemmFP8Call other = fp8;
  EXPECT_EQ(other.hash(), fp8.hash());
  other.block_k = 64;
  EXPECT_NE(other.hash(), fp8.hash());
}

TEST(CallSpecs, AttentionTextIsTheRecordedKey) {
  tileops::AttentionVarlenCall varlen;
  varlen.device = Device::cpu();
  varlen.heads_q = 32;
  varlen.heads_kv = 8;
  varlen.head_dim = 128;
  varlen.windowed = true;
  varlen.queries_per_sequence = 4096;
  EXPECT_EQ(varlen.str(),
            "AttentionVarlenCall(dtype=bfloat16, heads_q=32, heads_kv=8, head_dim=128, "
            "causal=true, windowed=true, softcapped=false, queries_per_sequence=4096, "
            "device=cpu)");
  tileops::AttentionVarlenCall other = varlen;
  EXPECT_EQ(other.hash(), varlen.hash());
  other.softcapped = true;
  EXPECT_NE(other.hash(), varlen.hash());
  tileops::AttentionVarlenCall decoding = varlen;
  decoding.queries_per_sequence = 1;
  EXPECT_NE(decoding.hash(), varlen.hash());
  EXPECT_NE(decoding, varlen);
  tileops::AttentionPagedCall paged;
  paged.device = Device::cpu();
  paged.heads_q = 32;
  paged.heads_kv = 8;
  paged.head_dim = 128;
  paged.page_size = 16;
  paged.queries_per_sequence = 1;
  EXPECT_EQ(paged.str(),
            "AttentionPagedCall(dtype=bfloat16, heads_q=32, heads_kv=8, head_dim=128, "
            "page_size=16, causal=true, windowed=false, softcapped=false, "
            "queries_per_sequence=1, device=cpu)");
  tileops::AttentionPagedCall other_page = paged;
  other_page.page_size = 64;
  EXPECT_NE(other_page.hash(), paged.hash());
  tileops::AttentionPagedCall prefill = paged;
  prefill.queries_per_sequence = 512;
  EXPECT_NE(prefill.hash(), paged.hash());
  tileops::KVCacheWriteCall write;
  write.device = Device::cpu();
  write.dtype = DType::float16;
  write.heads_kv = 8;
  write.head_dim = 128;
  write.page_size = 16;
  EXPECT_EQ(write.str(),
            "KVCacheWriteCall(dtype=float16, heads_kv=8, head_dim=128, page_size=16, device=cpu)");
  tileops::AttentionMergeCall merge;
  merge.device = Device::cpu();
  merge.heads = 32;
  merge.head_dim = 64;
  EXPECT_EQ(merge.str(), "AttentionMergeCall(dtype=bfloat16, heads=32, head_dim=64, device=cpu)");
}

TEST(CallSpecs, EqualSpecsHashAlikeAndAFieldChangesTheHash) {
  tileops::GroupedGemmCall a;
  a.device = Device::cpu();
  a.rows = 32;
  a.n = 64;
  tileops::GroupedGemmCall b = a;
  EXPECT_EQ(a.hash(), b.hash());
  b.activation = tileops::MoEActivation::gelu_and_mul;
  EXPECT_NE(a.hash(), b.hash());
  b = a;
  b.rows = 33;
  EXPECT_NE(a.hash(), b.hash());
}

TEST(CallSpecs, ActivationNamesRoundTripAndUnknownNamesAreRefused) {
  for (const auto a : {tileops::MoEActivation::none, tileops::MoEActivation::silu_and_mul,
                       tileops::MoEActivation::gelu_and_mul}) {
    EXPECT_EQ(tileops::moe_activation(tileops::moe_activation_name(a)), a);
  }
  try {
    (void)tileops::moe_activation("relu");
    ADD_FAILURE() << "relu accepted";
  } catch (const tileops::SignatureError& e) {
    EXPECT_STREQ(e.what(),
                 "unknown MoE activation 'relu' (expected none, silu_and_mul or gelu_and_mul)");
  }
}

}  // namespace
