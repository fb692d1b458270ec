#!/usr/bin/env python3
"""PyTorch peers of the MoE kernels, on the shapes of bench/bench_moe_kernels.cpp.

Grouped GEMM (bf16): torch._grouped_mm(A [M, K], W.transpose(-2, -1) [E, K, N],
offs = cumulative int32 row counts [E]); for the gated shapes also "grouped_mm+silu_and_mul"
(the GEMM then silu(gate) * up in eager PyTorch, the unfused peer of our fused epilogue).
Pre-permute, post-permute and top-k routing: eager PyTorch expressions of the same semantics.

FP8 grouped GEMM ("fp8_gemm", the shapes of MoEGroupedGemmFP8FwdOp's workloads):
torch._scaled_grouped_mm(A e4m3 [M, K], W.transpose(-2, -1) e4m3 [E, K, N], scale_a [M],
scale_b [E, N], offs, out_dtype=bfloat16). Its scales are row-wise -- one per row of A and one
per weight row, over the whole K -- where ours are per 128-element K block (1 x 128 activation,
128 x 128 weight blocks), so it is the same data movement and MMA work with a simpler epilogue
(one scaling of the fp32 result), not the same arithmetic. TFLOP/s = 2 M N K / time.

Timing as the C++ benchmark: CUDA events around each call, the L2 flushed before each one by
writing a 256 MB buffer, the median over the iterations (after 3 warm-up calls). GEMMs report
TFLOP/s = 2 M N K / time (N: all B rows); the others GB/s over the same byte counts as the C++
benchmark. Writes a table (stdout) and a CSV ($OUT/peers_moe.csv, or --csv).

Whole layer ("layer"): the eager PyTorch expression of FusedMoEFwdOp -- routing, the pre-permute
above, torch._grouped_mm for gate_up, silu(gate) * up, torch._grouped_mm for down, the
post-permute above -- on the manifest's FusedMoEFwdOp workloads; TFLOP/s = 6 T K H F / time and
the expert weights' bytes / time.

Usage: python3 bench/peers_moe.py [--iters N] [--csv PATH] [--only gemm|fp8_gemm|permute|routing|layer]
"""
import argparse
import os
import statistics
import sys

FP8_GEMM = [  # (label, E, rows per expert, N, K) -- MoEGroupedGemmFP8FwdOp's DeepSeek-V3 workloads
    ("dsv3-fp8-gate-up-4k", 256, 16, 4096, 7168),
    ("dsv3-fp8-down-4k", 256, 16, 7168, 2048),
    ("dsv3-fp8-gate-up-32k", 256, 128, 4096, 7168),
    ("dsv3-fp8-down-32k", 256, 128, 7168, 2048),
]
GEMM = [  # (label, E, rows per expert, N, K, gated) -- as bench_moe_kernels.cpp
    ("e256_r1024_n4096_k6144", 256, 1024, 4096, 6144, False),
    ("e128_r1024_n16384_k5120", 128, 1024, 16384, 5120, False),
    ("dsv3_gate_up_r16_n4096_k7168_silu", 256, 16, 4096, 7168, True),
    ("dsv3_down_r16_n7168_k2048", 256, 16, 7168, 2048, False),
    ("dsv3_gate_up_r128_n4096_k7168_silu", 256, 128, 4096, 7168, True),
    ("dsv3_down_r128_n7168_k2048", 256, 128, 7168, 2048, False),
    ("qwen3_30b_gate_up_r256_n1536_k2048_silu", 128, 256, 1536, 2048, True),
    ("qwen3_30b_down_r256_n2048_k768", 128, 256, 2048, 768, False),
]
PERM = [  # (label, T, K, E, H)
    ("dsv3_t4096_k8_e256_h7168", 4096, 8, 256, 7168),
    ("dsv3_t512_k8_e256_h7168", 512, 8, 256, 7168),
    ("qwen3_30b_t4096_k8_e128_h2048", 4096, 8, 128, 2048),
]
ROUTE = [  # (label, T, E, K, scoring, bias, renormalize, scaling, logits dtype)
    ("dsv3_t4096_e256_k8_sigmoid_bias", 4096, 256, 8, "sigmoid", True, True, 2.5, "float32"),
    ("qwen3_30b_t4096_e128_k8_softmax", 4096, 128, 8, "softmax", False, True, 1.0, "bfloat16"),
    ("dsv3_t64_e256_k8_sigmoid_bias", 64, 256, 8, "sigmoid", True, True, 2.5, "float32"),
]

