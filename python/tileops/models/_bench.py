"""The models bench: transformers models and decoder layers with tileops (apply_tileops) against
the same modules unpatched, in eager mode, under torch.compile, under CUDA graphs (decode) and
against Liger-Kernel where it patches the architecture, with the eager time split by op kind.

Cases (``python -m tileops.models list``):
- layers: one decoder layer (with the model's rotary module) over T tokens of one sequence,
  causal, no KV cache: a Llama-3-8B-shaped layer, and a DeepSeek-V3-shaped MoE layer (MLA
  attention + 256 routed experts, groups, the shared expert) with bf16 experts and with FP8
  block-scaled experts (its unpatched baseline: the same checkpoint dequantized to bf16, which is
  what transformers runs without its hub FP8 kernel; the FP8 experts of transformers are tried
  too and reported as unavailable when they cannot run);
- models: a small model's prefill over T tokens and one decode step with a StaticCache holding T
  tokens (CUDA: also the decode step captured in a CUDA graph).
Weights are random (no download). --quick uses tiny configurations and small T (CPU smoke run).
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import inspect
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from tileops.models import _configs, _fp8
from tileops.models._timing import SPLIT_KINDS, median_ms, split_ms


@dataclass(frozen=True)
class Case:
    name: str
    arch: str
    what: str  # "layer" or "model"
    sizes: dict[str, Any]
    tokens: tuple[int, ...]
    fp8: bool = False
    note: str = ""


_LLAMA3_ROPE = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
LLAMA3_8B = {"hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
             "num_key_value_heads": 8, "head_dim": 128, "rms_norm_eps": 1e-5,
             "max_position_embeddings": 131072, "vocab_size": 128256, "rope_parameters": _LLAMA3_ROPE}
DSV3 = {"hidden_size": 7168, "intermediate_size": 18432, "moe_intermediate_size": 2048,
        "num_attention_heads": 128, "num_key_value_heads": 128, "q_lora_rank": 1536,
        "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128,
        "n_routed_experts": 256, "num_experts_per_tok": 8, "n_group": 8, "topk_group": 4,
        "n_shared_experts": 1, "routed_scaling_factor": 2.5, "first_k_dense_replace": 0,
        "norm_topk_prob": True, "rope_interleave": True, "max_position_embeddings": 163840,
        "vocab_size": 129280, "rope_parameters": {
            "rope_type": "yarn", "rope_theta": 10000.0, "factor": 40.0,
            "original_max_position_embeddings": 4096, "beta_fast": 32, "beta_slow": 1,
            "mscale": 1.0, "mscale_all_dim": 1.0}}
LLAMA32_1B = {"hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16,
              "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 64,
              "rms_norm_eps": 1e-5, "vocab_size": 128256, "tie_word_embeddings": True,
              "max_position_embeddings": 131072,
              "rope_parameters": {**_LLAMA3_ROPE, "factor": 32.0}}
# Qwen3-30B-A3B's layer shape, 4 layers
QWEN3_MOE_SMALL = {"hidden_size": 2048, "intermediate_size": 6144, "moe_intermediate_size": 768,
                   "num_hidden_layers": 4, "num_attention_heads": 32, "num_key_value_heads": 4,
                   "head_dim": 128, "num_experts": 128, "num_experts_per_tok": 8,
                   "norm_topk_prob": True, "vocab_size": 151936, "max_position_embeddings": 40960,
                   "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0}}

CASES: tuple[Case, ...] = (
    Case("llama3-8b-layer", "llama", "layer", LLAMA3_8B, (1, 64, 4096)),
    Case("dsv3-moe-layer-bf16", "deepseek_v3", "layer", DSV3, (1, 64, 4096)),
    Case("dsv3-moe-layer-fp8", "deepseek_v3", "layer", DSV3, (1, 64, 4096), fp8=True,
         note="unpatched: the FP8 checkpoint dequantized to bf16 (transformers without its hub "
              "FP8 kernel)"),
    Case("llama3.2-1b-model", "llama", "model", LLAMA32_1B, (2048,)),
    Case("qwen3-moe-4l-model", "qwen3_moe", "model", QWEN3_MOE_SMALL, (2048,)),
)
QUICK_TOKENS = {"layer": (1, 16), "model": (16,)}

# transformers model type -> Liger-Kernel's patch function (liger_kernel.transformers)
LIGER = {"llama": "apply_liger_kernel_to_llama", "qwen2": "apply_liger_kernel_to_qwen2",
         "qwen3": "apply_liger_kernel_to_qwen3", "qwen3_moe": "apply_liger_kernel_to_qwen3_moe",
         "mixtral": "apply_liger_kernel_to_mixtral", "phi3": "apply_liger_kernel_to_phi3"}


@dataclass
class Row:
    case: str
    phase: str  # "layer T=64", "prefill T=2048", "decode ctx=2048"
    mode: str  # "unpatched eager", "tileops compiled", ...
    ms: float | None
    split: dict[str, float] = field(default_factory=dict)
    note: str = ""


@dataclass
class Options:
    device: str
    quick: bool
    warmup: int
    iters: int
    compile: bool = True
    liger: bool = True
    split: bool = True
    tokens: tuple[int, ...] | None = None  # instead of the cases' (and --quick's) own
    compiled_min_tokens: int | None = None  # apply_tileops's (None: its default)
    log: Callable[[str], None] = lambda s: print(s, file=sys.stderr, flush=True)


# ---- building ---------------------------------------------------------------------------------


def _config(case: Case, quick: bool) -> Any:
    if quick:
        extra = {"first_k_dense_replace": 0} if case.arch == "deepseek_v3" else {}
        return _configs.tiny_config(case.arch, fp8=case.fp8, attn_implementation="sdpa", **extra)
    layers = {"num_hidden_layers": 1} if case.what == "layer" else {}
    return _configs.config(case.arch, **{**case.sizes, **layers, "attn_implementation": "sdpa"})


class LayerUnderTest(nn.Module):
    """One decoder layer with the model's rotary module: forward(h, position_ids) -> h."""

    def __init__(self, rotary_emb: nn.Module, layer: nn.Module) -> None:
        super().__init__()
        self.rotary_emb = rotary_emb
        self.layer = layer

    def forward(self, hidden_states: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        embeddings = self.rotary_emb(hidden_states, position_ids=position_ids)
        out = self.layer(hidden_states, attention_mask=None, position_ids=position_ids,
                         position_embeddings=embeddings)
        return out[0] if isinstance(out, tuple) else out


@contextlib.contextmanager
def _default_dtype(dtype: torch.dtype) -> Iterator[None]:
    saved = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(saved)


def build(case: Case, opts: Options) -> tuple[nn.Module, Any]:
    """The case's module, bf16, random weights, on the device (weights made there: a
    DeepSeek-V3 layer's 22 GB of experts never pass through the host)."""
    from tileops.integrations.transformers._architectures import ARCHITECTURES, modeling_module

    config = _config(case, opts.quick)
    arch = next(a for a in ARCHITECTURES if a.name == case.arch)
    module = modeling_module(arch)
    with torch.device(opts.device), _default_dtype(torch.bfloat16):
        if case.what == "layer":
            prefix = arch.rms_norm.removesuffix("RMSNorm")
            layer = getattr(module, f"{prefix}DecoderLayer")(config, layer_idx=0)
            model: nn.Module = LayerUnderTest(getattr(module, arch.rotary)(config), layer)
        else:
            import transformers

            model = transformers.AutoModelForCausalLM.from_config(config)
    _configs.randomize(model, seed=0)
    model.eval()
    if case.fp8:
        _fp8.fp8_experts(model)
    return model, config


# ---- running ----------------------------------------------------------------------------------


def _cache_keyword(model: nn.Module) -> str:
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def _rewind(cache: Any, tokens: int) -> None:
    """Moves a StaticCache's write position back (its layers keep it as a device tensor)."""
    for layer in getattr(cache, "layers", ()):
        length = getattr(layer, "cumulative_length", None)
        if isinstance(length, torch.Tensor):
            length.sub_(tokens)


class Phase:
    """One measured call: its name, a builder of the callable for a given module (the patched,
    unpatched, compiled or Liger one), and what runs untimed after each call."""

    def __init__(self, name: str, make: Callable[[nn.Module], tuple[Callable[[], Any], Callable[[], Any] | None]],
                 graphable: bool = False) -> None:
        self.name, self.make, self.graphable = name, make, graphable


def _phases(case: Case, model: nn.Module, config: Any, opts: Options) -> list[Phase]:
    device = opts.device
    tokens = opts.tokens or (QUICK_TOKENS[case.what] if opts.quick else case.tokens)
    g = torch.Generator(device=device).manual_seed(1)
    phases: list[Phase] = []
    if case.what == "layer":
        for t in tokens:
            h = torch.randn(1, t, config.hidden_size, generator=g, device=device, dtype=torch.bfloat16)
            pos = torch.arange(t, device=device)[None]
            phases.append(Phase(f"layer T={t}", lambda m, h=h, pos=pos: ((lambda: m(h, pos)), None)))
        return phases
    from transformers import StaticCache

    vocab = config.vocab_size
    for t in tokens:
        ids = torch.randint(0, vocab, (1, t), generator=g, device=device)
        phases.append(Phase(f"prefill T={t}", lambda m, ids=ids: ((lambda: m(ids, use_cache=False).logits), None)))

        def decode(m: nn.Module, ids: torch.Tensor = ids) -> tuple[Callable[[], Any], Callable[[], Any]]:
            cache = StaticCache(config=config, max_cache_len=ids.shape[1] + 8)
            kw = {_cache_keyword(model): cache, "use_cache": True}
            with torch.inference_mode():
                model(ids, **kw)  # the context, written by the eager (unpatched or patched) model
            token = ids[:, -1:].clone()
            return (lambda: m(token, **kw).logits), (lambda: _rewind(cache, 1))

        phases.append(Phase(f"decode ctx={t}", decode, graphable=device == "cuda"))
    return phases


def _graphed(fn: Callable[[], Any], after: Callable[[], Any] | None) -> Callable[[], Any]:
    """`fn` captured in a CUDA graph (after two eager warm-up calls on a side stream)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):
            fn()
            if after is not None:
                after()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


def _measure(case: Case, phase: Phase, mode: str, module: nn.Module, opts: Options, rows: list[Row],
             split: bool = False, graph: bool = False, note: str = "") -> None:
    opts.log(f"  {case.name}: {phase.name}: {mode}")
    try:
        with torch.inference_mode():
            fn, after = phase.make(module)
            if graph:
                fn = _graphed(fn, after)
            ms = median_ms(fn, opts.device, opts.warmup, opts.iters, after)
            parts = split_ms(fn, module, opts.device, after=after) if split and opts.split else {}
    except Exception as exc:  # noqa: BLE001 (reported in the table: the run goes on)
        rows.append(Row(case.name, phase.name, mode, None, note=f"failed: {type(exc).__name__}: {exc}"[:200]))
        return
    rows.append(Row(case.name, phase.name, mode, ms, parts, note))


def _compiled(module: nn.Module) -> nn.Module:
    # Static shapes: one compilation per token count, in its warm-up (no automatic dynamic
    # recompilation at the second token count), each as fast as inductor makes that shape.
    torch._dynamo.reset()
    return torch.compile(module, dynamic=False)  # type: ignore[return-value]


@contextlib.contextmanager
def _scoped_module_globals(case: Case) -> Iterator[None]:
    """Liger-Kernel patches the modeling module (classes and the rotary function) for every model:
    the module's globals are put back afterwards."""
    from tileops.integrations.transformers._architectures import ARCHITECTURES, modeling_module

    module = modeling_module(next(a for a in ARCHITECTURES if a.name == case.arch))
    saved = dict(vars(module))
    try:
        yield
    finally:
        vars(module).clear()
        vars(module).update(saved)


def _liger(case: Case, opts: Options, rows: list[Row]) -> None:
    """Liger-Kernel's patch of the architecture (rope, rms_norm, swiglu), then the case built
    again (the same seeded weights) from the patched classes, measured, and the modeling module
    restored."""
    name = LIGER.get(case.arch)
    if name is None:
        rows.append(Row(case.name, "-", "liger eager", None, note="Liger-Kernel has no patch for this architecture"))
        return
    try:
        liger = importlib.import_module("liger_kernel.transformers")
    except ImportError:
        rows.append(Row(case.name, "-", "liger eager", None, note="liger_kernel is not installed"))
        return
    with _scoped_module_globals(case):
        try:
            kwargs = {"rope": True, "rms_norm": True, "swiglu": True, "cross_entropy": False,
                      "fused_linear_cross_entropy": False}
            params = inspect.signature(getattr(liger, name)).parameters
            getattr(liger, name)(**{k: v for k, v in kwargs.items() if k in params})
            model, config = build(case, opts)
        except Exception as exc:  # noqa: BLE001
            rows.append(Row(case.name, "-", "liger eager", None, note=f"liger failed: {exc}"[:200]))
            return
        for phase in _phases(case, model, config, opts):
            _measure(case, phase, "liger eager", model, opts, rows)
        del model


def run_case(case: Case, opts: Options) -> list[Row]:
    """Every mode of one case: tileops (FP8: on the FP8 experts) and unpatched (FP8: the same
    experts dequantized) in eager mode (with the split by kind), under CUDA graphs (decode) and
    compiled; then Liger-Kernel."""
    from tileops.integrations.transformers import apply_tileops, remove_tileops

    rows: list[Row] = []
    opts.log(f"{case.name}: building")
    model, config = build(case, opts)
    phases = _phases(case, model, config, opts)
    if case.fp8:  # transformers' own FP8 experts (they need its hub kernel)
        for phase in phases:
            _measure(case, phase, "unpatched eager (transformers FP8Experts)", model, opts, rows)
    for label in ("tileops", "unpatched"):
        if label == "tileops":
            opts.log(f"  apply_tileops: {apply_tileops(model, **apply_options(opts))}")
        else:
            remove_tileops(model)
            if case.fp8:
                _fp8.dequantize_experts(model)
        note = case.note if label == "unpatched" else ""
        for phase in phases:
            _measure(case, phase, f"{label} eager", model, opts, rows, split=True, note=note)
            if phase.graphable:
                _measure(case, phase, f"{label} CUDA graph", model, opts, rows, graph=True, note=note)
        if opts.compile:
            compiled = _compiled(model)
            for phase in phases:
                _measure(case, phase, f"{label} compiled", compiled, opts, rows, note=note)
            del compiled
            torch._dynamo.reset()
    del model
    _free(opts)
    if opts.liger:
        _liger(case, opts, rows)
        _free(opts)
    return rows


def apply_options(opts: Options) -> dict[str, int]:
    """apply_tileops's keywords for a run: compiled_min_tokens when the run names one."""
    return {} if opts.compiled_min_tokens is None else {"compiled_min_tokens": opts.compiled_min_tokens}


def _free(opts: Options) -> None:
    gc.collect()
    if opts.device == "cuda":
        torch.cuda.empty_cache()


# ---- reporting --------------------------------------------------------------------------------


def table(rows: list[Row]) -> str:
    """A markdown table: one line per (case, phase, mode), the split in ms per kind."""
    lines = ["| case | phase | mode | ms | rms_norm | rope | moe | attention | other | vs unpatched eager | note |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    base = {(r.case, r.phase): r.ms for r in rows if r.mode == "unpatched eager" and r.ms}
    for r in rows:
        ms = "-" if r.ms is None else f"{r.ms:.3f}"
        parts = [f"{r.split[k]:.3f}" if k in r.split else "" for k in (*SPLIT_KINDS, "other")]
        ref = base.get((r.case, r.phase))
        speedup = f"{ref / r.ms:.2f}x" if ref and r.ms else ""
        lines.append(f"| {r.case} | {r.phase} | {r.mode} | {ms} | {' | '.join(parts)} | {speedup} | {r.note} |")
    return "\n".join(lines)


MODES = ("unpatched eager", "unpatched compiled", "unpatched CUDA graph", "tileops eager",
         "tileops compiled", "tileops CUDA graph", "liger eager")


def pivot(rows: list[Row]) -> str:
    """ms per (case, phase) and mode, side by side (the goals compare these)."""
    seen = [m for m in MODES if any(r.mode == m and r.ms is not None for r in rows)]
    cells: dict[tuple[str, str], dict[str, float]] = {}
    for r in rows:
        if r.ms is not None and r.mode in seen:
            cells.setdefault((r.case, r.phase), {})[r.mode] = r.ms
    lines = ["| case | phase | " + " | ".join(seen) + " |", "| --- | --- |" + " ---: |" * len(seen)]
    for (case, phase), by_mode in cells.items():
        values = [f"{by_mode[m]:.3f}" if m in by_mode else "-" for m in seen]
        lines.append(f"| {case} | {phase} | " + " | ".join(values) + " |")
    return "\n".join(lines)
