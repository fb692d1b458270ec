#!/usr/bin/env python3
"""Checks and times the CUDA varlen attention kernel against a float64 reference and its peers.

The kernel is called through capi.cpp (built by build.sh into a shared library, loaded here with
ctypes) on PyTorch tensors, so the peers run in the same process: torch SDPA with the cuDNN and
the flash backends on the padded batch ([B, H, S, D]) and flex_attention under torch.compile.

Phases (each its own process, so a hang or a crash costs one phase only):
  check  random cases (head dims 64 / 128 / 256, bf16 / fp16, causal or not, window, softcap,
         GQA 1 / 4 / 8, chunked prefill, empty sequences, rows that see no key, negative scale)
         against a float64 reference computed with torch on the GPU from the same inputs; outputs
         and lse poisoned with NaN first, so unwritten elements fail.
  time   the issue's cases (bf16, 32 query / 8 KV heads): ours (configurations) and SDPA peers.
  flex   flex_attention under torch.compile on the same cases.
Timing: CUDA events around each call, a 1 GiB memset before each (L2 flush), median of --iters.
TFLOP/s = 4 * D * heads_q * (visible query-key pairs) / time.

Usage: python3 bench/attention_varlen/bench.py --lib LIB.so --phase check|time|flex [--iters N]
"""
import argparse
import ctypes
import math
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

LOG2E = 1.4426950408889634


class Kernel:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        f = self.lib.tileops_attention_varlen
        c = ctypes
        f.argtypes = [c.c_void_p] * 5 + [c.c_void_p, c.c_void_p] + [c.c_int64] * 6 + [
            c.c_int, c.c_float, c.c_int, c.c_int64, c.c_float, c.c_int, c.c_int, c.c_int, c.c_int,
            c.c_void_p, c.c_void_p, c.c_char_p, c.c_int]
        f.restype = c.c_int
        self.f = f
        self.err = ctypes.create_string_buffer(1024)
        self.workspace = None

    def __call__(self, q, k, v, cu_q, cu_k, out, lse, causal, window=-1, softcap=0.0, scale=None,
                 block_n=0, stages=0, pingpong=-1, blocks=0, dynamic=True):
        tq, hq, d = q.shape
        tk, hkv, _ = k.shape
        if scale is None:
            scale = 1.0 / math.sqrt(d)
        if self.workspace is None:
            self.workspace = torch.full((4,), -7, dtype=torch.int32, device=q.device)
        ws = self.workspace.data_ptr() if dynamic else None
        rc = self.f(q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), lse.data_ptr(),
                    cu_q.data_ptr(), cu_k.data_ptr(), tq, tk, cu_q.numel() - 1, hq, hkv, d,
                    1 if q.dtype == torch.float16 else 0, scale, 1 if causal else 0, window,
                    softcap, block_n, stages, pingpong, blocks, ws,
                    torch.cuda.current_stream().cuda_stream, self.err, 1024)
        if rc != 0:
            raise RuntimeError(self.err.value.decode())


def visible_mask(sq, sk, causal, window, device):
    i = torch.arange(sq, device=device).view(-1, 1)
    j = torch.arange(sk, device=device).view(1, -1)
    m = torch.ones(sq, sk, dtype=torch.bool, device=device)
    if causal:
        m &= j <= i + sk - sq
    if window >= 0:
        m &= j >= i + sk - sq - window
    return m


