#!/usr/bin/env python3
"""Peers of the attention ops, timed the way bench/peers.py times the norm and rope peers (its
L2 flush before every timed call, CUDA events, the median; its helpers are imported, not copied).

Varlen attention (GroupedQueryAttentionVarlenFwdOp's workloads in manifest/attention.yaml): B
sequences of equal length packed along the tokens, so the padded batch [B, H, S, D] that torch's
attention takes holds exactly the same work. Peers:
  tileops     our op through its custom operator on the packed tensors
  sdpa-cudnn  F.scaled_dot_product_attention under sdpa_kernel(CUDNN_ATTENTION)
  sdpa-flash  the same under sdpa_kernel(FLASH_ATTENTION)
  flex        flex_attention under torch.compile, with a block mask for the causal (bottom-right)
              and window masks and a score_mod for the softcap
SDPA gets the packed tensors viewed [B, H, S, D] (no copy), GQA with enable_gqa=True (the key and
value heads repeated beforehand, outside the timing, where a backend refuses it; the peer is then
named "<peer>(kv-repeated)"), the bottom-right causal mask of q 512 over kv 4096 through
torch.nn.attention.bias.causal_lower_right. SDPA has no score cap and its fused backends no window:
those cases have no SDPA row. TFLOP/s = 4 D Hq B (visible pairs of one sequence) / time, the
manifest's roofline. Each peer's output is compared with ours (max |difference|, printed).

KV-cache write (KVCacheWriteFwdOp's workloads): tileops beside torch's index_copy_ into the caches
viewed [slots, Hkv * D] and vLLM's reshape_and_cache_flash when vllm is importable; TB/s over the
roofline bytes (key and value read, their rows written, the slots read).

State merge (AttentionMergeStatesFwdOp's workloads): tileops beside the eager torch expression,
its torch.compile, and vLLM's merge_attn_states when importable; TB/s over the bytes read and
written.

Writes a table (stdout) and a CSV ($OUT/peers_attention.csv, or --csv).

Usage: python3 bench/peers_attention.py [--iters N] [--csv PATH] [--only varlen|write|merge]
"""
import argparse
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import compile_static, time_median_us  # noqa: E402  (bench/peers.py)

VARLEN = [  # (label, B, sq, sk, Hq, Hkv, D, causal, window_left, softcap): the manifest's rows
    ("llama3-8b-4x4k-causal", 4, 4096, 4096, 32, 8, 128, True, -1, 0.0),
    ("llama3-8b-4x4k", 4, 4096, 4096, 32, 8, 128, False, -1, 0.0),
    ("llama3-8b-1x16k-causal", 1, 16384, 16384, 32, 8, 128, True, -1, 0.0),
    ("llama3-8b-1x1k-causal", 1, 1024, 1024, 32, 8, 128, True, -1, 0.0),
    ("chunk-8x512-on-4k-causal", 8, 512, 4096, 32, 8, 128, True, -1, 0.0),
    ("chunk-8x512-on-4k", 8, 512, 4096, 32, 8, 128, False, -1, 0.0),
    ("llama3-70b-4x4k-causal", 4, 4096, 4096, 64, 8, 128, True, -1, 0.0),
    ("qwen3-30b-4x4k-causal", 4, 4096, 4096, 32, 4, 128, True, -1, 0.0),
    ("d256-h16-4x4k-causal", 4, 4096, 4096, 16, 8, 256, True, -1, 0.0),
    ("gemma2-9b-8k-swa-softcap", 1, 8192, 8192, 16, 8, 256, True, 4095, 50.0),
    ("llama3.2-1b-4x4k-causal", 4, 4096, 4096, 32, 8, 64, True, -1, 0.0),
]
KV_WRITE = [  # (label, T, Hkv, D, num_blocks, page_size)
    ("llama3-8b-4k-page16", 4096, 8, 128, 512, 16),
    ("llama3-8b-4k-page64", 4096, 8, 128, 128, 64),
    ("llama3-8b-decode64", 64, 8, 128, 512, 16),
    ("gemma2-9b-4k-page16", 4096, 8, 256, 512, 16),
]
MERGE = [  # (label, T, H, D)
    ("llama3-8b-4k", 4096, 32, 128),
    ("llama3-70b-4k", 4096, 64, 128),
    ("llama3-8b-decode64", 64, 32, 128),
    ("gemma2-9b-4k", 4096, 16, 256),
]


