#!/usr/bin/env python3
"""Peers of the norm and rope ops, timed the way `tileops bench --device cuda` times ours.

For every workload of manifest/norm.yaml and manifest/rope.yaml it times PyTorch eager and
torch.compile of the eager expression (and any other peer importable here: flashinfer,
liger_kernel) with CUDA events around each iteration, the L2 flushed before each one, and
reports the median. When the tileops Python package is importable, our op is timed the same way
from Python, through its custom operator (peer "tileops", torch.ops.tileops.*, allocating its
output as the others do), so that the Python-level comparison is one run with one statistic. Bytes are the manifest roofline bytes (each input read once, each output
written once, a mutated input read and written). Writes a table (stdout) and a CSV ($OUT or .).

The flush (--flush) is "fill" (torch's fill_, a kernel; the default) or "memset"
(cudaMemsetAsync through CuPy or the CUDA runtime), the two flushes of `tileops bench --flush
kernel|memset`. With "fill,memset" every compiled peer is timed after each flush, the second
named "<peer>@memset".

Usage: python3 bench/peers.py [--iters N] [--csv PATH] [--flush fill|memset|fill,memset]
"""
import argparse
import math
import os
import statistics
import sys
import time

import torch

NORM = [  # (label, rows, cols, dtypes)
    ("llama3-8b-prefill", 2048, 4096, ["bfloat16", "float16", "float32"]),
    ("llama3-8b-decode", 1, 4096, ["bfloat16"]),
    ("llama3-70b-prefill", 2048, 8192, ["bfloat16"]),
    ("llama3-70b-decode64", 64, 8192, ["bfloat16"]),
    ("llama3-405b-prefill", 2048, 16384, ["bfloat16", "float16"]),
    ("llama3-405b-decode", 1, 16384, ["bfloat16"]),
]
FUSED = [
    ("llama3-8b-prefill", 2048, 4096, ["bfloat16", "float16"]),
    ("llama3-8b-decode", 1, 4096, ["bfloat16"]),
    ("llama3-70b-prefill", 2048, 8192, ["bfloat16"]),
    ("llama3-405b-prefill", 2048, 16384, ["bfloat16"]),
    ("llama3-405b-decode", 1, 16384, ["bfloat16"]),
]
ROPE = [  # (label, B, S, H, R, positions, dtypes)
    ("rope-8k-h32-d128", 1, 8192, 32, 64, False, ["float16", "bfloat16"]),
    ("phi3-mini-8k", 1, 8192, 32, 48, False, ["bfloat16"]),
    ("phi3-mini-32k", 1, 32768, 32, 48, False, ["bfloat16"]),
    ("phi3-mini-decode32", 32, 1, 32, 48, True, ["bfloat16"]),
]

_flush = None
FLUSH = "fill"  # how flush_l2 overwrites the buffer: "fill" (a kernel) or "memset"
_memset = None


def _memset_async():
    """cudaMemsetAsync(ptr, value, bytes, stream): CuPy's binding, else the CUDA runtime that
    torch loaded, through ctypes."""
    try:
        import cupy

        return lambda ptr, value, n, stream: cupy.cuda.runtime.memsetAsync(ptr, value, n, stream)
    except Exception:
        import ctypes
        import glob

        names = ["libcudart.so.13", "libcudart.so.12", "libcudart.so"]
        names += glob.glob(os.path.join(os.path.dirname(torch.__file__), "..", "nvidia", "*", "lib",
                                        "libcudart.so*"))
        for name in names:
            try:
                rt = ctypes.CDLL(name)
            except OSError:
                continue
            fn = rt.cudaMemsetAsync
            fn.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t, ctypes.c_void_p]

            def call(ptr, value, n, stream):
                err = fn(ptr, value, n, stream)
                if err != 0:
                    raise RuntimeError(f"cudaMemsetAsync failed: error {err}")

            return call
        raise RuntimeError("no CUDA runtime found for the memset flush")


def flush_l2(i):
    """Overwrites max(2 x L2, 512 MiB) bytes, as tileops' own timer (src/perf/timing.cpp) does:
    long enough on the GPU for this process to enqueue the timed call behind it."""
    global _flush, _memset
    if _flush is None:
        l2 = torch.cuda.get_device_properties(0).L2_cache_size
        _flush = torch.empty(max(2 * l2, 512 << 20), dtype=torch.uint8, device="cuda")
    if FLUSH == "memset":
        if _memset is None:
            _memset = _memset_async()
        _memset(_flush.data_ptr(), i & 0xFF, _flush.numel(), torch.cuda.current_stream().cuda_stream)
    else:
        _flush.fill_(i & 0xFF)