def reference(q, k, v, lq, lk, causal, window, softcap, scale):
    """float64 out [Tq, Hq, D] and lse [Hq, Tq] from the same (rounded) inputs."""
    tq, hq, d = q.shape
    g = hq // k.shape[1]
    out = torch.zeros(tq, hq, d, dtype=torch.float64, device=q.device)
    lse = torch.full((hq, tq), -math.inf, dtype=torch.float64, device=q.device)
    q0 = k0 = 0
    for sq, sk in zip(lq, lk):
        if sq > 0 and sk > 0:
            qb = q[q0:q0 + sq].double().transpose(0, 1)  # [H, sq, D]
            kb = k[k0:k0 + sk].double().transpose(0, 1).repeat_interleave(g, 0)
            vb = v[k0:k0 + sk].double().transpose(0, 1).repeat_interleave(g, 0)
            s = torch.matmul(qb, kb.transpose(1, 2)) * scale
            if softcap > 0:
                s = softcap * torch.tanh(s / softcap)
            m = visible_mask(sq, sk, causal, window, q.device)
            s = s.masked_fill(~m, -math.inf)
            l = torch.logsumexp(s, dim=-1)  # -inf where no key
            p = torch.exp(s - l.unsqueeze(-1).clamp(min=-1e300))
            p = torch.nan_to_num(p, nan=0.0)
            out[q0:q0 + sq] = torch.matmul(p, vb).transpose(0, 1)
            lse[:, q0:q0 + sq] = l
        q0 += sq
        k0 += sk
    return out, lse


def cu(lengths, device):
    c = [0]
    for n in lengths:
        c.append(c[-1] + n)
    return torch.tensor(c, dtype=torch.int32, device=device)


def check_case(kern, name, d, dtype, hq, hkv, lq, lk, causal, window=-1, softcap=0.0, scale=None,
               qmul=1.0, **cfg):
    dev = "cuda"
    tq, tk = sum(lq), sum(lk)
    q = (torch.randn(tq, hq, d, device=dev) * qmul).to(dtype)
    k = torch.randn(tk, hkv, d, device=dev).to(dtype)
    v = torch.randn(tk, hkv, d, device=dev).to(dtype)
    out = torch.full((tq, hq, d), float("nan"), device=dev, dtype=dtype)
    lse = torch.full((hq, tq), float("nan"), device=dev, dtype=torch.float32)
    sc = 1.0 / math.sqrt(d) if scale is None else scale
    kern(q, k, v, cu(lq, dev), cu(lk, dev), out, lse, causal, window, softcap, sc, **cfg)
    torch.cuda.synchronize()
    ro, rl = reference(q, k, v, lq, lk, causal, window, softcap, sc)
    o = out.double()
    unwritten = int(torch.isnan(o).any(dim=-1).sum().item()) + int(torch.isnan(lse).sum().item())
    # Per element: P in the dtype (relative rounding u) and out rounded to the dtype give
    # |out - ref| <= 2 u (max |v| + |ref|); fp32 accumulation adds far less.
    u = 2.0 ** -8 if dtype == torch.bfloat16 else 2.0 ** -11
    vmax = float(v.double().abs().max().item()) if tk > 0 else 0.0
    err = (o - ro).abs()
    bound = 2 * u * (vmax + ro.abs()) + 1e-6
    over = int((err > bound).sum().item())
    norm_rel = float(((o - ro).norm() / ro.norm().clamp(min=1e-30)).item()) if tq else 0.0
    fin = torch.isfinite(rl)
    inf_ok = bool(torch.equal(torch.isneginf(lse.double()), torch.isneginf(rl)))
    lse_err = float(((lse.double() - rl).abs() / (1 + rl.abs()))[fin].max().item()) if fin.any() else 0.0
    zero_ok = bool((o[(~fin).transpose(0, 1)] == 0).all().item()) if (~fin).any() else True
    ok = unwritten == 0 and over == 0 and inf_ok and zero_ok and lse_err < 1e-4 and \
        norm_rel < (1e-2 if dtype == torch.bfloat16 else 2e-3)
    print(f"{'PASS' if ok else 'FAIL'} {name} D{d} {str(dtype)[6:]} hq{hq}/hkv{hkv} lq={lq} lk={lk} "
          f"causal={int(causal)} win={window} cap={softcap} scale={sc:.4g} {cfg} | max_abs="
          f"{float(err.max().item()) if tq else 0:.3e} over_bound={over} norm_rel={norm_rel:.2e} "
          f"lse_rel={lse_err:.2e} neginf_match={inf_ok} zero_rows_ok={zero_ok} unwritten={unwritten}",
          flush=True)
    return ok


