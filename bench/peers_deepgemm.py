#!/usr/bin/env python3
"""DeepGEMM's FP8 GEMMs beside ours on the same inputs, in one process (issue 29, item 1).

Three pairs, each on the same e4m3 operands and float32 scales (1 x 128 activation groups,
128 x 128 weight blocks), each writing bfloat16 into its own preallocated output:
  contiguous  deep_gemm.m_grouped_fp8_gemm_nt_contiguous  vs  MoEGroupedGemmFP8FwdOp('none')
  masked      deep_gemm.m_grouped_fp8_gemm_nt_masked      vs  MoEGroupedGemmFP8MaskedFwdOp('none')
  dense       deep_gemm.fp8_gemm_nt                       vs  FP8BlockScaledGemmFwdOp
Shapes: DeepGEMM's published tables (contiguous 4 x 8192 and 8 x 4096 rows; masked 1 x 1024,
2 x 512, 4 x 256 rows; N x K 4096 x 7168 and 7168 x 2048), DeepSeek-V3's 256 experts x 128 rows,
the masked op's expert-parallel decode workload (manifest/moe.yaml) and the dense op's workloads
(manifest/gemm.yaml).

Layouts: each side gets the layout it takes, made before timing. Ours: a_scales [M, K // 128]
row-major, expert_offsets [E + 1]. DeepGEMM: the same scale values transposed and TMA-aligned
(deep_gemm.get_mn_major_tma_aligned_tensor, so its timed call launches no layout kernel) and, for
the contiguous layout, the group index of every row (int32 [M]). Weights and their scales are the
same tensors for both.

Correctness: both outputs against one float64 reference (the matmul of the dequantized operands,
computed on the GPU in float64) on sampled rows of the first, middle and last group:
|got - ref| <= 1.6e-2 (1 + |ref|) (one float32 accumulation and one rounding to bfloat16, the
bound of python/tests/test_moe_fp8.py); the worst |got - ref| / (1 + |ref|) is reported.

Timing: bench/peers.py's time_median_us (5 warm-up calls, CUDA events around each call, the L2
flushed before each one, the median), three times, as DeepGEMM's published H800 figures had long
gaps between calls: back to back; with the GPU idle for --cool-ms before each flush; and with
--fill-gb of memory zeroed before each flush (what DeepGEMM's own benchmark, bench_kineto, does
before every call: "chill time without full idle"). TFLOP/s = 2 x (rows computed) x N x K /
time. "ours/DG" = DeepGEMM's time / ours (>= 1: ours as fast or faster).

Modes: --smoke (DeepGEMM's first JIT call and a small checked GEMM, nothing else), --warm with
--shard I/N (DeepGEMM's JIT builds for every Ith of the cases, for parallel processes before the
timed run). Writes a table (stdout), a CSV (--csv) and a markdown table (--markdown).

Usage: python3 bench/peers_deepgemm.py [--iters N] [--cool-ms MS] [--only KIND,...] [--csv PATH]
       [--markdown PATH] | --smoke | --warm --shard I/N
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time
from dataclasses import dataclass

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import time_median_us  # noqa: E402  (the L2 flush and median of the other peers)

BLOCK = 128  # 1 x 128 activation groups, 128 x 128 weight blocks (both sides)
TOL = 1.6e-2
DEVICE = "cuda"  # where inputs and references live (a CPU self-check of this file may change it)


@dataclass(frozen=True)
class Case:
    kind: str  # contiguous | masked | dense
    label: str
    groups: int  # experts (1 for dense)
    rows: int  # rows per group (contiguous), max_m (masked), M (dense)
    n: int
    k: int
    used: int = 0  # masked: rows used per expert (counts); 0: all

    @property
    def computed_rows(self) -> int:
        return self.groups * (self.used or self.rows)

    @property
    def shape(self) -> str:
        if self.kind == "dense":
            return f"{self.rows} x {self.n} x {self.k}"
        used = f" ({self.used} used)" if self.used else ""
        return f"{self.groups} x {self.rows}{used} x {self.n} x {self.k}"


CASES = [
    # DeepGEMM's contiguous table and DeepSeek-V3's 256 experts x 128 rows
    Case("contiguous", "dg-4x8192-n4096-k7168", 4, 8192, 4096, 7168),
    Case("contiguous", "dg-4x8192-n7168-k2048", 4, 8192, 7168, 2048),
    Case("contiguous", "dg-8x4096-n4096-k7168", 8, 4096, 4096, 7168),
    Case("contiguous", "dg-8x4096-n7168-k2048", 8, 4096, 7168, 2048),
    Case("contiguous", "dsv3-256x128-n4096-k7168", 256, 128, 4096, 7168),
    Case("contiguous", "dsv3-256x128-n7168-k2048", 256, 128, 7168, 2048),
    # DeepGEMM's masked table (every row used, as its benchmark ran it), DeepSeek-V3's 256 x 128,
    # and the masked op's expert-parallel decode workloads (32 local experts, 16 of 128 rows used)
    Case("masked", "dg-1x1024-n4096-k7168", 1, 1024, 4096, 7168),
    Case("masked", "dg-1x1024-n7168-k2048", 1, 1024, 7168, 2048),
    Case("masked", "dg-2x512-n4096-k7168", 2, 512, 4096, 7168),
    Case("masked", "dg-2x512-n7168-k2048", 2, 512, 7168, 2048),
    Case("masked", "dg-4x256-n4096-k7168", 4, 256, 4096, 7168),
    Case("masked", "dg-4x256-n7168-k2048", 4, 256, 7168, 2048),
    Case("masked", "dsv3-256x128-n4096-k7168", 256, 128, 4096, 7168),
    Case("masked", "dsv3-256x128-n7168-k2048", 256, 128, 7168, 2048),
    Case("masked", "dsv3-ep8-32x128-n4096-k7168", 32, 128, 4096, 7168, used=16),
    Case("masked", "dsv3-ep8-32x128-n7168-k2048", 32, 128, 7168, 2048, used=16),
    # FP8BlockScaledGemmFwdOp's workloads (manifest/gemm.yaml)
    Case("dense", "dsv3-qkv-a-m4096", 1, 4096, 2112, 7168),
    Case("dense", "dsv3-q-b-m4096", 1, 4096, 24576, 1536),
    Case("dense", "dsv3-kv-b-m4096", 1, 4096, 32768, 512),
    Case("dense", "dsv3-o-m4096", 1, 4096, 7168, 16384),
    Case("dense", "dsv3-gate-up-m4096", 1, 4096, 4096, 7168),
    Case("dense", "dsv3-down-m4096", 1, 4096, 7168, 2048),
    Case("dense", "dsv3-qkv-a-m64", 1, 64, 2112, 7168),
    Case("dense", "dsv3-o-m64", 1, 64, 7168, 16384),
    Case("dense", "dsv3-gate-up-m64", 1, 64, 4096, 7168),
    Case("dense", "dsv3-q-b-m1024", 1, 1024, 24576, 1536),
    Case("dense", "dsv3-o-m1024", 1, 1024, 7168, 16384),
    Case("dense", "dsv3-q-b-m8192", 1, 8192, 24576, 1536),
    Case("dense", "dsv3-o-m8192", 1, 8192, 7168, 16384),
]


def fp8_randn(shape: tuple[int, ...], seed: int) -> torch.Tensor:
    """e4m3 of standard normal values, made in chunks of rows (the weights reach 7.5 G values)."""
    gen = torch.Generator(device=DEVICE).manual_seed(seed)
    out = torch.empty(shape, dtype=torch.float8_e4m3fn, device=DEVICE)
    flat = out.view(-1, shape[-1])
    step = max(1, (1 << 26) // shape[-1])
    for r in range(0, flat.shape[0], step):
        rows = min(step, flat.shape[0] - r)
        flat[r:r + rows] = torch.randn(rows, shape[-1], generator=gen, device=DEVICE).to(torch.float8_e4m3fn)
    return out


def scales(shape: tuple[int, ...], seed: int, divisor: float = 1.0) -> torch.Tensor:
    gen = torch.Generator(device=DEVICE).manual_seed(seed)
    return (0.5 + torch.rand(shape, generator=gen, device=DEVICE)) / divisor


@dataclass
class Inputs:
    a: torch.Tensor  # e4m3 [M, K] or [E, max_m, K]
    a_scales: torch.Tensor  # float32 [..., K // 128], row-major (ours)
    a_scales_dg: torch.Tensor | None  # the same values, DeepGEMM's transposed TMA-aligned layout
    b: torch.Tensor  # e4m3 [N, K] or [E, N, K]
    b_scales: torch.Tensor  # float32 [..., ceil(N / 128), K // 128]
    offsets: torch.Tensor | None = None  # contiguous: int32 [E + 1] (ours)
    row_groups: torch.Tensor | None = None  # contiguous: int32 [M], each row's group (DeepGEMM)
    counts: torch.Tensor | None = None  # masked: int32 [E]


def make_inputs(c: Case, dg) -> Inputs:
    k_blocks, n_blocks = c.k // BLOCK, math.ceil(c.n / BLOCK)
    if c.kind == "masked":
        a_shape = (c.groups, c.rows, c.k)
    else:
        a_shape = (c.groups * c.rows, c.k)
    b_shape = (c.n, c.k) if c.kind == "dense" else (c.groups, c.n, c.k)
    a = fp8_randn(a_shape, 1)
    a_scales = scales(a_shape[:-1] + (k_blocks,), 2)
    b = fp8_randn(b_shape, 3)
    b_scales = scales(b_shape[:-2] + (n_blocks, k_blocks), 4, c.k ** 0.5)
    a_scales_dg = dg.get_mn_major_tma_aligned_tensor(a_scales) if dg is not None else None
    inp = Inputs(a, a_scales, a_scales_dg, b, b_scales)
    if c.kind == "contiguous":
        inp.offsets = (torch.arange(c.groups + 1, device=DEVICE) * c.rows).to(torch.int32)
        inp.row_groups = torch.arange(c.groups, device=DEVICE, dtype=torch.int32).repeat_interleave(c.rows)
    elif c.kind == "masked":
        inp.counts = torch.full((c.groups,), c.used or c.rows, dtype=torch.int32, device=DEVICE)
    return inp


def out_buffer(c: Case) -> torch.Tensor:
    shape = (c.groups, c.rows, c.n) if c.kind == "masked" else (c.groups * c.rows, c.n)
    return torch.empty(shape, dtype=torch.bfloat16, device=DEVICE)


def deepgemm_call(c: Case, dg, inp: Inputs, d: torch.Tensor):
    a, b = (inp.a, inp.a_scales_dg), (inp.b, inp.b_scales)
    if c.kind == "contiguous":
        return lambda: dg.m_grouped_fp8_gemm_nt_contiguous(a, b, d, inp.row_groups)
    if c.kind == "masked":
        expected_m = c.used or c.rows
        return lambda: dg.m_grouped_fp8_gemm_nt_masked(a, b, d, inp.counts, expected_m)
    return lambda: dg.fp8_gemm_nt(a, b, d)


def tileops_call(c: Case, tileops, inp: Inputs, out: torch.Tensor):
    blocks = {"block_n": BLOCK, "block_k": BLOCK}
    if c.kind == "contiguous":
        op = tileops.MoEGroupedGemmFP8FwdOp(activation="none", **blocks)
        return lambda: op(inp.a, inp.a_scales, inp.offsets, inp.b, inp.b_scales, out=out)
    if c.kind == "masked":
        op = tileops.MoEGroupedGemmFP8MaskedFwdOp(activation="none", **blocks)
        return lambda: op(inp.a, inp.a_scales, inp.counts, inp.b, inp.b_scales, out=out)
    op = tileops.FP8BlockScaledGemmFwdOp(**blocks)
    return lambda: op(inp.a, inp.a_scales, inp.b, inp.b_scales, out=out)


def dequantized(q: torch.Tensor, s: torch.Tensor, block_rows: int) -> torch.Tensor:
    """float64 values of e4m3 q [R, K] with scales s [ceil(R / block_rows), K // 128]."""
    sd = s.double().repeat_interleave(block_rows, 0)[: q.shape[0]].repeat_interleave(BLOCK, 1)
    return q.double() * sd


def check_groups(c: Case) -> list[int]:
    return sorted({0, c.groups // 2, c.groups - 1})


def sampled_rows(used: int, limit: int = 1024) -> torch.Tensor:
    idx = torch.linspace(0, used - 1, min(used, limit), device=DEVICE).round().long()
    return torch.unique(idx)


def worst_error(c: Case, inp: Inputs, out: torch.Tensor) -> float:
    """max |got - ref| / (1 + |ref|) over sampled rows of the first, middle and last group; inf
    when a checked value is not finite."""
    worst = 0.0
    for g in check_groups(c):
        rows = sampled_rows(c.used or c.rows)
        if c.kind == "masked":
            a, sa, b, sb, got = inp.a[g], inp.a_scales[g], inp.b[g], inp.b_scales[g], out[g]
        elif c.kind == "contiguous":
            span = slice(g * c.rows, (g + 1) * c.rows)
            a, sa, b, sb, got = inp.a[span], inp.a_scales[span], inp.b[g], inp.b_scales[g], out[span]
        else:
            a, sa, b, sb, got = inp.a, inp.a_scales, inp.b, inp.b_scales, out
        ref = dequantized(a[rows], sa[rows], 1) @ dequantized(b, sb, BLOCK).t()
        err = (got[rows].double() - ref).abs() / (1 + ref.abs())
        if not bool(torch.isfinite(err).all()):
            return math.inf
        worst = max(worst, float(err.max()))
    return worst


def load_deepgemm():
    try:
        import deep_gemm
    except Exception as e:  # not built, or its import failed
        print(f"# deep_gemm not importable: {type(e).__name__}: {e}", flush=True)
        return None
    return deep_gemm


def load_tileops():
    try:
        import tileops
    except Exception as e:
        print(f"# tileops not importable: {type(e).__name__}: {e}", flush=True)
        return None
    return tileops


def smoke(dg) -> int:
    """DeepGEMM's first JIT build (the scale-layout kernel) and a small checked dense GEMM."""
    print(f"# deep_gemm {getattr(dg, '__version__', '?')} from {dg.__file__}; "
          f"num_sms {dg.get_num_sms()}", flush=True)
    x = torch.rand(300, 7, device=DEVICE)
    t0 = time.time()
    y = dg.get_mn_major_tma_aligned_tensor(x)
    torch.cuda.synchronize()
    layout_ok = torch.equal(y, x) and y.stride(0) == 1
    print(f"# get_mn_major_tma_aligned_tensor: {'ok' if layout_ok else 'WRONG'} "
          f"(strides {tuple(y.stride())}, {time.time() - t0:.1f} s with its JIT build)", flush=True)
    c = Case("dense", "smoke", 1, 200, 256, 512)
    inp = make_inputs(c, dg)
    d = out_buffer(c)
    t0 = time.time()
    deepgemm_call(c, dg, inp, d)()
    torch.cuda.synchronize()
    err = worst_error(c, inp, d)
    gemm_ok = err <= TOL
    print(f"# fp8_gemm_nt 200 x 256 x 512: worst error {err:.2e} ({'PASS' if gemm_ok else 'FAIL'}, "
          f"{time.time() - t0:.1f} s with its JIT build)", flush=True)
    return 0 if layout_ok and gemm_ok else 1


def selected(only: str) -> list[Case]:
    if not only:
        return CASES
    keys = set(only.split(","))
    unknown = keys - {c.kind for c in CASES} - {f"{c.kind}/{c.label}" for c in CASES}
    if unknown:
        raise SystemExit(f"--only: unknown {sorted(unknown)}; kinds contiguous, masked, dense or KIND/LABEL")
    return [c for c in CASES if c.kind in keys or f"{c.kind}/{c.label}" in keys]


def warm(dg, cases: list[Case], shard: str) -> int:
    """Builds DeepGEMM's kernels for this shard of the cases (its JIT cache is shared)."""
    index, count = (int(x) for x in shard.split("/"))
    failed = 0
    for i, c in enumerate(cases):
        if i % count != index:
            continue
        t0 = time.time()
        try:
            inp = make_inputs(c, dg)
            deepgemm_call(c, dg, inp, out_buffer(c))()
            torch.cuda.synchronize()
            print(f"# warm {c.kind}/{c.label}: {time.time() - t0:.1f} s", flush=True)
        except Exception as e:
            failed += 1
            print(f"# warm {c.kind}/{c.label}: {type(e).__name__}: {e}", flush=True)
        inp = None
        torch.cuda.empty_cache()
    return 1 if failed else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iters", type=int, default=21)
    ap.add_argument("--cool-ms", type=float, default=20.0,
                    help="GPU idle time before each timed call in the idle pass (0: no such pass)")
    ap.add_argument("--fill-gb", type=float, default=8.0,
                    help="GB zeroed before each timed call in the fill pass (0: no such pass)")
    ap.add_argument("--only", default="", help="comma list of kinds (contiguous, masked, dense) or KIND/LABEL")
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="DeepGEMM's first calls only")
    ap.add_argument("--warm", action="store_true", help="DeepGEMM's JIT builds only (with --shard)")
    ap.add_argument("--shard", default="0/1", help="I/N: the Ith of every N cases (--warm)")
    ap.add_argument("--csv", default=os.path.join(os.environ.get("OUT", "."), "peers_deepgemm.csv"))
    ap.add_argument("--markdown", default=os.path.join(os.environ.get("OUT", "."), "peers_deepgemm.md"))
    args = ap.parse_args()
    cases = selected(args.only)
    shard = args.shard.split("/")
    if len(shard) != 2 or not all(s.isdigit() for s in shard) or not int(shard[0]) < int(shard[1]):
        ap.error(f"--shard: expected I/N with 0 <= I < N, got {args.shard!r}")
    if args.iters < 1 or args.cool_ms < 0 or args.fill_gb < 0:
        ap.error("--iters must be >= 1, --cool-ms and --fill-gb >= 0")
    if not torch.cuda.is_available():
        print("peers_deepgemm.py: no CUDA device visible to PyTorch; nothing to measure")
        return 0
    torch.backends.cuda.matmul.allow_tf32 = False
    dg = load_deepgemm()
    if args.smoke or args.warm:
        if dg is None:
            return 1
        return smoke(dg) if args.smoke else warm(dg, cases, args.shard)
    tileops = load_tileops()
    if dg is None and tileops is None:
        return 1
    props = torch.cuda.get_device_properties(0)
    print(f"# {props.name}, {props.multi_processor_count} SMs, torch {torch.__version__}; "
          f"deep_gemm {getattr(dg, '__version__', '-') if dg else 'absent'}; "
          f"median of {args.iters}, L2 flushed before each call", flush=True)
    modes = [("back-to-back", {})]
    if args.cool_ms:
        modes.append((f"idle {args.cool_ms:g} ms", {"cool_s": args.cool_ms / 1e3}))
    if args.fill_gb:
        chill = torch.empty(int(args.fill_gb * 1e9) // 4, dtype=torch.int32, device=DEVICE)
        modes.append((f"fill {args.fill_gb:g} GB", {"before_flush": chill.zero_}))
    rows = []  # (case, peer, mode, us, tflops, worst error)
    failed = 0
    for c in cases:
        try:
            inp = make_inputs(c, dg)
        except Exception as e:
            failed += 1
            print(f"{c.kind:10s} {c.label:30s} inputs failed: {type(e).__name__}: {e}", flush=True)
            continue
        peers = []
        if dg is not None:
            d = out_buffer(c)
            peers.append(("DeepGEMM", deepgemm_call(c, dg, inp, d), d))
        if tileops is not None:
            out = out_buffer(c)
            peers.append(("tileops", tileops_call(c, tileops, inp, out), out))
        flops = 2.0 * c.computed_rows * c.n * c.k
        for peer, fn, result in peers:
            try:
                fn()
                torch.cuda.synchronize()
                err = float("nan") if args.no_check else worst_error(c, inp, result)
            except Exception as e:
                failed += 1
                print(f"{c.kind:10s} {c.label:30s} {peer:9s} failed: {type(e).__name__}: "
                      f"{str(e).splitlines()[0] if str(e) else ''}", flush=True)
                continue
            ok = args.no_check or err <= TOL
            failed += not ok
            for mode, gap in modes:
                us = time_median_us(fn, args.iters, **gap)
                tflops = flops / (us * 1e-6) / 1e12
                rows.append((c, peer, mode, us, tflops, err))
                print(f"{c.kind:10s} {c.label:30s} {peer:9s} {mode:14s} {us:10.1f} us {tflops:7.1f} TFLOP/s  "
                      f"check {'skipped' if args.no_check else ('PASS' if ok else 'FAIL')} "
                      f"(worst {err:.2e})", flush=True)
        inp = peers = None
        torch.cuda.empty_cache()
    write_results(args, rows, modes)
    print(f"# {failed} failure(s)" if failed else "# all checks passed")
    return 1 if failed else 0


def floor_to(x: float, digits: int) -> str:
    """x cut (not rounded) to `digits` decimals: a printed rate or ratio is never rounded up."""
    return f"{math.floor(x * 10**digits) / 10**digits:.{digits}f}"


def ceil_to(x: float, digits: int) -> str:
    """x rounded up to `digits` decimals: a printed time is never rounded down."""
    return f"{math.ceil(x * 10**digits) / 10**digits:.{digits}f}"


def write_results(args, rows, modes) -> None:
    """The CSV (every row, unrounded to 0.001 us) and the markdown table: microseconds of the
    first pass, TFLOP/s and DeepGEMM's time over ours for every pass."""
    by = {(c, peer, mode): (us, tf, err) for c, peer, mode, us, tf, err in rows}
    os.makedirs(os.path.dirname(os.path.abspath(args.csv)) or ".", exist_ok=True)
    with open(args.csv, "w") as f:
        f.write(f"# gpu={torch.cuda.get_device_name()} torch={torch.__version__}\n")
        f.write("kind,case,groups,rows,used,N,K,peer,mode,median_us,tflops,worst_error\n")
        for c, peer, mode, us, tf, err in rows:
            f.write(f"{c.kind},{c.label},{c.groups},{c.rows},{c.used or c.rows},{c.n},{c.k},{peer},"
                    f"{mode},{us:.3f},{tf:.3f},{err:.3e}\n")
    head = "| kind | case | shape |"
    rule = "| --- | --- | --- |"
    for i, (mode, _) in enumerate(modes):
        us = " DeepGEMM us | ours us |" if i == 0 else ""
        head += f"{us} DeepGEMM TFLOP/s {mode} | ours TFLOP/s {mode} | ours/DG {mode} |"
        rule += " ---: |" * (5 if i == 0 else 3)
    lines = [head, rule]
    for c in dict.fromkeys(r[0] for r in rows):
        line = f"| {c.kind} | {c.label} | {c.shape} |"
        for i, (mode, _) in enumerate(modes):
            dg, ours = by.get((c, "DeepGEMM", mode)), by.get((c, "tileops", mode))
            if i == 0:
                line += "".join(f" {ceil_to(v[0], 1)} |" if v else " - |" for v in (dg, ours))
            line += "".join(f" {floor_to(v[1], 1)} |" if v else " - |" for v in (dg, ours))
            line += f" {floor_to(dg[0] / ours[0], 2)}x |" if dg and ours else " - |"
        lines.append(line)
    with open(args.markdown, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
