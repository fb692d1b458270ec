"""python -m tileops.models: the bench runs end to end on tiny models (CPU), attributes time to
each kind in both the patched and the unpatched model, and leaves the modeling modules as they
were; `list` names the cases. (Figures come from GPU runs: docs/perf/.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("transformers", reason="transformers is not installed (pip install transformers)")

from tileops.models import __main__ as cli  # noqa: E402
from tileops.models import _bench  # noqa: E402


def test_list_names_every_case(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    assert [line.split()[0] for line in out.splitlines()] == [c.name for c in _bench.CASES]


def test_quick_bench_runs_and_splits_by_kind(tmp_path: Path) -> None:
    from transformers.models.deepseek_v3 import modeling_deepseek_v3

    before = dict(vars(modeling_deepseek_v3))
    out = tmp_path / "rows.json"
    md = tmp_path / "bench.md"
    rc = cli.main(["bench", "--device", "cpu", "--quick", "--case", "dsv3-moe-layer-fp8", "--no-compile",
                   "--iters", "1", "--warmup", "0", "--json", str(out), "--markdown", str(md)])
    assert rc == 0
    assert vars(modeling_deepseek_v3) == before  # the rope ranges were wrapped, then restored
    rows = json.loads(out.read_text())
    by_mode: dict[str, list[dict]] = {}
    for row in rows:
        by_mode.setdefault(row["mode"], []).append(row)
    # transformers' own FP8 experts need its hub kernel (CUDA, network): reported, not fatal
    assert all(r["ms"] is None and r["note"].startswith("failed") for r in by_mode.pop(
        "unpatched eager (transformers FP8Experts)"))
    assert [r["note"] for r in by_mode.pop("liger eager")] == ["Liger-Kernel has no patch for this architecture"]
    for mode in ("tileops eager", "unpatched eager"):
        assert [r["phase"] for r in by_mode[mode]] == ["layer T=1", "layer T=16"]
        for r in by_mode[mode]:
            assert r["ms"] > 0
            # MLA's attention is not served, but timed as the attention kind in both
            assert all(r["split"][k] > 0 for k in ("rms_norm", "rope", "moe", "attention"))
    text = md.read_text()
    assert "| dsv3-moe-layer-fp8 | layer T=16 |" in text and "python -m tileops.models bench" in text


def test_quick_model_bench_times_served_attention(tmp_path: Path) -> None:
    from transformers.models.llama import modeling_llama

    before = dict(vars(modeling_llama))
    out = tmp_path / "rows.json"
    rc = cli.main(["bench", "--device", "cpu", "--quick", "--case", "llama3.2-1b-model", "--no-compile",
                   "--no-liger", "--iters", "1", "--warmup", "0", "--json", str(out)])
    assert rc == 0
    assert vars(modeling_llama) == before  # the attention interface was wrapped, then restored
    rows = {(r["mode"], r["phase"]): r for r in json.loads(out.read_text())}
    for mode in ("tileops eager", "unpatched eager"):
        for phase in ("prefill T=16", "decode ctx=16"):  # prefill served, decode the model's own
            r = rows[(mode, phase)]
            assert r["ms"] > 0 and r["split"]["attention"] > 0


def test_a_run_cut_short_keeps_the_cases_it_finished(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = _bench.run_case

    def run_case(case: _bench.Case, opts: _bench.Options) -> list[_bench.Row]:
        if case.name == "llama3.2-1b-model":
            raise KeyboardInterrupt  # as a time limit's kill would stop the second case
        return real(case, opts)

    monkeypatch.setattr(_bench, "run_case", run_case)
    out, md = tmp_path / "rows.json", tmp_path / "bench.md"
    with pytest.raises(KeyboardInterrupt):
        cli.main(["bench", "--device", "cpu", "--quick", "--case", "llama3-8b-layer", "--case", "llama3.2-1b-model",
                  "--no-compile", "--no-liger", "--no-split", "--iters", "1", "--warmup", "0", "--json", str(out),
                  "--markdown", str(md)])
    rows = json.loads(out.read_text())
    assert {r["case"] for r in rows} == {"llama3-8b-layer"}
    assert {(r["mode"], r["phase"]) for r in rows if r["ms"]} == {
        (m, p) for m in ("tileops eager", "unpatched eager") for p in ("layer T=1", "layer T=16")}
    assert "| llama3-8b-layer | layer T=16 |" in md.read_text()


def test_the_report_names_the_commit_it_is_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILEOPS_COMMIT", "abc1234")
    md = tmp_path / "bench.md"
    rc = cli.main(["bench", "--device", "cpu", "--quick", "--case", "llama3-8b-layer", "--no-compile", "--no-liger",
                   "--no-split", "--iters", "1", "--warmup", "0", "--markdown", str(md)])
    assert rc == 0
    assert "commit: abc1234" in md.read_text()


def test_compiled_min_tokens_reaches_apply_tileops(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tileops.integrations.transformers as integration

    seen: list[int] = []
    real = integration.apply_tileops

    def apply_tileops(model, **kw):  # type: ignore[no-untyped-def]
        seen.append(kw["compiled_min_tokens"])
        return real(model, **kw)

    monkeypatch.setattr(integration, "apply_tileops", apply_tileops)
    md = tmp_path / "bench.md"
    rc = cli.main(["bench", "--device", "cpu", "--quick", "--case", "llama3-8b-layer", "--no-compile", "--no-liger",
                   "--no-split", "--iters", "1", "--warmup", "0", "--compiled-min-tokens", "0", "--markdown", str(md)])
    assert rc == 0 and seen == [0]
    assert "apply_tileops(compiled_min_tokens=0)" in md.read_text()


def test_interleave_times_every_mode_in_each_round(tmp_path: Path) -> None:
    from tileops.models import _interleave

    out, md = tmp_path / "rows.json", tmp_path / "interleaved.md"
    rc = cli.main(["interleave", "--device", "cpu", "--quick", "--case", "llama3-8b-layer", "--tokens", "16",
                   "--modes", "unpatched eager,tileops eager,unpatched compiled,tileops compiled",
                   "--rounds", "3", "--iters", "1", "--warmup", "1", "--compiled-min-tokens", "0",
                   "--json", str(out), "--markdown", str(md)])
    assert rc == 0
    rows = json.loads(out.read_text())
    assert [(r["phase"], r["mode"]) for r in rows] == [("layer T=16", m) for m in (
        "unpatched eager", "tileops eager", "unpatched compiled", "tileops compiled")]
    for r in rows:
        assert len(r["rounds"]) == 3 and all(t > 0 for t in r["rounds"])
        assert r["min"] == min(r["rounds"]) and r["gpu_ms"] is None  # no GPU work on the CPU
    text = md.read_text()
    assert "# Models, interleaved (cpu, quick)" in text and "3 rounds of every mode in turn" in text
    eager = {r["mode"]: r["median"] for r in rows if r["mode"].endswith("eager")}
    want = _interleave._percent(eager["tileops eager"] / eager["unpatched eager"] - 1.0)
    assert f"| llama3-8b-layer | layer T=16 | tileops eager | {eager['tileops eager']:.3f} |" in text
    row = next(line for line in text.splitlines()  # tileops eager against unpatched eager
               if line.startswith("| llama3-8b-layer | layer T=16 | tileops eager |"))
    assert row.endswith(f"| {want} |") or row.endswith(f"| {want} (within spread) |")


def test_interleave_marks_changes_within_the_rounds_spread() -> None:
    from tileops.models._interleave import Interleaved, table

    rows = [Interleaved("c", "p", "unpatched compiled", [1.00, 1.10, 1.20]),  # spread 20%
            Interleaved("c", "p", "tileops compiled", [1.25, 1.26, 1.27]),  # +15.8%: within
            Interleaved("c", "q", "unpatched compiled", [1.00, 1.00, 1.01]),
            Interleaved("c", "q", "tileops compiled", [1.20, 1.21, 1.21])]  # +21.0%: outside
    lines = table(rows).splitlines()
    assert lines[2].endswith("| 1.100 | 1.000 | 3 | 18.1% |  |  |")  # (1.20 - 1.00) / 1.10
    assert lines[3].endswith("| 1.5% |  | +14.5% (within spread) |")  # 1.26 / 1.10 - 1 < 18.1%
    assert lines[5].endswith("| 0.8% |  | +21.0% |")  # 1.21 / 1.00 - 1 > 1.0% and 0.8%


def test_interleave_reports_a_noisy_host() -> None:
    from tileops.models._interleave import Interleaved, noise_note

    quiet = [Interleaved("c", "p", "unpatched compiled", [1.00, 1.05, 1.10]),  # spread 9.5%
             Interleaved("c", "p", "tileops compiled", [1.00, 1.01, 1.02])]
    assert noise_note(quiet) == ""
    noisy = quiet + [Interleaved("c", "q", "tileops eager", [1.00, 1.50, 2.00])]  # spread 66.6%
    note = noise_note(noisy)
    assert note.startswith("Host noise: the rounds of 1 of 3 (phase, mode) pairs spread by more than 10% "
                           "(up to 66.6%, q, tileops eager);")


def test_interleave_refuses_unknown_modes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["interleave", "--device", "cpu", "--quick", "--case", "llama3-8b-layer", "--modes",
                  "tileops eager,liger eager"])
    assert "--modes: liger eager" in capsys.readouterr().err


def test_interleave_truncates_changes_toward_zero() -> None:
    from tileops.models import _interleave

    assert _interleave._percent(0.0789) == "+7.8%"
    assert _interleave._percent(-0.0789) == "-7.8%"
    assert _interleave._percent(0.0) == "+0.0%"


@pytest.mark.parametrize("option", [["--rounds", "0"], ["--iters", "0"]])
def test_interleave_refuses_empty_rounds(option: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["interleave", "--device", "cpu", "--quick", "--case", "llama3-8b-layer", *option])
    assert f"{option[0]} must be >= 1, got 0" in capsys.readouterr().err