def time_median_us(fn, iters, cool_s=0.0, before_flush=None):
    """Median of `iters` timed calls of fn, each after an L2 flush. The cooling gaps between
    calls that DeepGEMM's published figures had (bench/peers_deepgemm.py): cool_s > 0 leaves the
    GPU idle that long before each flush (the host sleeps after the previous call has finished);
    before_flush, when given, is enqueued before each flush (e.g. a long memory-bound fill)."""
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    times = []
    for i in range(iters):
        if cool_s > 0:
            time.sleep(cool_s)
        if before_flush is not None:
            before_flush()
        flush_l2(i)
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1000.0)
    return statistics.median(times)


def rms_norm_eager(x, w, eps=1e-6):
    xf = x.float()
    inv = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (xf * inv * w.float()).to(x.dtype)


def fused_add_rms_norm_eager(x, residual, w, eps=1e-6):
    r = (x.float() + residual.float()).to(x.dtype)
    residual.copy_(r)
    return rms_norm_eager(r, w, eps)


def long_rope_eager(x, cos, sin):
    half = x.shape[-1] // 2
    xf = x.float()
    a, b = xf[..., :half], xf[..., half:]
    return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1).to(x.dtype)


def rope_tables(B, S, R, positions, scale=1.0):
    inv = 1.0 / (torch.rand(R, dtype=torch.float64, device="cuda") * 3 + 1) / (
        10000.0 ** (torch.arange(R, dtype=torch.float64, device="cuda") * 2 / (2 * R)))
    theta = positions.to(torch.float64)[..., None] * inv  # [B, S, R]
    cos = (torch.cos(theta) * scale).float()[:, :, None, :]
    sin = (torch.sin(theta) * scale).float()[:, :, None, :]
    return cos, sin


def compile_static(fn):
    """torch.compile of `fn` specialized to the shapes of the case about to run, as a model
    compiled for its shapes gets: Dynamo's caches are reset first, so that an earlier case's shape
    neither counts against the recompile limit nor turns the dimensions dynamic (a kernel for
    any shape: up to 2x slower on these rows)."""
    torch._dynamo.reset()
    return torch.compile(fn, dynamic=False)


