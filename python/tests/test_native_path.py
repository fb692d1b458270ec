"""The boundary's results equal, bit for bit, those of the C++ caller's path (tileops' own
allocator and stream, inputs copied into tileops tensors) on the same inputs: the wrapping,
torch's allocator and torch's stream change nothing. On CUDA also under a non-default stream,
and under CUDA-graph capture and replay of the whole block."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import samples
import tileops
from conftest import requires_cuda


def _on(case: samples.Case, device: str) -> samples.Case:
    moved = tuple(t.to(device) if t is not None else None for t in case.inputs)
    params = {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in case.params.items()}
    return dataclasses.replace(case, inputs=moved, params=params)


@pytest.mark.parametrize("case", samples.cases("cpu"), ids=lambda c: f"{c.op}-{c.label}")
def test_boundary_equals_native_path(case: samples.Case, device: str) -> None:
    case = _on(case, device)
    op = samples.build(case)
    if samples.without_kernel(case.op, device):
        with pytest.raises(RuntimeError, match="in-tree kernels do not run on cuda"):
            op(*case.inputs)
        return
    if device != "cpu" and case.cuda_refusal is not None:
        with pytest.raises(tileops.DispatchError, match=case.cuda_refusal):
            op(*case.inputs)
        return
    inputs = [t.clone() if t is not None else None for t in case.inputs]
    got = op(*inputs)
    native = torch.ops.tileops._call_native(op.instance_key, list(case.inputs))
    got = () if got is None else got if isinstance(got, tuple) else (got,)
    # The native path returns the outputs, then the inputs the call wrote.
    written = [i for i, decl in enumerate(op._meta["inputs"]) if decl["mutated"]]
    got = (*got, *(inputs[i] for i in written))
    assert len(got) == len(native)
    for g, n in zip(got, native):
        assert g.dtype == n.dtype and g.shape == n.shape
        assert torch.equal(g, n), f"{case.op}: boundary and C++ path differ"


def test_outputs_are_the_tensors_torch_allocated(device: str) -> None:
    # A CUDA output, and a CPU one of whole 64-byte lines, is allocated as the torch tensor that
    # is returned (not a view of a byte block); a CPU output of a partial line is such a view,
    # its block padded for the CPU kernels.
    op = tileops.RMSNormFwdOp(normalized_shape=[4096])
    x = torch.randn(2, 4096, dtype=torch.bfloat16, device=device)
    w = torch.randn(4096, dtype=torch.bfloat16, device=device)
    y = op(x, w)
    assert y._base is None and y.is_contiguous() and y.dtype == torch.bfloat16
    small = tileops.RMSNormFwdOp(normalized_shape=[3])
    v = torch.tensor([[1.0, -2.0, 3.0]], device=device)
    z = small(v, torch.ones(3, device=device))
    if device == "cpu":
        assert z._base is not None and z._base.numel() * z._base.element_size() == 64
    else:
        assert z._base is None
    want = v.double() / torch.sqrt((v.double() ** 2).mean() + 1e-6)
    torch.testing.assert_close(z.double(), want, rtol=1e-6, atol=1e-6)


@requires_cuda
def test_runs_on_torch_current_stream() -> None:
    case = samples.rms_norm("cuda", torch.bfloat16, (4096,), 4096)
    op = samples.build(case)
    x, weight = case.inputs[0], case.inputs[1]
    want = op(x, weight)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        # The input is produced on the side stream after a long sleep: only a kernel queued on the
        # same stream reads it finished. On any other stream it would read it unwritten.
        torch.cuda._sleep(100_000_000)
        produced = x * 1
        got = op(produced, weight)
    torch.cuda.synchronize()
    assert torch.equal(got, want)


@requires_cuda
def test_threads_on_different_streams_each_run_on_their_own() -> None:
    import threading

    case = samples.rms_norm("cuda", torch.bfloat16, (4096,), 4096)
    op = samples.build(case)
    x, weight = case.inputs[0], case.inputs[1]
    want = op(x, weight)
    torch.cuda.synchronize()
    results: dict[int, list[bool]] = {}
    start = threading.Barrier(2)

    def work(index: int) -> None:
        # Each thread produces its inputs on its own stream after a sleep of its own length: a
        # kernel launched on the other thread's stream would read them unwritten.
        stream = torch.cuda.Stream()
        ok = []
        with torch.cuda.stream(stream):
            start.wait()
            for round_ in range(20):
                torch.cuda._sleep(2_000_000 * (1 + (index + round_) % 3))
                produced = x * 1
                ok.append(op(produced, weight))
        stream.synchronize()
        results[index] = [torch.equal(got, want) for got in ok]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {0: [True] * 20, 1: [True] * 20}


@requires_cuda
def test_cuda_graph_capture_and_replay_of_the_block() -> None:
    from test_block_compile import Block, _inputs

    dtype = torch.bfloat16
    block = Block("cuda", dtype)
    static_x, static_r = _inputs(16, "cuda", dtype, seed=1)
    # Warm up with real tensors on a side stream (kernels built, targets selected).
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            block(static_x.clone(), static_r.clone())
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_y = block(static_x, static_r)
    for seed in (2, 3):
        x, r = _inputs(16, "cuda", dtype, seed=seed)
        static_x.copy_(x)
        static_r.copy_(r)
        graph.replay()
        torch.cuda.synchronize()
        want = block(x, r)
        assert torch.equal(static_y, want)
        assert torch.equal(static_r, r)  # the fused add wrote the captured residual as eager did