def visible_pairs(sq, sk, causal, window_left):
    """Visible (query, key) pairs of one sequence under the contract's mask."""
    total = 0
    for i in range(sq):
        diagonal = i + sk - sq
        end = min(sk, diagonal + 1) if causal else sk
        begin = max(0, diagonal - window_left) if window_left >= 0 else 0
        total += max(0, end - begin)
    return total


def tileops_module():
    try:
        import tileops

        return tileops
    except Exception as exc:  # noqa: BLE001 (the peers still run)
        print(f"tileops is not importable ({exc}): its rows are left out", flush=True)
        return None


def max_diff(a, b):
    return (a.float() - b.float()).abs().max().item()


def sdpa_peers(q4, k4, v4, sq, sk, causal, scale):
    """(name, fn) of each SDPA backend that takes the case: fn() -> out [B, Hq, sq, D]."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    F = torch.nn.functional
    group = q4.shape[1] // k4.shape[1]
    mask = None
    is_causal = causal and sq == sk
    if causal and sq != sk:
        from torch.nn.attention.bias import causal_lower_right

        mask = causal_lower_right(sq, sk)
    out = []
    for name, backend in (("sdpa-cudnn", SDPBackend.CUDNN_ATTENTION),
                          ("sdpa-flash", SDPBackend.FLASH_ATTENTION)):
        def gqa(backend=backend):
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q4, k4, v4, attn_mask=mask,
                                                      is_causal=is_causal, scale=scale,
                                                      enable_gqa=True)
        try:
            gqa()
            out.append((name, gqa))
            continue
        except Exception:  # noqa: BLE001 (the backend refuses GQA here: repeat the heads)
            pass
        kr = k4.repeat_interleave(group, dim=1)
        vr = v4.repeat_interleave(group, dim=1)

        def repeated(backend=backend, kr=kr, vr=vr):
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q4, kr, vr, attn_mask=mask,
                                                      is_causal=is_causal, scale=scale)
        try:
            repeated()
            out.append((f"{name}(kv-repeated)", repeated))
        except Exception as exc:  # noqa: BLE001
            print(f"  {name}: not available for this case ({str(exc).splitlines()[0][:100]})",
                  flush=True)
    return out


def flex_peer(q4, k4, v4, sq, sk, causal, window_left, softcap, scale):
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    offset = sk - sq

    def mask_mod(b, h, q_idx, kv_idx):
        ok = kv_idx >= 0
        if causal:
            ok = ok & (kv_idx <= q_idx + offset)
        if window_left >= 0:
            ok = ok & (kv_idx >= q_idx + offset - window_left)
        return ok

    block_mask = None
    if causal or window_left >= 0:
        block_mask = create_block_mask(mask_mod, B=None, H=None, Q_LEN=sq, KV_LEN=sk, device="cuda")
    score_mod = None
    if softcap > 0:
        def score_mod(score, b, h, q_idx, kv_idx):
            return softcap * torch.tanh(score / softcap)
    compiled = compile_static(flex_attention)
    return lambda: compiled(q4, k4, v4, score_mod=score_mod, block_mask=block_mask, scale=scale,
                            enable_gqa=True)


def bench_varlen(tileops, iters, record):
    for label, B, sq, sk, hq, hkv, d, causal, window_left, softcap in VARLEN:
        dtype = torch.bfloat16
        case = f"{label}-bfloat16"
        q = torch.randn(B * sq, hq, d, dtype=dtype, device="cuda")
        k = torch.randn(B * sk, hkv, d, dtype=dtype, device="cuda")
        v = torch.randn(B * sk, hkv, d, dtype=dtype, device="cuda")
        cu_q = torch.arange(0, B + 1, dtype=torch.int32, device="cuda") * sq
        cu_k = torch.arange(0, B + 1, dtype=torch.int32, device="cuda") * sk
        scale = 1 / math.sqrt(d)
        flops = 4 * d * hq * B * visible_pairs(sq, sk, causal, window_left)
        # [B, H, S, D] views of the packed tensors
        q4 = q.view(B, sq, hq, d).transpose(1, 2)
        k4 = k.view(B, sk, hkv, d).transpose(1, 2)
        v4 = v.view(B, sk, hkv, d).transpose(1, 2)
        ours = None
        if tileops is not None:
            op = tileops.GroupedQueryAttentionVarlenFwdOp(causal=causal, window_left=window_left,
                                                         softcap=softcap)
            fn = torch.ops.tileops.attention_grouped_query_attention_varlen_fwd.default
            key = op.instance_key
            try:
                ours = fn(key, q, k, v, cu_q, cu_k)[0]
                record("GroupedQueryAttentionVarlenFwdOp", case, "tileops",
                       time_median_us(lambda: fn(key, q, k, v, cu_q, cu_k), iters), flops=flops)
            except Exception as exc:  # noqa: BLE001 (OpNotAvailableError without the kernel)
                print(f"  tileops: {str(exc).splitlines()[0][:120]}", flush=True)
        peers = []
        if softcap == 0 and window_left < 0:
            peers += sdpa_peers(q4, k4, v4, sq, sk, causal, scale)
        peers.append(("flex", flex_peer(q4, k4, v4, sq, sk, causal, window_left, softcap, scale)))
        for name, peer in peers:
            diff = ""
            if ours is not None:
                got = peer().transpose(1, 2).reshape(B * sq, hq, d)
                diff = f"max |ours - {name}| = {max_diff(got, ours):.3g}"
            record("GroupedQueryAttentionVarlenFwdOp", case, name, time_median_us(peer, iters),
                   flops=flops, note=diff)
        del q, k, v, q4, k4, v4
        torch.cuda.empty_cache()


def vllm_ops():
    try:
        from vllm import _custom_ops

        return _custom_ops
    except Exception:  # noqa: BLE001
        return None


def bench_write(tileops, iters, record):
    vllm = vllm_ops()
    for label, T, hkv, d, blocks, page in KV_WRITE:
        dtype = torch.bfloat16
        case = f"{label}-bfloat16"
        key = torch.randn(T, hkv, d, dtype=dtype, device="cuda")
        value = torch.randn(T, hkv, d, dtype=dtype, device="cuda")
        k_cache = torch.randn(blocks, page, hkv, d, dtype=dtype, device="cuda")
        v_cache = torch.randn(blocks, page, hkv, d, dtype=dtype, device="cuda")
        order = torch.randperm(blocks, device="cuda")
        t = torch.arange(T, device="cuda")
        slots = order[t // page] * page + t % page
        nbytes = 4 * key.numel() * key.element_size() + slots.numel() * 8
        row = hkv * d
        if tileops is not None:
            op = tileops.KVCacheWriteFwdOp()
            fn = torch.ops.tileops.attention_kv_cache_write_fwd_writes_k_cache_writes_v_cache.default
            okey = op.instance_key
            record("KVCacheWriteFwdOp", case, "tileops",
                   time_median_us(lambda: fn(okey, key, value, k_cache, v_cache, slots), iters),
                   nbytes=nbytes)

        def index_copy():
            k_cache.view(-1, row).index_copy_(0, slots, key.view(T, row))
            v_cache.view(-1, row).index_copy_(0, slots, value.view(T, row))

        record("KVCacheWriteFwdOp", case, "torch-index_copy", time_median_us(index_copy, iters),
               nbytes=nbytes)
        if vllm is not None and hasattr(vllm, "reshape_and_cache_flash"):
            scale = torch.ones(1, dtype=torch.float32, device="cuda")
            record("KVCacheWriteFwdOp", case, "vllm",
                   time_median_us(lambda: vllm.reshape_and_cache_flash(
                       key, value, k_cache, v_cache, slots, "auto", scale, scale), iters),
                   nbytes=nbytes)


def merge_eager(out_a, lse_a, out_b, lse_b):
    m = torch.maximum(lse_a, lse_b)
    safe = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    wa = torch.exp(lse_a - safe)
    wb = torch.exp(lse_b - safe)
    s = wa + wb
    lse = torch.where(s > 0, safe + torch.log(s), m)
    fa = torch.where(s > 0, wa / s, torch.zeros_like(s)).transpose(0, 1)[..., None]
    fb = torch.where(s > 0, wb / s, torch.zeros_like(s)).transpose(0, 1)[..., None]
    return (out_a.float() * fa + out_b.float() * fb).to(out_a.dtype), lse


def bench_merge(tileops, iters, record):
    for label, T, H, D in MERGE:
        dtype = torch.bfloat16
        case = f"{label}-bfloat16"
        out_a = torch.randn(T, H, D, dtype=dtype, device="cuda")
        out_b = torch.randn(T, H, D, dtype=dtype, device="cuda")
        lse_a = torch.randn(H, T, device="cuda") + 8
        lse_b = torch.randn(H, T, device="cuda") + 8
        nbytes = 3 * out_a.numel() * out_a.element_size() + 3 * lse_a.numel() * 4
        if tileops is not None:
            op = tileops.AttentionMergeStatesFwdOp()
            fn = torch.ops.tileops.attention_merge_states_fwd.default
            okey = op.instance_key
            record("AttentionMergeStatesFwdOp", case, "tileops",
                   time_median_us(lambda: fn(okey, out_a, lse_a, out_b, lse_b), iters),
                   nbytes=nbytes)
        record("AttentionMergeStatesFwdOp", case, "torch-eager",
               time_median_us(lambda: merge_eager(out_a, lse_a, out_b, lse_b), iters), nbytes=nbytes)
        compiled = compile_static(merge_eager)
        record("AttentionMergeStatesFwdOp", case, "torch.compile",
               time_median_us(lambda: compiled(out_a, lse_a, out_b, lse_b), iters), nbytes=nbytes)
        try:
            from vllm.attention.ops.merge_attn_states import merge_attn_states

            merged = torch.empty_like(out_a)
            merged_lse = torch.empty_like(lse_a)
            record("AttentionMergeStatesFwdOp", case, "vllm",
                   time_median_us(lambda: merge_attn_states(merged, out_a, lse_a, out_b, lse_b,
                                                            merged_lse), iters), nbytes=nbytes)
        except Exception:  # noqa: BLE001 (vllm not installed)
            pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--csv", default=os.path.join(os.environ.get("OUT", "."), "peers_attention.csv"))
    ap.add_argument("--only", choices=["varlen", "write", "merge"])
    args = ap.parse_args()
    torch.manual_seed(0)
    rows = []

    def record(op, case, peer, us, flops=0.0, nbytes=0.0, note=""):
        tflops = flops / (us * 1e-6) / 1e12 if flops else 0.0
        tbps = nbytes / (us * 1e-6) / 1e12 if nbytes else 0.0
        rows.append((op, case, peer, us, tflops, tbps))
        rate = f"{tflops:8.1f} TFLOP/s" if flops else f"{tbps:7.3f} TB/s"
        print(f"{op:34s} {case:34s} {peer:26s} {us:11.2f} us {rate}  {note}", flush=True)

    tileops = tileops_module()
    print(f"# {torch.cuda.get_device_name()} torch {torch.__version__} "
          f"cudnn {torch.backends.cudnn.version()}", flush=True)
    if args.only in (None, "varlen"):
        bench_varlen(tileops, args.iters, record)
    if args.only in (None, "write"):
        bench_write(tileops, args.iters, record)
    if args.only in (None, "merge"):
        bench_merge(tileops, args.iters, record)
    with open(args.csv, "w") as f:
        f.write(f"# gpu={torch.cuda.get_device_name()} torch={torch.__version__} "
                f"cudnn={torch.backends.cudnn.version()}\n")
        f.write("op,case,peer,median_us,tflop_per_s,tb_per_s\n")
        for op, case, peer, us, tflops, tbps in rows:
            f.write(f"{op},{case},{peer},{us:.3f},{tflops:.2f},{tbps:.4f}\n")
    print(f"wrote {args.csv}")


if __name__ == "__main__":
    sys.exit(main())