def peers():
    out = {"torch-eager": None, "torch.compile": None}
    try:
        import flashinfer  # noqa: F401
        out["flashinfer"] = flashinfer
    except Exception:
        pass
    try:
        from liger_kernel.ops.fused_add_rms_norm import LigerFusedAddRMSNormFunction
        from liger_kernel.ops.rms_norm import LigerRMSNormFunction

        out["liger"] = (LigerRMSNormFunction, LigerFusedAddRMSNormFunction)
    except Exception:
        pass
    try:
        import tileops

        out["tileops"] = tileops
    except Exception:
        pass
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--csv", default=os.path.join(os.environ.get("OUT", "."), "peers.csv"))
    ap.add_argument("--flush", default="fill",
                    help="fill, memset, or fill,memset (compiled peers timed after both)")
    args = ap.parse_args()
    flushes = args.flush.split(",")
    if not flushes or any(f not in ("fill", "memset") for f in flushes):
        ap.error(f"--flush: expected fill, memset or a comma list of them, got {args.flush!r}")
    torch.manual_seed(0)
    dev = torch.cuda.get_device_name()
    rows = []
    available = peers()

    def record(op, case, peer, us, nbytes):
        tbps = nbytes / (us * 1e-6) / 1e12
        rows.append((op, case, peer, us, tbps))
        print(f"{op:22s} {case:32s} {peer:14s} {us:10.2f} us {tbps:7.3f} TB/s", flush=True)

    def measure(op, case, peer, fn, nbytes, every_flush=True):
        """Times fn after the first flush of --flush and records it; with every_flush, also after
        each other flush, recorded as "<peer>@<flush>"."""
        global FLUSH
        for k, f in enumerate(flushes if every_flush else flushes[:1]):
            FLUSH = f
            record(op, case, peer if k == 0 else f"{peer}@{f}", time_median_us(fn, args.iters),
                   nbytes)
        FLUSH = flushes[0]

    for label, n, d, dtypes in NORM:
        for dt in dtypes:
            t = getattr(torch, dt)
            x = torch.randn(n, d, dtype=t, device="cuda")
            w = torch.randn(d, dtype=t, device="cuda")
            nbytes = (2 * n * d + d) * x.element_size()
            case = f"{label}-{dt}"
            compiled_norm = compile_static(rms_norm_eager)
            measure("RMSNormFwdOp", case, "torch-eager", lambda: rms_norm_eager(x, w), nbytes, every_flush=False)
            measure("RMSNormFwdOp", case, "torch.compile", lambda: compiled_norm(x, w), nbytes)
            if hasattr(torch.nn.functional, "rms_norm"):
                measure("RMSNormFwdOp", case, "F.rms_norm", lambda: torch.nn.functional.rms_norm(x, (d,), w, 1e-6), nbytes)
            if "flashinfer" in available:
                fi = available["flashinfer"]
                measure("RMSNormFwdOp", case, "flashinfer", lambda: fi.rmsnorm(x, w, 1e-6), nbytes)
            if "liger" in available:
                liger_norm = available["liger"][0]
                # casting_mode "llama": fp32 statistics, the product rounded once, as ours.
                measure("RMSNormFwdOp", case, "liger",
                        lambda: liger_norm.apply(x, w, 1e-6, 0.0, "llama", False), nbytes)
            if "tileops" in available:
                norm_op = available["tileops"].RMSNormFwdOp(normalized_shape=[d], eps=1e-6)
                norm_fn, norm_key = torch.ops.tileops.norm_rms_norm_fwd.default, norm_op.instance_key
                measure("RMSNormFwdOp", case, "tileops", lambda: norm_fn(norm_key, x, w), nbytes)
    for label, n, d, dtypes in FUSED:
        for dt in dtypes:
            t = getattr(torch, dt)
            x = torch.randn(n, d, dtype=t, device="cuda")
            r = torch.randn(n, d, dtype=t, device="cuda")
            w = torch.randn(d, dtype=t, device="cuda")
            nbytes = (4 * n * d + d) * x.element_size()
            case = f"{label}-{dt}"
            compiled_fused = compile_static(fused_add_rms_norm_eager)
            measure("FusedAddRMSNormFwdOp", case, "torch-eager", lambda: fused_add_rms_norm_eager(x, r, w), nbytes, every_flush=False)
            measure("FusedAddRMSNormFwdOp", case, "torch.compile", lambda: compiled_fused(x, r, w), nbytes)
            if "flashinfer" in available:
                fi = available["flashinfer"]
                measure("FusedAddRMSNormFwdOp", case, "flashinfer", lambda: fi.fused_add_rmsnorm(x, r, w, 1e-6), nbytes)
            if "liger" in available:
                liger_fused = available["liger"][1]
                # Liger returns the sum as a new tensor (in_place=False) instead of writing the
                # residual: the same bytes moved.
                measure("FusedAddRMSNormFwdOp", case, "liger",
                        lambda: liger_fused.apply(x, r, w, 1e-6, 0.0, "llama", False), nbytes)
            if "tileops" in available:
                fused_op = available["tileops"].FusedAddRMSNormFwdOp(normalized_shape=[d], eps=1e-6)
                fused_fn = torch.ops.tileops.norm_fused_add_rms_norm_fwd_writes_residual.default
                fused_key = fused_op.instance_key
                measure("FusedAddRMSNormFwdOp", case, "tileops",
                        lambda: fused_fn(fused_key, x, r, w), nbytes)
    for label, B, S, H, R, with_pos, dtypes in ROPE:
        for dt in dtypes:
            t = getattr(torch, dt)
            x = torch.randn(B, S, H, 2 * R, dtype=t, device="cuda")
            pos = (torch.randint(0, 131072, (B, S), device="cuda") if with_pos
                   else torch.arange(S, device="cuda").expand(B, S))
            case = f"{label}-{dt}" + ("-int64" if with_pos else "")
            compiled_rope = compile_static(long_rope_eager)
            nbytes = 2 * x.numel() * x.element_size() + R * 4 + (pos.numel() * 8 if with_pos else 0)

            # The peers are timed including the cos/sin tables from the positions, as our op
            # derives them inside the call.
            def eager():
                cos, sin = rope_tables(B, S, R, pos)
                return long_rope_eager(x, cos, sin)

            def compiled():
                cos, sin = rope_tables(B, S, R, pos)
                return compiled_rope(x, cos, sin)

            cos, sin = rope_tables(B, S, R, pos)
            measure("LongRoPEFwdOp", case, "torch-eager", eager, nbytes, every_flush=False)
            measure("LongRoPEFwdOp", case, "torch.compile", compiled, nbytes)
            measure("LongRoPEFwdOp", case, "compile(no-tab)", lambda: compiled_rope(x, cos, sin), nbytes)
            # Liger's rotary embedding rotates q and k together in another layout, without
            # LongRoPE's rescaling: no like-for-like call, so no Liger row here.
            if "tileops" in available:
                factors = torch.rand(R, dtype=torch.float32) * 3 + 1
                rope_op = available["tileops"].LongRoPEFwdOp(rescale_factors=factors, layout="bshd")
                rope_fn, rope_key = torch.ops.tileops.rope_long_rope_fwd.default, rope_op.instance_key
                rope_pos = pos if with_pos else None
                measure("LongRoPEFwdOp", case, "tileops", lambda: rope_fn(rope_key, x, rope_pos), nbytes)
    with open(args.csv, "w") as f:
        f.write(f"# gpu={dev} torch={torch.__version__} flush={args.flush}\n")
        f.write("op,case,peer,median_us,tb_per_s\n")
        for op, case, peer, us, tbps in rows:
            f.write(f"{op},{case},{peer},{us:.3f},{tbps:.4f}\n")
    print(f"wrote {args.csv}")


if __name__ == "__main__":
    sys.exit(main())
