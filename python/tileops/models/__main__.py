"""python -m tileops.models bench | interleave | list

    python -m tileops.models bench --device cuda --markdown docs/perf/DATE-h200-models.md
    python -m tileops.models bench --device cpu --quick          # a smoke run on tiny models
    python -m tileops.models interleave --case llama3-8b-layer --tokens 1024,4096

bench: transformers models and layers with tileops against the same unpatched (eager,
torch.compile, CUDA graphs for decode) and Liger-Kernel; see tileops/models/_bench.py.
interleave: the eager and compiled modes of a case timed in interleaved rounds, with the GPU work
per call (the comparison a drifting host cannot skew); see tileops/models/_interleave.py.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import torch

from tileops.models._interleave import MODES as INTERLEAVE_MODES


def _commit() -> str:
    """The commit the report names: $TILEOPS_COMMIT (set by the GPU scripts, which run the installed
    package outside any checkout), else the checkout the package runs from, else "unknown"."""
    named = os.environ.get("TILEOPS_COMMIT", "").strip()
    if named:
        return named
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             check=True, cwd=Path(__file__).resolve().parent)
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _min_tokens(args: argparse.Namespace) -> int:
    from tileops.integrations.transformers import COMPILED_MIN_TOKENS

    return COMPILED_MIN_TOKENS if args.compiled_min_tokens is None else args.compiled_min_tokens


def _header(args: argparse.Namespace, argv: list[str], title: str = "Models bench",
            timing: str | None = None) -> str:
    import transformers

    device = torch.cuda.get_device_name() if args.device == "cuda" else platform.processor() or "cpu"
    command = "python -m tileops.models " + " ".join(argv)
    try:
        import liger_kernel  # noqa: F401
        from importlib.metadata import version

        liger = version("liger-kernel")
    except Exception:  # noqa: BLE001
        liger = "not installed"
    return "\n".join([
        f"# {title} ({args.device}{', quick' if args.quick else ''})",
        "",
        f"- date: {datetime.date.today().isoformat()}, commit: {_commit()}",
        f"- device: {device}",
        f"- command: `{command}`",
        f"- torch {torch.__version__}, transformers {transformers.__version__}, liger-kernel {liger}",
        f"- apply_tileops(compiled_min_tokens={_min_tokens(args)}): compiled calls of fewer tokens run "
        "transformers' norm, rotation and attention",
        timing or (f"- timing: median of {args.iters} calls after {args.warmup} warm-up calls (CUDA "
                   "events per call on the GPU); split by kind (ms per call, device time) from a "
                   "profiled run of 3 calls; weights random, bf16"),
        "",
        "",
    ])


def _write(args: argparse.Namespace, argv: list[str], rows: list) -> str:
    """The report of `rows` as markdown, written to --markdown and --json where given."""
    from tileops.models import _bench

    text = (_header(args, argv) + "## ms per call\n\n" + _bench.pivot(rows) + "\n\n## Every run, with the split "
            "by kind (ms per call) and notes\n\n" + _bench.table(rows) + "\n")
    if args.markdown:
        args.markdown.write_text(text)
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=1))
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tileops.models", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    bench = sub.add_parser("bench", help="run the cases")
    bench.add_argument("--device", choices=["cuda", "cpu"], default="cuda" if torch.cuda.is_available() else "cpu")
    bench.add_argument("--quick", action="store_true", help="tiny configurations and token counts (a smoke run)")
    bench.add_argument("--case", action="append", help="run only this case (repeatable; see `list`)")
    bench.add_argument("--iters", type=int, default=None, help="timed calls per measurement (default 20; quick 3)")
    bench.add_argument("--warmup", type=int, default=None, help="warm-up calls (default 3; quick 1)")
    bench.add_argument("--tokens", help="token counts instead of the cases' own, e.g. 1,4096")
    bench.add_argument("--no-compile", action="store_true", help="skip the torch.compile modes")
    bench.add_argument("--compiled-min-tokens", type=int, default=None,
                       help="apply_tileops's compiled_min_tokens (default: its own; 0: tileops in every "
                            "compiled call)")
    bench.add_argument("--no-liger", action="store_true", help="skip Liger-Kernel")
    bench.add_argument("--no-split", action="store_true", help="skip the profiled split by kind")
    bench.add_argument("--json", type=Path, help="write the rows as JSON")
    bench.add_argument("--markdown", type=Path, help="write the header and the table as markdown")
    inter = sub.add_parser("interleave", help="time a case's modes in interleaved rounds")
    inter.add_argument("--device", choices=["cuda", "cpu"], default="cuda" if torch.cuda.is_available() else "cpu")
    inter.add_argument("--quick", action="store_true", help="tiny configurations and token counts (a smoke run)")
    inter.add_argument("--case", action="append", required=True, help="the case (repeatable; see `list`)")
    inter.add_argument("--tokens", help="token counts instead of the cases' own, e.g. 1024,4096")
    inter.add_argument("--modes", default=",".join(INTERLEAVE_MODES),
                       help="comma-separated, of: " + ", ".join(INTERLEAVE_MODES))
    inter.add_argument("--rounds", type=int, default=7, help="rounds of every mode in turn (default 7)")
    inter.add_argument("--iters", type=int, default=None, help="timed calls per mode and round (default 30; quick 2)")
    inter.add_argument("--warmup", type=int, default=None, help="warm-up calls per mode (default 3; quick 1)")
    inter.add_argument("--compiled-min-tokens", type=int, default=None,
                       help="apply_tileops's compiled_min_tokens (default: its own)")
    inter.add_argument("--json", type=Path, help="write the results as JSON")
    inter.add_argument("--markdown", type=Path, help="write the header and the table as markdown")
    sub.add_parser("list", help="list the cases")
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)

    from tileops.models import _bench

    if args.command == "list":
        for case in _bench.CASES:
            print(f"{case.name:24} {case.what:6} {case.arch:12} T={','.join(map(str, case.tokens))}"
                  f"{'  FP8 experts' if case.fp8 else ''}")
        return 0
    names = {c.name for c in _bench.CASES}
    unknown = [c for c in args.case or [] if c not in names]
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; cases: {', '.join(sorted(names))}")
    if args.command == "interleave":
        return _run_interleave(parser, args, argv)
    args.iters = args.iters or (3 if args.quick else 20)
    args.warmup = args.warmup if args.warmup is not None else (1 if args.quick else 3)
    tokens = tuple(int(t) for t in args.tokens.split(",")) if args.tokens else None
    opts = _bench.Options(device=args.device, quick=args.quick, warmup=args.warmup, iters=args.iters,
                          compile=not args.no_compile, liger=not args.no_liger, split=not args.no_split,
                          tokens=tokens, compiled_min_tokens=args.compiled_min_tokens)
    rows: list = []
    text = _write(args, argv, rows)
    for case in _bench.CASES:
        if args.case and case.name not in args.case:
            continue
        rows.extend(_bench.run_case(case, opts))
        text = _write(args, argv, rows)  # after every case: a run cut short keeps what it measured
    print(text)
    failed = [r for r in rows if r.ms is None and r.note.startswith("failed") and "FP8Experts" not in r.mode]
    return 1 if failed else 0


def _run_interleave(parser: argparse.ArgumentParser, args: argparse.Namespace, argv: list[str]) -> int:
    from tileops.models import _bench, _interleave

    modes = tuple(m.strip() for m in args.modes.split(",") if m.strip())
    bad = [m for m in modes if m not in INTERLEAVE_MODES]
    if bad or not modes:
        parser.error(f"--modes: {', '.join(bad) or 'none given'}; modes: {', '.join(INTERLEAVE_MODES)}")
    if args.rounds < 1:
        parser.error(f"--rounds must be >= 1, got {args.rounds}")
    if args.iters is None:
        args.iters = 2 if args.quick else 30
    if args.iters < 1:
        parser.error(f"--iters must be >= 1, got {args.iters}")
    args.warmup = args.warmup if args.warmup is not None else (1 if args.quick else 3)
    tokens = tuple(int(t) for t in args.tokens.split(",")) if args.tokens else None
    opts = _bench.Options(device=args.device, quick=args.quick, warmup=args.warmup, iters=args.iters,
                          tokens=tokens, compiled_min_tokens=args.compiled_min_tokens)
    results: list = []
    for case in _bench.CASES:
        if case.name in args.case:
            results.extend(_interleave.run(case, opts, modes, args.rounds))
    timing = (f"- timing: {args.rounds} rounds of every mode in turn, each the median of {args.iters} "
              f"calls (CUDA events around each call and a synchronisation after it on the GPU) after "
              f"{args.warmup} warm-up calls per mode; GPU ms: kernel time per call from a profiled run of "
              "3 calls; the unpatched and the patched case are two instances with the same random bf16 "
              "weights")
    note = _interleave.noise_note(results)
    text = (_header(args, argv, "Models, interleaved", timing) + "## ms per call\n\n"
            + _interleave.table(results) + "\n" + (f"\n{note}\n" if note else ""))
    if args.markdown:
        args.markdown.write_text(text)
    if args.json:
        args.json.write_text(json.dumps([{**asdict(r), "median": r.median, "min": r.best} for r in results],
                                        indent=1))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