def phase_check(kern, quick=False):
    torch.manual_seed(1234)
    results = []
    dims = [64, 128, 256]
    dtypes = [torch.bfloat16, torch.float16]
    for d in dims:
        for dt in dtypes:
            cases = [
                ("causal-varlen-gqa4", 32, 8, [1, 127, 128, 129, 300, 777], None, True, {}),
                ("noncausal-empty-gqa8", 16, 2, [0, 200, 65, 0, 513], [37, 0, 300, 5, 600], False,
                 {}),
                ("chunked-causal", 8, 2, [512, 100, 1, 0], [1024, 700, 33, 9], True, {}),
                ("causal-sq>sk-norows", 4, 4, [300, 64], [100, 1], True, {}),
                ("window-causal", 8, 1, [400, 129], [400, 1000], True, {"window": 50}),
                ("window0-noncausal", 8, 8, [257], [300], False, {"window": 0}),
                ("softcap-causal", 8, 2, [333, 64], [333, 500], True, {"softcap": 30.0, "qmul": 4.0}),
                ("negscale-noncausal", 4, 1, [150], [170], False, {"scale": -0.09}),
                ("sk0", 4, 2, [70, 3], [0, 0], True, {}),
                ("peaky-gqa1", 4, 4, [640], [640], True, {"qmul": 6.0}),
            ]
            for name, hq, hkv, lq, lk, causal, extra in cases:
                extra = dict(extra)
                try:
                    results.append(check_case(kern, name, d, dt, hq, hkv, lq, lk if lk else lq,
                                              causal, **extra))
                except Exception as e:  # noqa: BLE001
                    print(f"FAIL {name} D{d} {dt}: {e}", flush=True)
                    results.append(False)
    # Every configuration of the launch (ping-pong off, both key blocks of D 256, few blocks).
    for d, cfgs in ((128, [{"pingpong": 0}, {"blocks": 7}, {"dynamic": False},
                           {"dynamic": False, "blocks": 5}]),
                    (256, [{"block_n": 64}, {"block_n": 64, "pingpong": 0}, {"dynamic": False}]),
                    (64, [{"pingpong": 0}, {"dynamic": False}, {"stages": 3}])):
        for cfg in cfgs:
            results.append(check_case(kern, "config", d, torch.bfloat16, 16, 4,
                                      [1000, 31, 2048], [1000, 31, 2048], True, **cfg))
            results.append(check_case(kern, "config-nc", d, torch.float16, 16, 4,
                                      [300, 0, 129], [900, 3, 129], False, **cfg))
    # A long causal sequence (many key blocks, the snake order over many tiles).
    results.append(check_case(kern, "long-causal", 128, torch.bfloat16, 32, 8, [4096, 4096],
                              [4096, 4096], True))
    n_ok = sum(1 for r in results if r)
    print(f"check: {n_ok} / {len(results)} passed", flush=True)
    return n_ok == len(results)


# ---------------------------------------------------------------------------------------------
# Timing

CASES = [  # (label, D, batch, sq, sk, causal)
    ("causal 4x4096 D128", 128, 4, 4096, 4096, True),
    ("noncausal 4x4096 D128", 128, 4, 4096, 4096, False),
    ("causal 1x16384 D128", 128, 1, 16384, 16384, True),
    ("chunked q512/kv4096 b8 causal D128", 128, 8, 512, 4096, True),
    ("chunked q512/kv4096 b8 noncausal D128", 128, 8, 512, 4096, False),
    ("causal 4x4096 D64", 64, 4, 4096, 4096, True),
    ("noncausal 4x4096 D64", 64, 4, 4096, 4096, False),
    ("causal 4x4096 D256", 256, 4, 4096, 4096, True),
    ("noncausal 4x4096 D256", 256, 4, 4096, 4096, False),
]
HQ, HKV = 32, 8


def pairs(sq, sk, causal):
    if not causal:
        return sq * sk
    # query i sees keys j <= i + sk - sq (bottom-right)
    tot = 0
    off = sk - sq
    # sum over i of clamp(i + off + 1, 0, sk)
    for i in range(sq):
        tot += max(0, min(sk, i + off + 1))
    return tot


