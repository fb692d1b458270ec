"""The Python composites follow the composite rules of the C++ base class (issue 27, item 6): the
Python object owns an instance of the C++ composite, its stages are that instance's held sub-ops,
and an eager call is that instance's call with the wiring run from Python. One test (or more) per
rule: the roofline is the composite's manifest formula over its last call; the record holds the
composite's indices, tensors and its stages' records; delegate_for checks the stage, the class
and an instance held twice, under a lock; a failed call is undone; the parameters are checked at
construction; the inspection methods read the C++ instance. And the Python wiring equals the
C++ forward: the same bits and the same records."""

from __future__ import annotations

import dataclasses
import math
import threading
from typing import Any

import pytest
import torch

import samples
import tileops
from test_moe_fp8 import _inputs as _fp8_inputs

H, F = 32, 16


def _moe_inputs(device: str, m: int = 10, e: int = 4, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """bf16 x and weights, float32 router logits."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(m, H, generator=g).to(torch.bfloat16).to(device)
    logits = torch.randn(m, e, generator=g).to(device)
    w13 = (0.2 * torch.randn(e, 2 * F, H, generator=g)).to(torch.bfloat16).to(device)
    w2 = (0.2 * torch.randn(e, H, F, generator=g)).to(torch.bfloat16).to(device)
    return x, logits, w13, w2


def _experts_inputs(device: str, m: int = 6, e: int = 4, k: int = 2) -> tuple[torch.Tensor, ...]:
    """FusedMoEExpertsFwdOp's inputs with distinct, valid ids per token."""
    x, _, w13, w2 = _moe_inputs(device, m, e, seed=5)
    weights = torch.rand(m, k, generator=torch.Generator().manual_seed(6)).to(device)
    ids = torch.tensor([[(t + j) % e for j in range(k)] for t in range(m)], dtype=torch.int32)
    return x, weights, ids.to(device), w13, w2


def _fused_flops(m: int, h: int, e: int, f: int, k: int) -> float:
    # manifest/moe.yaml, FusedMoEFwdOp's roofline
    return 6 * m * k * h * f + 8 * m * k * f + 2 * m * k * h + m * e * (5 + k)


def _skip_without_fp8_kernel(device: str) -> None:
    if samples.without_kernel("MoEGroupedGemmFP8FwdOp", device):
        pytest.skip("no CUDA kernel yet (the error is checked in test_native_path)")


# ---- roofline: the composite's own formula over its last call ------------------------------------


def test_roofline_is_the_composites_formula_over_its_last_call(device: str) -> None:
    op = tileops.FusedMoEFwdOp(top_k=2, renormalize=True)
    with pytest.raises(tileops.UsageError, match="FusedMoEFwdOp: no call has completed yet"):
        op.eval_roofline()
    m, e = 10, 4
    op(*_moe_inputs(device, m, e))
    # Bytes: the effect rules' traffic, every input read once and y written once.
    nbytes = m * H * 2 + m * e * 4 + e * 2 * F * H * 2 + e * H * F * 2 + m * H * 2
    assert op.eval_roofline() == (_fused_flops(m, H, e, F, 2), nbytes)


def test_roofline_after_two_expert_counts_counts_the_last_call_only(device: str) -> None:
    # Summing the held sub-ops would count the pre-permutes of both expert counts.
    op = tileops.FusedMoEFwdOp(top_k=2, renormalize=True)
    op(*_moe_inputs(device, 12, 8, seed=1))
    m, e = 7, 4
    op(*_moe_inputs(device, m, e, seed=2))
    experts = op.held_delegates()[1]
    assert [d.instance_key.partition("#")[0] for d in experts.held_delegates()].count(
        "MoEPrePermuteFwdOp") == 2
    nbytes = m * H * 2 + m * e * 4 + e * 2 * F * H * 2 + e * H * F * 2 + m * H * 2
    assert op.eval_roofline() == (_fused_flops(m, H, e, F, 2), nbytes)


def test_roofline_of_a_layer_called_only_with_fp8_weights(device: str) -> None:
    # The bf16 MLP is held but never called: the formula does not need it.
    _skip_without_fp8_kernel(device)
    x, logits, w13, w2, bias, s13, s2 = _fp8_inputs(device)
    op = tileops.FusedMoEFwdOp(top_k=4, scoring="sigmoid", renormalize=True)
    op(x, logits, w13, w2, bias, s13, s2)
    m, h = x.shape
    e, f = w2.shape[0], w2.shape[2]
    nbytes = (m * h * 2 + m * e * 4 + e * 4  # x, router logits, correction bias
              + e * 2 * f * h + e * h * f  # e4m3 weights
              + e * math.ceil(2 * f / 128) * math.ceil(h / 128) * 4
              + e * math.ceil(h / 128) * math.ceil(f / 128) * 4  # their block scales
              + m * h * 2)  # y
    assert op.eval_roofline() == (_fused_flops(m, h, e, f, 4), nbytes)
    mlp = op.held_delegates()[1].held_delegates()[1]
    assert type(mlp).__name__ == "MoEExpertMLPFwdOp"
    with pytest.raises(tileops.UsageError, match="no call has completed yet"):
        mlp.eval_roofline()


# ---- the record: the composite's indices, tensors and stages ---------------------------------------


def test_record_holds_the_composites_indices_tensors_and_stages(device: str) -> None:
    op = tileops.FusedMoEFwdOp(top_k=2, renormalize=True)
    x, logits, w13, w2 = _moe_inputs(device, 10, 4)
    out = torch.empty_like(x)
    assert op(x, logits, w13, w2, out=out) is out
    call = op.last_call
    assert call.device == ("cpu" if device == "cpu" else f"cuda:{x.get_device()}")
    assert call.has_out
    assert call.indices == {"M": "10", "H": "32", "E": "4", "F": "16", "L": "float32",
                            "T": "bfloat16", "W": "bfloat16", "top_k": "2"}
    assert {n: (t.shape, t.dtype, t.role, t.reads, t.writes) for n, t in call.tensors.items()} == {
        "x": ((10, 32), "bfloat16", "input", 1, 0),
        "router_logits": ((10, 4), "float32", "input", 1, 0),
        "w13": ((4, 32, 32), "bfloat16", "input", 1, 0),
        "w2": ((4, 32, 16), "bfloat16", "input", 1, 0),
        "y": ((10, 32), "bfloat16", "output", 0, 1),
    }
    assert call.written == ()
    assert {s: len(r) for s, r in call.stages.items()} == {"routing": 1, "experts": 1}
    routing = call.stages["routing"][0]
    assert routing.indices["M"] == "10" and routing.indices["E"] == "4"
    assert routing.tensors["logits"].shape == (10, 4) and not routing.has_out
    experts = call.stages["experts"][0]
    assert experts.has_out and experts.tensors["y"].shape == (10, 32)  # the layer's out
    assert {s: len(r) for s, r in experts.stages.items()} == {
        "pre_permute": 1, "pre_permute_quant": 0, "pre_permute_quant_masked": 0, "mlp": 1,
        "mlp_fp8": 0, "mlp_fp8_masked": 0, "post_permute": 1}
    mlp = experts.stages["mlp"][0]
    assert {s: len(r) for s, r in mlp.stages.items()} == {"gate_up": 1, "down": 1}
    # A held sub-op's own record is the one filed under its stage.
    assert op.held_delegates()[0].last_call == routing


def test_a_call_with_nothing_to_write_runs_no_stage_and_is_recorded(device: str) -> None:
    op = tileops.FusedMoEFwdOp(top_k=2)
    _, _, w13, w2 = _moe_inputs(device)
    x = torch.empty(0, H, dtype=torch.bfloat16, device=device)
    logits = torch.empty(0, 4, device=device)
    out = torch.empty(0, H, dtype=torch.bfloat16, device=device)
    assert op(x, logits, w13, w2, out=out) is out
    y = op(x, logits, w13, w2)
    assert y.shape == (0, H) and y.dtype == torch.bfloat16 and y.device == x.device
    call = op.last_call
    assert call.indices["M"] == "0" and not call.has_out
    assert call.stages == {"routing": (), "experts": ()}
    assert op.serving_target is None  # nothing ran, nothing was selected


def test_signature_is_the_composites_checked_before_any_stage(device: str) -> None:
    op = tileops.FusedMoEFwdOp(top_k=2)
    x, logits, w13, w2 = _moe_inputs(device)
    with pytest.raises(tileops.SignatureError, match=r"^FusedMoEFwdOp: input 'w13' declared "
                                                     r"\[E, 2 \* F, H\]: axis 0 must be 3 \(E\)"):
        op(x, logits[:, :3], w13, w2)
    with pytest.raises(tileops.UsageError, match="no call has completed yet"):
        op.held_delegates()[0].last_call  # the routing never ran
    with pytest.raises(tileops.ArgumentTypeError, match="input 'w2' must be a torch.Tensor, got list"):
        op(x, logits, w13, [1.0])


# ---- delegate_for: stage, class, held twice, the lock ---------------------------------------------


def test_delegate_for_refuses_an_unknown_stage() -> None:
    op = tileops.FusedMoEFwdOp(top_k=2)
    with pytest.raises(tileops.UsageError, match=r"FusedMoEFwdOp: delegate_for: unknown stage "
                                                 r"'mlp'; delegate_types declares \[routing, experts\]"):
        op.delegate_for("mlp", None)


def test_delegate_for_refuses_another_class_than_the_stage_declares() -> None:
    experts = tileops.FusedMoEExpertsFwdOp()
    held = [d.instance_key for d in experts.held_delegates()]
    post = tileops.MoEPostPermuteFwdOp()
    with pytest.raises(tileops.UsageError, match="FusedMoEExpertsFwdOp: delegate_for: stage "
                                                 "'pre_permute' holds MoEPrePermuteFwdOp, got "
                                                 "MoEPostPermuteFwdOp"):
        experts.delegate_for("pre_permute", "E=4", post)
    assert [d.instance_key for d in experts.held_delegates()] == held  # nothing held


def test_delegate_for_refuses_one_instance_under_two_keys(device: str) -> None:
    experts = tileops.FusedMoEExpertsFwdOp()
    experts(*_experts_inputs(device))
    pre = experts.delegate_for("pre_permute", "E=4")
    assert pre is experts.held_delegates()[0]  # held by the call, found again
    with pytest.raises(tileops.UsageError, match=r"FusedMoEExpertsFwdOp: delegate_for: "
                                                 rf"{pre.instance_key} is already held under stage "
                                                 r"'pre_permute' \(identity E=4\); one instance is "
                                                 r"held once"):
        experts.delegate_for("pre_permute", "E=5", pre)


def test_delegate_for_holds_a_given_instance_as_passed(device: str) -> None:
    experts = tileops.FusedMoEExpertsFwdOp()
    given = tileops.MoEPrePermuteFwdOp(num_experts=4)
    assert experts.delegate_for("pre_permute", "E=4", given) is given
    assert experts.held_delegates()[0] is given
    experts(*_experts_inputs(device))  # the call finds it held for E=4 and runs it
    assert given.last_call == experts.last_call.stages["pre_permute"][0]
    del experts  # the given instance is its owner's: it outlives the composite
    assert given.last_call.tensors["topk_ids"].shape == (6, 2)


def test_delegate_for_from_threads_holds_one_instance() -> None:
    experts = tileops.FusedMoEExpertsFwdOp()
    before = len(experts.held_delegates())
    barrier = threading.Barrier(8)
    keys: list[str] = []

    def hold() -> None:
        barrier.wait()
        keys.append(experts.delegate_for("pre_permute", "E=6", num_experts=6).instance_key)

    threads = [threading.Thread(target=hold) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(keys) == 8 and len(set(keys)) == 1
    assert len(experts.held_delegates()) == before + 1


def test_a_sub_op_not_held_fails_the_call(device: str) -> None:
    op = tileops.FusedMoEFwdOp(top_k=2, renormalize=True)
    op._routing = tileops.MoETopKRoutingFwdOp(top_k=2, renormalize=True)  # bypasses delegate_for
    with pytest.raises(tileops.UsageError, match=r"FusedMoEFwdOp: sub-op MoETopKRoutingFwdOp#\d+ "
                                                 r"completed a call inside FusedMoEFwdOp#\d+ but is "
                                                 r"not held through delegate_for"):
        op(*_moe_inputs(device))
    with pytest.raises(tileops.UsageError, match="no call has completed yet"):
        op.last_call
    assert op.serving_target is None  # the call that selected it was undone


def test_calls_from_threads_each_run_their_own_open_call(device: str) -> None:
    # Each thread's open calls are its own: the stages' records are filed under the call of
    # the thread that ran them.
    op = tileops.FusedMoEFwdOp(top_k=2, renormalize=True)
    inputs = {m: _moe_inputs(device, m, 4, seed=m) for m in (3, 5, 8, 13)}
    want = {m: op(*args) for m, args in inputs.items()}
    barrier = threading.Barrier(len(inputs))
    failures: list[str] = []

    def work(m: int) -> None:
        barrier.wait()
        for _ in range(10):
            if not torch.equal(op(*inputs[m]), want[m]):
                failures.append(f"M={m}: another result")

    threads = [threading.Thread(target=work, args=(m,)) for m in inputs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    call = op.last_call
    assert call.stages["routing"][0].indices["M"] == call.indices["M"]
    assert call.stages["experts"][0].tensors["x"].shape[0] == int(call.indices["M"])


# ---- undo of a failed call ---------------------------------------------------------------------


def _serving(op: Any) -> list[str | None]:
    return [op.serving_target] + [s for d in op.held_delegates() for s in _serving(d)]


def test_a_call_failing_inside_a_stage_is_undone_and_the_next_call_works(device: str) -> None:
    op = tileops.FusedMoEFwdOp(top_k=2, renormalize=True)
    inputs = _moe_inputs(device)
    routing, experts = op.held_delegates()
    post = experts._post

    def failing_post(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the post-permute stage failed")

    experts._post = failing_post  # routing, pre-permute and MLP run, then a stage fails
    with pytest.raises(RuntimeError, match="the post-permute stage failed"):
        op(*inputs)
    with pytest.raises(tileops.UsageError, match="no call has completed yet"):
        op.last_call
    with pytest.raises(tileops.UsageError, match="no call has completed yet"):
        experts.last_call
    assert routing.last_call.tensors["logits"].shape == (10, 4)  # it completed its own call
    # The first call selected the targets: undone through every held sub-op, kernels dropped.
    assert set(_serving(op)) == {None}
    pre = experts.delegate_for("pre_permute", "E=4")
    assert pre.built_entries("moe_pre_permute") == []
    experts._post = post
    y = op(*inputs)
    mlp = experts.delegate_for("mlp")
    ran = [op, routing, experts, pre, mlp, *mlp.held_delegates(), post]
    assert [o.serving_target for o in ran] == ["BUILTIN"] * 8
    assert len(pre.built_entries("moe_pre_permute")) == 1
    call = op.last_call
    assert {s: len(r) for s, r in call.stages.items()} == {"routing": 1, "experts": 1}
    assert call.stages["experts"][0].stages["post_permute"][0] == post.last_call
    assert torch.equal(y, op(*inputs))


def test_a_stage_refusing_its_inputs_undoes_the_call() -> None:
    # The CPU pre-permute checks the ids' values (a CUDA kernel does not read them on the host).
    experts = tileops.FusedMoEExpertsFwdOp()
    x, weights, ids, w13, w2 = _experts_inputs("cpu")
    bad = ids.clone()
    bad[0, 1] = 7
    with pytest.raises(tileops.SignatureError, match=r"MoEPrePermuteFwdOp: topk_ids\[0, 1\] = 7 "
                                                     r"is outside \[0, 4\)"):
        experts(x, weights, bad, w13, w2)
    assert set(_serving(experts)) == {None}
    experts(x, weights, ids, w13, w2)
    assert experts.serving_target == "BUILTIN"
    assert len(experts.last_call.stages["pre_permute"]) == 1


def test_a_result_not_written_into_the_given_output_fails_and_is_undone(device: str) -> None:
    # The stages write the outputs the C++ call allocated (or the caller's `out`), as a C++
    # forward does; a wiring that returns another tensor fails the close and is undone.
    from tileops import _composites

    op = tileops.MoEExpertMLPFwdOp()
    x, weights, ids, w13, w2 = _experts_inputs(device)
    permuted, offsets, _ = tileops.MoEPrePermuteFwdOp(num_experts=4)(x, ids, None)
    construct, forward = _composites._COMPOSITES["MoEExpertMLPFwdOp"]

    def own_output(o: Any, *args: Any) -> torch.Tensor:
        return forward(o, *args[:-1], None)  # the last stage allocates its own y

    out = torch.empty(permuted.shape[0], H, dtype=torch.bfloat16, device=device)
    _composites._COMPOSITES["MoEExpertMLPFwdOp"] = (construct, own_output)
    try:
        with pytest.raises(tileops.SignatureError, match=r"MoEExpertMLPFwdOp: output 'y': the body "
                                                         r"did not return the output it was given "
                                                         r"to write \(Tensor\[12, 32\] bfloat16"):
            op(permuted, offsets, w13, w2)
        assert op.serving_target is None
        with pytest.raises(tileops.SignatureError, match="did not return the output it was given"):
            op(permuted, offsets, w13, w2, out=out)
        with pytest.raises(tileops.UsageError, match="no call has completed yet"):
            op.last_call
    finally:
        _composites._COMPOSITES["MoEExpertMLPFwdOp"] = (construct, forward)
    assert op(permuted, offsets, w13, w2, out=out) is out
    assert op.last_call.has_out and op.serving_target == "BUILTIN"


# ---- parameters checked at construction -----------------------------------------------------------


def test_parameters_are_checked_at_construction() -> None:
    with pytest.raises(tileops.SignatureError, match="FusedMoEFwdOp: parameter 'scoring' must be "
                                                     "one of 'softmax' | 'sigmoid', got 'tanh'"):
        tileops.FusedMoEFwdOp(top_k=2, scoring="tanh")
    with pytest.raises(tileops.SignatureError, match="FusedMoEFwdOp: parameter 'activation' must "
                                                     "be one of 'silu_and_mul' | 'gelu_and_mul', "
                                                     "got 'relu'"):
        tileops.FusedMoEFwdOp(top_k=2, activation="relu")
    with pytest.raises(tileops.SignatureError, match=r"FusedMoEFwdOp: shape rule 'top_k >= 1' does "
                                                     r"not hold \(top_k = 0\)"):
        tileops.FusedMoEFwdOp(top_k=0)
    with pytest.raises(tileops.SignatureError, match=r"FusedMoEFwdOp: shape rule 'masked_max_rows "
                                                     r">= 0' does not hold"):
        tileops.FusedMoEFwdOp(top_k=2, masked_max_rows=-1)
    with pytest.raises(tileops.SignatureError, match="MoEExpertMLPFwdOp: parameter 'activation' "
                                                     "must be one of"):
        tileops.MoEExpertMLPFwdOp(activation="none")
    with pytest.raises(tileops.ArgumentTypeError, match="FusedMoEFwdOp: parameter 'top_k' must be "
                                                        "an int, got 2.0"):
        tileops.FusedMoEFwdOp(top_k=2.0)  # type: ignore[arg-type]


def test_construction_settles_parameters_as_cpp_does() -> None:
    op = tileops.FusedMoEFwdOp(top_k=2)
    assert op._params["activation"] == "silu_and_mul"  # None settled by the C++ constructor
    experts = op.held_delegates()[1]
    assert experts._params == {"activation": "silu_and_mul", "masked_max_rows": 0}


# ---- the inspection methods ---------------------------------------------------------------------


def test_inspection_reads_the_cpp_instance(device: str) -> None:
    op = tileops.FusedMoEFwdOp(top_k=2, renormalize=True, masked_max_rows=4)
    held = op.held_delegates()
    assert [type(d).__name__ for d in held] == ["MoETopKRoutingFwdOp", "FusedMoEExpertsFwdOp"]
    assert op.held_delegates()[1] is held[1]  # one object per held instance
    assert held[1]._params["masked_max_rows"] == 4
    # The FP8 MLPs are settled by the parameters: held at construction, before any call.
    assert [type(d).__name__ for d in held[1].held_delegates()] == [
        "MoEExpertMLPFwdOp", "MoEExpertMLPFP8FwdOp", "MoEExpertMLPFP8MaskedFwdOp",
        "MoEPostPermuteFwdOp"]
    assert op.serving_target is None and op.iter_kernels() == [] and op.kernel_config() is None
    op(*_moe_inputs(device))
    assert op.serving_target == "BUILTIN" and held[0].serving_target == "BUILTIN"
    routing_entries = held[0].built_entries("moe_routing")
    assert len(routing_entries) == 1
    assert op.built_entries("moe_routing") == []  # the composite builds no kernel of its own
    kernels = op.iter_kernels()
    assert set(held[0].iter_kernels()) <= set(kernels)
    assert set(held[1].iter_kernels()) <= set(kernels)
    assert op.kernel_config() == next((k for k in kernels if k), None)
    assert held[1].held_delegates()[0].instance_key.startswith("MoEPrePermuteFwdOp#")


def test_a_held_sub_op_keeps_its_composite_alive(device: str) -> None:
    op = tileops.FusedMoEFwdOp(top_k=2, renormalize=True)
    inputs = _moe_inputs(device)
    op(*inputs)
    experts = op.held_delegates()[1]
    del op
    x, logits, w13, w2 = inputs
    weights, ids = tileops.MoETopKRoutingFwdOp(top_k=2, renormalize=True)(logits)
    assert experts(x, weights, ids, w13, w2).shape == x.shape
    assert experts.last_call.indices["M"] == "10"


# ---- the Python wiring equals the C++ forward ----------------------------------------------------


def _native(op: Any, *inputs: torch.Tensor | None) -> torch.Tensor:
    """The C++ composite's own forward on the same instance (tileops' allocator and stream)."""
    return torch.ops.tileops._call_native(op.instance_key, list(inputs))[0]


def _without_experts_out(call: Any) -> Any:
    """The one difference of the wirings: C++ FusedMoEFwdOp hands the experts' output to its
    prepare/finalize step (the single-device one copies it into y); the Python wiring, which has
    no injected prepare/finalize, lets the experts write y."""
    if "experts" not in call.stages or "routing" not in call.stages:
        return call
    (experts,) = call.stages["experts"]
    return dataclasses.replace(call, stages={**call.stages, "experts": (
        dataclasses.replace(experts, has_out=False),)})


def _same_bits_and_records(op: Any, *inputs: torch.Tensor | None) -> None:
    want = _native(op, *inputs)
    cpp = op.last_call
    got = op(*inputs)
    assert torch.equal(got, want)
    # The same stages called, with the same records.
    assert _without_experts_out(op.last_call) == _without_experts_out(cpp)


def test_python_wiring_equals_the_cpp_forward(device: str) -> None:
    x, logits, w13, w2 = _moe_inputs(device)
    bias = torch.rand(4, generator=torch.Generator().manual_seed(9)).to(device)
    _same_bits_and_records(tileops.FusedMoEFwdOp(top_k=2, scoring="sigmoid", renormalize=True,
                                                 routed_scaling_factor=2.5), x, logits, w13, w2, bias)
    _same_bits_and_records(tileops.FusedMoEExpertsFwdOp(activation="gelu_and_mul"),
                           *_experts_inputs(device))


def test_python_fp8_wiring_equals_the_cpp_forward(device: str) -> None:
    _skip_without_fp8_kernel(device)
    x, logits, w13, w2, bias, s13, s2 = _fp8_inputs(device)
    _same_bits_and_records(tileops.FusedMoEFwdOp(top_k=4, scoring="sigmoid", renormalize=True,
                                                 n_group=4, topk_group=2),
                           x, logits, w13, w2, bias, s13, s2)
    masked = tileops.FusedMoEFwdOp(top_k=4, scoring="sigmoid", renormalize=True, masked_max_rows=3)
    _same_bits_and_records(masked, x, logits, w13, w2, bias, s13, s2)
    assert len(masked.last_call.stages["experts"][0].stages["mlp_fp8_masked"]) == 1