LAYER = [  # (label, T, E, K, H, F, scoring, bias, renormalize, scaling, logits dtype)
    ("dsv3-512t", 512, 256, 8, 7168, 2048, "sigmoid", True, True, 2.5, "float32"),
    ("dsv3-4096t", 4096, 256, 8, 7168, 2048, "sigmoid", True, True, 2.5, "float32"),
    ("qwen3-30b-4096t", 4096, 128, 8, 2048, 768, "softmax", False, True, 1.0, "bfloat16"),
    ("qwen3-30b-64t", 64, 128, 8, 2048, 768, "softmax", False, True, 1.0, "bfloat16"),
]

FLUSH_BYTES = 256 * 1024 * 1024


class Timer:
    def __init__(self, torch):
        self.torch = torch
        self.flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda")

    def median_us(self, fn, iters):
        torch = self.torch
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        times = []
        for i in range(iters):
            self.flush.fill_(i & 1)
            start = torch.cuda.Event(enable_timing=True)
            stop = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop) * 1000.0)
        return statistics.median(times)


def spread_ids(torch, T, K, E):
    t = torch.arange(T, device="cuda")[:, None]
    k = torch.arange(K, device="cuda")[None, :]
    return ((t * 7 + k * (E // K)) % E).to(torch.int32)


def pre_permute_eager(torch, x, topk_ids, E):
    T, K = topk_ids.shape
    flat = topk_ids.reshape(-1).long()
    order = torch.argsort(flat, stable=True)
    permuted = x.index_select(0, order // K)
    counts = torch.bincount(flat, minlength=E)
    offsets = torch.zeros(E + 1, dtype=torch.int32, device=x.device)
    offsets[1:] = torch.cumsum(counts, 0)
    inverse = torch.empty_like(flat, dtype=torch.int32)
    inverse[order] = torch.arange(flat.numel(), device=x.device, dtype=torch.int32)
    return permuted, offsets, inverse.view(T, K)


def post_permute_eager(torch, expert_out, weights, inverse):
    gathered = expert_out.index_select(0, inverse.reshape(-1).long()).view(*inverse.shape, -1)
    return (gathered.float() * weights[..., None]).sum(1).to(expert_out.dtype)


def routing_eager(torch, logits, bias, K, scoring, renormalize, scaling):
    lf = logits.float()
    s = torch.softmax(lf, -1) if scoring == "softmax" else torch.sigmoid(lf)
    c = s + bias if bias is not None else s
    _, ids = torch.topk(c, K, dim=-1)
    w = s.gather(-1, ids)
    if renormalize:
        w = w / w.sum(-1, keepdim=True)
    return w * scaling, ids.to(torch.int32)


def moe_layer_eager(torch, x, logits, bias, w13t, w2t, K, scoring, renormalize, scaling):
    w, ids = routing_eager(torch, logits, bias, K, scoring, renormalize, scaling)
    xp, offsets, inverse = pre_permute_eager(torch, x, ids, w13t.shape[0])
    h = torch._grouped_mm(xp, w13t, offs=offsets[1:])
    f = h.shape[1] // 2
    a = torch.nn.functional.silu(h[:, :f]) * h[:, f:]
    y = torch._grouped_mm(a, w2t, offs=offsets[1:])
    return post_permute_eager(torch, y, w, inverse)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=0, help="default: 21 for GEMMs over 10 TFLOP, else 51")
    ap.add_argument("--csv", default=os.path.join(os.environ.get("OUT", "."), "peers_moe.csv"))
    ap.add_argument("--only", choices=["gemm", "fp8_gemm", "permute", "routing", "layer"],
                    default=None)
    args = ap.parse_args()
    try:
        import torch
    except Exception as e:  # torch missing or broken
        print(f"peers_moe.py: PyTorch is not importable ({e}); nothing to measure")
        return 0
    if not torch.cuda.is_available():
        print("peers_moe.py: no CUDA device visible to PyTorch; nothing to measure")
        return 0
    torch.manual_seed(0)
    timer = Timer(torch)
    dev = torch.cuda.get_device_name()
    rows = []

    def record(op, case, peer, us, tflops=None, gbps=None):
        rows.append((op, case, peer, us, tflops, gbps))
        rate = f"{tflops:8.1f} TFLOP/s" if tflops is not None else f"{gbps:8.1f} GB/s"
        print(f"{op:18s} {case:42s} {peer:26s} {us:12.2f} us {rate}", flush=True)

    print(f"# {dev}, torch {torch.__version__}")
    if args.only in (None, "gemm"):
        if not hasattr(torch, "_grouped_mm"):
            print("peers_moe.py: torch._grouped_mm is missing in this PyTorch; GEMM peers skipped")
        else:
            for label, E, r, N, K, gated in GEMM:
                M = E * r
                flops = 2.0 * M * N * K
                iters = args.iters or (21 if flops > 1e13 else 51)
                a = torch.randn(M, K, dtype=torch.bfloat16, device="cuda")
                w = torch.randn(E, N, K, dtype=torch.bfloat16, device="cuda")
                b = w.transpose(-2, -1)  # [E, K, N] view of the [E, N, K] weights
                offs = torch.arange(1, E + 1, dtype=torch.int32, device="cuda") * r

                def gemm():
                    return torch._grouped_mm(a, b, offs=offs)

                us = timer.median_us(gemm, iters)
                record("grouped_gemm", label, "torch._grouped_mm", us, tflops=flops / (us * 1e-6) / 1e12)
                if gated:
                    half = N // 2

                    def gemm_act():
                        y = torch._grouped_mm(a, b, offs=offs)
                        return torch.nn.functional.silu(y[:, :half]) * y[:, half:]

                    us = timer.median_us(gemm_act, iters)
                    record("grouped_gemm", label, "grouped_mm+silu_and_mul", us,
                           tflops=flops / (us * 1e-6) / 1e12)
                del a, w, b, offs
                torch.cuda.empty_cache()
    if args.only in (None, "fp8_gemm"):
        if not hasattr(torch, "_scaled_grouped_mm"):
            print("peers_moe.py: torch._scaled_grouped_mm is missing in this PyTorch; FP8 peers skipped")
        else:
            for label, E, r, N, K in FP8_GEMM:
                M = E * r
                flops = 2.0 * M * N * K
                iters = args.iters or 21
                try:
                    a = (torch.rand(M, K, device="cuda") * 4 - 2).to(torch.float8_e4m3fn)
                    w = (torch.rand(E, N, K, device="cuda") * 4 - 2).to(torch.float8_e4m3fn)
                    b = w.transpose(-2, -1)  # [E, K, N], column-major as the op requires
                    scale_a = torch.rand(M, device="cuda") * 0.5 + 0.5
                    scale_b = (torch.rand(E, N, device="cuda") * 0.5 + 0.5) / K**0.5
                    offs = torch.arange(1, E + 1, dtype=torch.int32, device="cuda") * r

                    def fp8_gemm():
                        return torch._scaled_grouped_mm(a, b, scale_a, scale_b, offs=offs,
                                                        out_dtype=torch.bfloat16)

                    us = timer.median_us(fp8_gemm, iters)
                    record("grouped_gemm_fp8", label, "torch._scaled_grouped_mm", us,
                           tflops=flops / (us * 1e-6) / 1e12)
                except Exception as e:  # a PyTorch without the row-wise FP8 grouped kernel
                    print(f"peers_moe.py: torch._scaled_grouped_mm failed on {label}: {e}")
                    break
                finally:
                    a = w = b = scale_a = scale_b = offs = None
                    torch.cuda.empty_cache()
    if args.only in (None, "permute"):
        iters = args.iters or 51
        for label, T, K, E, H in PERM:
            x = torch.randn(T, H, dtype=torch.bfloat16, device="cuda")
            ids = spread_ids(torch, T, K, E)
            nbytes = T * H * 2 + T * K * H * 2 + T * K * 8
            us = timer.median_us(lambda: pre_permute_eager(torch, x, ids, E), iters)
            record("moe_pre_permute", label, "torch-eager", us, gbps=nbytes / (us * 1e-6) / 1e9)
            eo = torch.randn(T * K, H, dtype=torch.bfloat16, device="cuda")
            wts = torch.rand(T, K, dtype=torch.float32, device="cuda")
            n = T * K
            inv = ((torch.arange(n, device="cuda", dtype=torch.int64) * 2654435761) % n).to(torch.int32).view(T, K)
            nbytes = T * K * H * 2 + T * H * 2 + T * K * 8
            us = timer.median_us(lambda: post_permute_eager(torch, eo, wts, inv), iters)
            record("moe_post_permute", label, "torch-eager", us, gbps=nbytes / (us * 1e-6) / 1e9)
            del x, ids, eo, wts, inv
            torch.cuda.empty_cache()
    if args.only in (None, "routing"):
        iters = args.iters or 51
        for label, T, E, K, scoring, has_bias, renorm, scaling, dt in ROUTE:
            logits = torch.randn(T, E, dtype=getattr(torch, dt), device="cuda")
            bias = torch.rand(E, dtype=torch.float32, device="cuda") * 0.1 if has_bias else None
            nbytes = T * E * logits.element_size() + T * K * 8
            us = timer.median_us(lambda: routing_eager(torch, logits, bias, K, scoring, renorm, scaling), iters)
            record("moe_topk_routing", label, "torch-eager", us, gbps=nbytes / (us * 1e-6) / 1e9)
    if args.only in (None, "layer") and hasattr(torch, "_grouped_mm"):
        iters = args.iters or 21
        for label, T, E, K, H, F, scoring, has_bias, renorm, scaling, dt in LAYER:
            x = torch.randn(T, H, dtype=torch.bfloat16, device="cuda")
            logits = torch.randn(T, E, dtype=getattr(torch, dt), device="cuda")
            bias = torch.rand(E, dtype=torch.float32, device="cuda") * 0.1 if has_bias else None
            w13 = torch.randn(E, 2 * F, H, dtype=torch.bfloat16, device="cuda") / H**0.5
            w2 = torch.randn(E, H, F, dtype=torch.bfloat16, device="cuda") / F**0.5
            w13t, w2t = w13.transpose(-2, -1), w2.transpose(-2, -1)
            us = timer.median_us(
                lambda: moe_layer_eager(torch, x, logits, bias, w13t, w2t, K, scoring, renorm, scaling),
                iters)
            flops = 6.0 * T * K * H * F
            weight_bytes = (w13.numel() + w2.numel()) * 2
            record("fused_moe_layer", label, "torch-eager+grouped_mm", us,
                   tflops=flops / (us * 1e-6) / 1e12)
            print(f"{'':18s} {label:42s} {'  (expert weights)':26s} {'':15s} "
                  f"{weight_bytes / (us * 1e-6) / 1e12:8.2f} TB/s", flush=True)
            del x, logits, bias, w13, w2, w13t, w2t
            torch.cuda.empty_cache()
    os.makedirs(os.path.dirname(os.path.abspath(args.csv)), exist_ok=True)
    with open(args.csv, "w") as f:
        f.write(f"# gpu={dev} torch={torch.__version__}\n")
        f.write("op,case,peer,median_us,tflop_per_s,gb_per_s\n")
        for op, case, peer, us, tflops, gbps in rows:
            tf = f"{tflops:.2f}" if tflops is not None else ""
            gb = f"{gbps:.2f}" if gbps is not None else ""
            f.write(f"{op},{case},{peer},{us:.3f},{tf},{gb}\n")
    print(f"wrote {args.csv}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