class Flusher:
    def __init__(self):
        self.buf = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
        try:
            import cupy

            self.memset = lambda: cupy.cuda.runtime.memsetAsync(
                self.buf.data_ptr(), 0, self.buf.numel(), torch.cuda.current_stream().cuda_stream)
            self.memset()
            self.kind = "cudaMemsetAsync (cupy)"
        except Exception:  # noqa: BLE001
            self.memset = lambda: self.buf.zero_()
            self.kind = "torch zero_"


def time_fn(fn, flusher, iters):
    fn()
    torch.cuda.synchronize()
    times = []
    s = torch.cuda.Event(enable_timing=True)
    e = torch.cuda.Event(enable_timing=True)
    for _ in range(iters):
        flusher.memset()
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return statistics.median(times), min(times), max(times)


def make_inputs(d, b, sq, sk):
    torch.manual_seed(7)
    q = torch.randn(b * sq, HQ, d, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(b * sk, HKV, d, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(b * sk, HKV, d, device="cuda", dtype=torch.bfloat16)
    return q, k, v


def phase_time(kern, iters, ours_only=False):
    fl = Flusher()
    print(f"flush: 1 GiB {fl.kind}; iters {iters}; median", flush=True)
    rows = []
    for label, d, b, sq, sk, causal in CASES:
        q, k, v = make_inputs(d, b, sq, sk)
        cq, ck = cu([sq] * b, "cuda"), cu([sk] * b, "cuda")
        out = torch.empty_like(q)
        lse = torch.empty(HQ, b * sq, device="cuda")
        flops = 4.0 * d * HQ * b * pairs(sq, sk, causal)
        res = {}
        cfgs = [("ours", {}), ("ours pp=0", {"pingpong": 0}), ("ours static", {"dynamic": False})]
        if d == 256:
            cfgs.append(("ours bn64", {"block_n": 64}))
        if d == 64:
            cfgs.append(("ours s3", {"stages": 3}))
        for name, cfg in cfgs:
            try:
                t = time_fn(lambda: kern(q, k, v, cq, ck, out, lse, causal, **cfg), fl, iters)
                res[name] = t[0]
            except Exception as e:  # noqa: BLE001
                print(f"  {label} {name}: {e}", flush=True)
        if not ours_only:
            qp = q.view(b, sq, HQ, d).transpose(1, 2).contiguous()
            kp = k.view(b, sk, HKV, d).transpose(1, 2).contiguous()
            vp = v.view(b, sk, HKV, d).transpose(1, 2).contiguous()
            from torch.nn.attention import SDPBackend, sdpa_kernel

            mask_kind = "causal" if causal else "none"
            attn_mask = None
            is_causal = causal
            if causal and sq != sk:
                from torch.nn.attention.bias import causal_lower_right

                attn_mask = causal_lower_right(sq, sk)
                is_causal = False
                mask_kind = "causal_lower_right"
            for name, be in (("cudnn", SDPBackend.CUDNN_ATTENTION),
                             ("flash", SDPBackend.FLASH_ATTENTION)):
                for gqa in (True, False):
                    try:
                        kk = kp if gqa else kp.repeat_interleave(HQ // HKV, 1)
                        vv = vp if gqa else vp.repeat_interleave(HQ // HKV, 1)

                        def run(kk=kk, vv=vv, be=be, gqa=gqa):
                            with sdpa_kernel([be]):
                                return F.scaled_dot_product_attention(
                                    qp, kk, vv, attn_mask=attn_mask, is_causal=is_causal,
                                    enable_gqa=gqa)

                        t = time_fn(run, fl, iters)
                        res[f"sdpa-{name}"] = t[0]
                        if not gqa:
                            res[f"sdpa-{name}"] = t[0]
                            print(f"  {label} sdpa-{name}: K/V expanded (no GQA)", flush=True)
                        break
                    except Exception as e:  # noqa: BLE001
                        print(f"  {label} sdpa-{name} gqa={gqa} ({mask_kind}): "
                              f"{str(e).splitlines()[0][:160]}", flush=True)
        line = f"{label:40s} " + " ".join(
            f"{n}={ms:.3f}ms/{flops / ms / 1e9:.0f}TF" for n, ms in res.items())
        print(line, flush=True)
        rows.append((label, flops, res))
        del q, k, v, out, lse
        torch.cuda.empty_cache()
    # Varlen (ours only: the peers would need padding): causal, six lengths summing to 16384.
    lens = [4096, 2048, 1024, 512, 6144, 2560]
    tq = sum(lens)
    torch.manual_seed(9)
    q = torch.randn(tq, HQ, 128, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(tq, HKV, 128, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(tq, HKV, 128, device="cuda", dtype=torch.bfloat16)
    cq = cu(lens, "cuda")
    out = torch.empty_like(q)
    lse = torch.empty(HQ, tq, device="cuda")
    flops = 4.0 * 128 * HQ * sum(pairs(n, n, True) for n in lens)
    res = {}
    for name, cfg in (("ours", {}), ("ours static", {"dynamic": False})):
        t = time_fn(lambda: kern(q, k, v, cq, cq, out, lse, True, **cfg), fl, iters)
        res[name] = t[0]
    print(f"{'causal varlen 6 seqs (16384) D128':40s} " + " ".join(
        f"{n}={ms:.3f}ms/{flops / ms / 1e9:.0f}TF" for n, ms in res.items()), flush=True)
    return rows


def phase_flex(iters):
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    import torch._dynamo

    torch._dynamo.config.cache_size_limit = 64  # one compile per case, never the eager fallback
    if hasattr(torch._dynamo.config, "recompile_limit"):
        torch._dynamo.config.recompile_limit = 64
    fl = Flusher()
    compiled = torch.compile(flex_attention, dynamic=False)
    for label, d, b, sq, sk, causal in CASES:
        try:
            q, k, v = make_inputs(d, b, sq, sk)
            qp = q.view(b, sq, HQ, d).transpose(1, 2).contiguous()
            kp = k.view(b, sk, HKV, d).transpose(1, 2).contiguous()
            vp = v.view(b, sk, HKV, d).transpose(1, 2).contiguous()
            off = sk - sq
            if causal:
                def mm(bb, hh, qi, kj):
                    return kj <= qi + off
                bm = create_block_mask(mm, None, None, sq, sk, device="cuda")
            else:
                bm = None
            flops = 4.0 * d * HQ * b * pairs(sq, sk, causal)
            t0 = time.time()
            t = time_fn(lambda: compiled(qp, kp, vp, block_mask=bm, enable_gqa=True), fl, iters)
            print(f"{label:40s} flex={t[0]:.3f}ms/{flops / t[0] / 1e9:.0f}TF "
                  f"(compile+run {time.time() - t0:.0f}s)", flush=True)
        except Exception as e:  # noqa: BLE001
            print(f"{label:40s} flex failed: {str(e).splitlines()[0][:200]}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--phase", required=True,
                    choices=["check", "check-small", "time", "time-ours", "flex"])
    ap.add_argument("--iters", type=int, default=20)
    a = ap.parse_args()
    print(f"torch {torch.__version__} cudnn {torch.backends.cudnn.version()} "
          f"gpu {torch.cuda.get_device_name()}", flush=True)
    if a.phase == "flex":
        phase_flex(a.iters)
        return 0
    kern = Kernel(a.lib)
    if a.phase == "check":
        return 0 if phase_check(kern) else 1
    if a.phase == "check-small":  # for compute-sanitizer: few, small launches
        ok = check_case(kern, "small", 128, torch.bfloat16, 8, 2, [130, 0, 7], [200, 5, 7], True,
                        window=60)
        ok &= check_case(kern, "small", 64, torch.float16, 4, 4, [70], [300], False, softcap=20.0)
        ok &= check_case(kern, "small", 256, torch.bfloat16, 4, 1, [129], [129], True)
        return 0 if ok else 1
    phase_time(kern, a.iters, ours_only=a.phase == "time-ours")
    return 0


if __name__ == "__main__":
    sys.exit(main())
