"""The attention ops from PyTorch: results against a float64 torch expression of the contract,
the merge of two key sets equal to the whole, the KV-cache write against index_copy_, errors by
type and message, a fullgraph compile of an attention step (dynamic token counts included), and
CUDA-graph capture and replay on CUDA (skipped without a GPU)."""

from __future__ import annotations

import math

import pytest
import torch

import samples
import tileops
from conftest import requires_cuda


def torch_varlen(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_q: torch.Tensor,
                 cu_k: torch.Tensor, causal: bool = True, softmax_scale: float | None = None,
                 window_left: int = -1, softcap: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """The contract in float64: (out [Tq, Hq, D], lse [Hq, Tq])."""
    tq, hq, d = q.shape
    group = hq // k.shape[1]
    scale = softmax_scale if softmax_scale is not None else 1 / math.sqrt(d)
    out = torch.zeros(tq, hq, d, dtype=torch.float64)
    lse = torch.full((hq, tq), float("-inf"), dtype=torch.float64)
    cu_q, cu_k = cu_q.tolist(), cu_k.tolist()
    for b in range(len(cu_q) - 1):
        qs = q[cu_q[b]:cu_q[b + 1]].double().cpu()
        ks = k[cu_k[b]:cu_k[b + 1]].double().cpu().repeat_interleave(group, dim=1)
        vs = v[cu_k[b]:cu_k[b + 1]].double().cpu().repeat_interleave(group, dim=1)
        sq, sk = qs.shape[0], ks.shape[0]
        if sq == 0 or sk == 0:
            continue
        s = torch.einsum("ihd,jhd->hij", qs, ks) * scale
        if softcap > 0:
            s = softcap * torch.tanh(s / softcap)
        i = torch.arange(sq)[:, None]
        j = torch.arange(sk)[None, :]
        visible = torch.ones(sq, sk, dtype=torch.bool)
        if causal:
            visible &= j <= i + sk - sq
        if window_left >= 0:
            visible &= j >= i + sk - sq - window_left
        s = s.masked_fill(~visible, float("-inf"))
        row_lse = torch.logsumexp(s, dim=-1)  # [H, sq]
        p = torch.exp(s - row_lse[..., None]).nan_to_num(0.0)
        out[cu_q[b]:cu_q[b + 1]] = torch.einsum("hij,jhd->ihd", p, vs)
        lse[:, cu_q[b]:cu_q[b + 1]] = row_lse
    return out, lse


_TOL = {torch.float32: 1e-5, torch.float16: 1e-3, torch.bfloat16: 1.6e-2}


def _close(got: torch.Tensor, want: torch.Tensor, dtype: torch.dtype) -> None:
    got = got.double().cpu()
    finite = torch.isfinite(want)
    assert torch.equal(torch.isfinite(got), finite) and torch.equal(got[~finite], want[~finite])
    err = ((got[finite] - want[finite]).abs() / (1 + want[finite].abs())).max().item() if finite.any() else 0
    assert err <= _TOL[dtype], f"max relative error {err}"


def _skip_without_kernel(op: str, device: str) -> None:
    if samples.without_kernel(op, device):
        pytest.skip(f"{op} has no CUDA kernel in this build (the error is checked in "
                    "test_native_path)")


VARLEN = [  # head dims the Hopper kernel takes (64, 128, 256), so that CUDA runs every case
    ({}, [5, 3, 0, 2], [5, 7, 0, 1], 4, 2, 64),               # sq == sk, sq < sk, empty, sq > sk
    ({"causal": False}, [4, 6], [9, 2], 6, 3, 128),
    ({"window_left": 2}, [6, 3], [6, 10], 8, 2, 64),
    ({"causal": False, "window_left": 1, "softcap": 4.0}, [5], [7], 2, 1, 256),
    ({"softmax_scale": 0.2, "softcap": 2.0}, [7, 1], [3, 9], 4, 4, 64),
]


@pytest.mark.parametrize("params,q_lengths,k_lengths,hq,hkv,d", VARLEN)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_varlen_matches_the_contract(params, q_lengths, k_lengths, hq, hkv, d, dtype, device) -> None:
    _skip_without_kernel("GroupedQueryAttentionVarlenFwdOp", device)
    if device != "cpu" and dtype == torch.float32:
        pytest.skip("the CUDA kernel takes float16 and bfloat16")
    case = samples.attention_varlen(device, dtype, q_lengths, k_lengths, hq, hkv, d, **params)
    out, lse = samples.build(case)(*case.inputs)
    assert out.dtype == dtype and lse.dtype == torch.float32
    want_out, want_lse = torch_varlen(*case.inputs, **case.params)
    _close(out, want_out, dtype)
    _close(lse, want_lse, torch.float32)


PAGED = [  # (params, q lengths, k lengths, Hq, Hkv, D, page): decoding, mixed, chunked prefill
    ({}, [1, 1, 1, 1], [40, 1, 16, 100], 8, 2, 128, 16),
    ({}, [1, 6, 0, 1, 3], [37, 20, 0, 64, 2], 4, 2, 64, 16),             # mixed, sq > sk
    ({"causal": False, "window_left": 7}, [4, 1], [50, 9], 6, 3, 64, 64),
    ({"softmax_scale": 0.2, "softcap": 3.0}, [8, 1], [8, 70], 4, 1, 256, 32),
    ({}, [2, 1], [130, 5], 4, 4, 64, 128),
]


@pytest.mark.parametrize("params,q_lengths,k_lengths,hq,hkv,d,page", PAGED)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_paged_equals_varlen_on_the_same_keys(params, q_lengths, k_lengths, hq, hkv, d, page,
                                              dtype, device) -> None:
    _skip_without_kernel("GroupedQueryAttentionPagedFwdOp", device)
    if device != "cpu" and dtype == torch.float32:
        pytest.skip("the CUDA kernels take float16 and bfloat16")
    case = samples.attention_paged(device, dtype, q_lengths, k_lengths, hq, hkv, d, page, **params)
    out, lse = samples.build(case)(*case.inputs)
    q = case.inputs[0]
    k, v, cu_k = case.extra["packed"]
    if device == "cpu":  # the same arithmetic over the same keys: bit for bit
        want, want_lse = tileops.GroupedQueryAttentionVarlenFwdOp(**case.params)(
            q, k, v, case.inputs[3], cu_k)
        assert torch.equal(out, want) and torch.equal(lse, want_lse)
    want_out, want_lse = torch_varlen(q, k, v, case.inputs[3], cu_k, **case.params)
    _close(out, want_out, dtype)
    _close(lse, want_lse, torch.float32)


def test_merge_of_two_key_sets_equals_the_whole(device: str) -> None:
    # Chunked prefill: the prefix every query sees (not causal) and each sequence's own keys
    # (causal, square) merged equal causal attention over all the keys.
    _skip_without_kernel("GroupedQueryAttentionVarlenFwdOp", device)
    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    q_lengths, k_lengths = [4, 5, 3], [9, 5, 10]
    case = samples.attention_varlen(device, dtype, q_lengths, k_lengths, 4, 2, 64)
    q, k, v, cu_q, cu_k = case.inputs
    prefix = [kl - ql for ql, kl in zip(q_lengths, k_lengths)]
    starts = samples.offsets(k_lengths).tolist()
    pre_rows = [starts[b] + j for b in range(3) for j in range(prefix[b])]
    own_rows = [starts[b] + j for b in range(3) for j in range(prefix[b], k_lengths[b])]
    pre = torch.tensor(pre_rows, device=device)
    own = torch.tensor(own_rows, device=device)
    out_a, lse_a = tileops.GroupedQueryAttentionVarlenFwdOp(causal=False)(
        q, k[pre], v[pre], cu_q, samples.offsets(prefix).to(device))
    out_b, lse_b = tileops.GroupedQueryAttentionVarlenFwdOp()(q, k[own], v[own], cu_q, cu_q)
    assert torch.isinf(lse_a[:, 4:9]).all()  # sequence 1 has no prefix
    out, lse = tileops.AttentionMergeStatesFwdOp()(out_a, lse_a, out_b, lse_b)
    whole, whole_lse = tileops.GroupedQueryAttentionVarlenFwdOp()(q, k, v, cu_q, cu_k)
    _close(out, whole.double().cpu(), dtype)
    _close(lse, whole_lse.double().cpu(), torch.float32)


def test_kv_cache_write_is_an_index_copy(device: str) -> None:
    for dtype in (torch.bfloat16, torch.float32):
        case = samples.kv_cache_write(device, dtype, 9, 2, 16, 5, 4)
        key, value, k_cache, v_cache, slots = case.inputs
        want_k = k_cache.clone().view(-1, 2, 16)
        want_v = v_cache.clone().view(-1, 2, 16)
        kept = slots >= 0
        want_k.index_copy_(0, slots[kept], key[kept])
        want_v.index_copy_(0, slots[kept], value[kept])
        assert tileops.KVCacheWriteFwdOp()(key, value, k_cache, v_cache, slots) is None
        assert torch.equal(k_cache.view(-1, 2, 16), want_k)
        assert torch.equal(v_cache.view(-1, 2, 16), want_v)


def test_merge_handles_minus_infinity(device: str) -> None:
    case = samples.attention_merge(device, torch.bfloat16, 6, 3, 16)
    out_a, lse_a, out_b, lse_b = case.inputs
    out, lse = tileops.AttentionMergeStatesFwdOp()(*case.inputs)
    la, lb = lse_a.double().cpu(), lse_b.double().cpu()
    m = torch.maximum(la, lb)
    want_lse = torch.where(torch.isinf(m), m, m + torch.log(torch.exp(la - m) + torch.exp(lb - m)))
    fa = torch.exp(la - want_lse).nan_to_num(0.0).T[..., None]  # [T, H, 1]
    fb = torch.exp(lb - want_lse).nan_to_num(0.0).T[..., None]
    want = out_a.double().cpu() * fa + out_b.double().cpu() * fb
    _close(lse, want_lse, torch.float32)
    _close(out, want, torch.bfloat16)
    assert lse[0, 0] == float("-inf") and torch.all(out[0, 0] == 0)  # both sides -inf


# ---- errors -------------------------------------------------------------------------------------


def test_varlen_errors_name_the_rule() -> None:
    op = tileops.GroupedQueryAttentionVarlenFwdOp()
    q = torch.randn(5, 6, 8)
    cu = torch.tensor([0, 2, 5], dtype=torch.int32)
    with pytest.raises(tileops.SignatureError, match=r"shape rule 'Hq % Hkv == 0'"):
        op(q, torch.randn(5, 4, 8), torch.randn(5, 4, 8), cu, cu)
    k = torch.randn(5, 2, 8)
    with pytest.raises(tileops.DTypeError, match="cu_seqlens_q"):
        op(q, k, k, cu.long(), cu)
    with pytest.raises(tileops.DTypeError, match="'k'"):
        op(q, k.half(), k, cu, cu)
    with pytest.raises(tileops.SignatureError,
                       match=r"cu_seqlens_q\[2\] = 4 breaks 0 = cu_seqlens_q\[0\] <= \.\.\. <= "
                             r"cu_seqlens_q\[2\] = 5 \(Tq, the tokens of q\)"):
        op(q, k, k, torch.tensor([0, 2, 4], dtype=torch.int32), cu)
    with pytest.raises(tileops.SignatureError, match=r"cu_seqlens_k\[2\] = 2 breaks"):
        op(q, k, k, cu, torch.tensor([0, 3, 2], dtype=torch.int32))
    with pytest.raises(tileops.SignatureError, match=r"shape rule 'window_left >= -1'"):
        tileops.GroupedQueryAttentionVarlenFwdOp(window_left=-3)
    with pytest.raises(TypeError, match="must be a float"):
        tileops.GroupedQueryAttentionVarlenFwdOp(softmax_scale="0.1")  # type: ignore[arg-type]
    out, lse = op(q, k, k, cu, cu)  # still usable
    assert out.shape == (5, 6, 8) and lse.shape == (6, 5)


def test_kv_cache_write_errors_name_the_slot() -> None:
    op = tileops.KVCacheWriteFwdOp()
    key = torch.randn(3, 2, 8)
    cache = torch.zeros(2, 4, 2, 8)
    with pytest.raises(tileops.SignatureError,
                       match=r"slot_mapping\[2\] = 8 is outside the cache's 8 slots"):
        op(key, key, cache, cache.clone(), torch.tensor([0, 1, 8]))
    assert torch.equal(cache, torch.zeros(2, 4, 2, 8))  # nothing written
    with pytest.raises(tileops.DTypeError, match="slot_mapping"):
        op(key, key, cache, cache.clone(), torch.tensor([0, 1, 2], dtype=torch.int32))
    with pytest.raises(tileops.SignatureError, match="must be contiguous"):
        op(key, key, torch.zeros(2, 4, 2, 16)[..., :8], cache.clone(), torch.tensor([0, 1, 2]))


def test_paged_errors_name_the_entry() -> None:
    op = tileops.GroupedQueryAttentionPagedFwdOp()
    q = torch.randn(3, 2, 8)
    cache = torch.randn(4, 16, 1, 8)
    cu = torch.tensor([0, 1, 3], dtype=torch.int32)
    table = torch.tensor([[0, 1], [2, 3]], dtype=torch.int32)
    with pytest.raises(tileops.SignatureError,
                       match=r"seqused_k\[1\] = 40 keys need 3 pages of 16, more than the block "
                             r"table's 2 \(max_blocks_per_seq\)"):
        op(q, cache, cache, cu, torch.tensor([5, 40], dtype=torch.int32), table)
    with pytest.raises(tileops.SignatureError, match=r"block_table\[0\]\[1\] = 9 is not a block"):
        op(q, cache, cache, cu, torch.tensor([20, 4], dtype=torch.int32),
           torch.tensor([[0, 9], [2, 3]], dtype=torch.int32))
    with pytest.raises(tileops.DTypeError, match="block_table"):
        op(q, cache, cache, cu, torch.tensor([5, 4], dtype=torch.int32), table.long())
    with pytest.raises(tileops.SignatureError, match="must be contiguous"):
        op(q, torch.randn(4, 16, 1, 16)[..., :8], cache, cu, torch.tensor([5, 4], dtype=torch.int32),
           table)
    out, lse = op(q, cache, cache, cu, torch.tensor([5, 4], dtype=torch.int32), table)
    assert out.shape == (3, 2, 8) and lse.shape == (2, 3)


def test_merge_errors_name_the_tensor() -> None:
    op = tileops.AttentionMergeStatesFwdOp()
    a = torch.randn(4, 2, 8)
    with pytest.raises(tileops.SignatureError, match="lse_a"):
        op(a, torch.randn(4, 2), a, torch.randn(2, 4))


# ---- torch.compile and CUDA graphs -------------------------------------------------------------


class AttentionStep(torch.nn.Module):
    """One attention layer's step of a serving engine: the new keys and values into the paged
    cache, attention of the new queries over the sequences' keys, and the merge with a state over
    a shared prefix (cascade attention)."""

    def __init__(self) -> None:
        super().__init__()
        self.write = tileops.KVCacheWriteFwdOp()
        self.attend = tileops.GroupedQueryAttentionVarlenFwdOp()
        self.merge = tileops.AttentionMergeStatesFwdOp()

    def forward(self, q, k, v, cu_q, cu_k, k_cache, v_cache, slots, prefix_out, prefix_lse):
        self.write(k, v, k_cache, v_cache, slots)
        out, lse = self.attend(q, k, v, cu_q, cu_k)
        return self.merge(prefix_out, prefix_lse, out, lse)


def _recording_backend(graphs: list[torch.fx.GraphModule]):
    """A torch.compile backend that keeps each graph it gets and runs it through aot_eager (the
    ops' fakes and functionalization, as inductor would see them)."""

    def backend(gm: torch.fx.GraphModule, example_inputs):
        graphs.append(gm)
        return torch._dynamo.backends.debugging.aot_eager(gm, example_inputs)

    return backend


def _step_inputs(device: str, lengths: list[int], seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    t = sum(lengths)
    dtype = torch.bfloat16
    q = torch.randn(t, 4, 64, generator=g).to(dtype)
    k = torch.randn(t, 2, 64, generator=g).to(dtype)
    v = torch.randn(t, 2, 64, generator=g).to(dtype)
    cu_q = samples.offsets(lengths)
    cu_k = cu_q.clone()  # its own tensor on every device, as .to("cuda") would make it
    caches = [torch.zeros(8, 16, 2, 64, dtype=dtype) for _ in range(2)]
    slots = torch.randperm(128, generator=g)[:t]
    prefix_out = torch.randn(t, 4, 64, generator=g).to(dtype)
    prefix_lse = torch.randn(4, t, generator=g) + 3
    return [x.to(device) for x in (q, k, v, cu_q, cu_k, *caches, slots, prefix_out, prefix_lse)]


def test_fullgraph_compile_of_an_attention_step(device: str) -> None:
    _skip_without_kernel("GroupedQueryAttentionVarlenFwdOp", device)
    torch._dynamo.reset()
    graphs: list[torch.fx.GraphModule] = []
    backend = _recording_backend(graphs)
    step = AttentionStep()
    compiled = torch.compile(step, fullgraph=True, backend=backend, dynamic=False)
    for lengths, seed in (([5, 3, 7], 1), ([9, 2], 2), ([1, 4, 4, 6], 3)):
        got_in = _step_inputs(device, lengths, seed)
        want_in = _step_inputs(device, lengths, seed)
        # the token dimensions and both offsets' length (the sequence count) vary: the op's
        # cu_seqlens_q and cu_seqlens_k are both [B + 1], so marking only one would specialize it
        for i, dim in ((0, 0), (1, 0), (2, 0), (3, 0), (4, 0), (7, 0), (8, 0), (9, 1)):
            torch._dynamo.mark_dynamic(got_in[i], dim)
        got = compiled(*got_in)
        want = step(*want_in)
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w, rtol=0, atol=0)
        torch.testing.assert_close(got_in[5], want_in[5], rtol=0, atol=0)  # the written caches
        torch.testing.assert_close(got_in[6], want_in[6], rtol=0, atol=0)
    assert len(graphs) == 1, "one graph for every packing (dynamic token and sequence counts)"
    calls = [n for n in graphs[0].graph.nodes if n.op == "call_function" and "tileops" in str(n.target)]
    assert len(calls) == 3


@requires_cuda
def test_cuda_graph_capture_and_replay_of_the_write_and_merge() -> None:
    write, merge = tileops.KVCacheWriteFwdOp(), tileops.AttentionMergeStatesFwdOp()
    static = _step_inputs("cuda", [5, 3, 8], 1)
    key, value, k_cache, v_cache, slots = static[1], static[2], static[5], static[6], static[7]
    out_a, lse_a = static[8], static[9]
    out_b = torch.randn_like(out_a)
    lse_b = torch.randn_like(lse_a)

    def step():
        write(key, value, k_cache, v_cache, slots)
        return merge(out_a, lse_a, out_b, lse_b)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            step()  # warm-up: kernels built before capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out, static_lse = step()
    for seed in (2, 3):
        fresh = _step_inputs("cuda", [5, 3, 8], seed)
        for dst, src in ((key, fresh[1]), (value, fresh[2]), (out_a, fresh[8]), (lse_a, fresh[9])):
            dst.copy_(src)
        slots.copy_(torch.randperm(128, device="cuda")[:16])
        k_cache.zero_()
        v_cache.zero_()
        graph.replay()
        torch.cuda.synchronize()
        want_k, want_v = torch.zeros_like(k_cache), torch.zeros_like(v_cache)
        write(key, value, want_k, want_v, slots)
        want_out, want_lse = merge(out_a, lse_a, out_b, lse_b)
        assert torch.equal(k_cache, want_k) and torch.equal(v_cache, want_v)
        assert torch.equal(static_out, want_out) and torch.equal(static_lse, want_lse)


@requires_cuda
def test_cuda_graph_capture_and_replay_of_the_varlen_attention() -> None:
    _skip_without_kernel("GroupedQueryAttentionVarlenFwdOp", "cuda")
    attend = tileops.GroupedQueryAttentionVarlenFwdOp()
    static = _step_inputs("cuda", [64, 128, 32], 1)
    q, k, v, cu_q, cu_k = static[:5]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            attend(q, k, v, cu_q, cu_k)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out, static_lse = attend(q, k, v, cu_q, cu_k)
    # Replayed with other values and another packing of the same token count: the offsets are
    # read on the device only.
    for seed, lengths in ((2, [64, 128, 32]), (3, [200, 0, 24])):
        fresh = _step_inputs("cuda", lengths, seed)
        for dst, src in zip((q, k, v, cu_q, cu_k), fresh[:5]):
            dst.copy_(src)
        graph.replay()
        torch.cuda.synchronize()
        want_out, want_lse = attend(q, k, v, cu_q, cu_k)
        assert torch.equal(static_out, want_out) and torch.equal(static_lse, want_lse)


class DecodeStep(torch.nn.Module):
    """One decoding step of a serving engine over a paged cache: the new tokens' keys and values
    into their slots, then paged attention of the new queries over every sequence's keys."""

    def __init__(self) -> None:
        super().__init__()
        self.write = tileops.KVCacheWriteFwdOp()
        self.attend = tileops.GroupedQueryAttentionPagedFwdOp()

    def forward(self, q, k, v, k_cache, v_cache, slots, cu_q, seqused_k, block_table):
        self.write(k, v, k_cache, v_cache, slots)
        return self.attend(q, k_cache, v_cache, cu_q, seqused_k, block_table)


def _decode_inputs(device: str, lengths: list[int], seed: int) -> list[torch.Tensor]:
    """A batch of sequences with lengths[b] keys already cached (pages of 16 in a cache of 32
    blocks, 4 table entries per sequence), each decoding one new token at slot lengths[b]."""
    g = torch.Generator().manual_seed(seed)
    b, dtype = len(lengths), torch.bfloat16
    q = torch.randn(b, 4, 64, generator=g).to(dtype)
    k = torch.randn(b, 2, 64, generator=g).to(dtype)
    v = torch.randn(b, 2, 64, generator=g).to(dtype)
    k_cache = torch.randn(32, 16, 2, 64, generator=g).to(dtype)
    v_cache = torch.randn(32, 16, 2, 64, generator=g).to(dtype)
    table = torch.randperm(32, generator=g)[: 4 * b].view(b, 4).to(torch.int32)
    slots = torch.tensor([int(table[i, n // 16]) * 16 + n % 16 for i, n in enumerate(lengths)])
    cu_q = torch.arange(b + 1, dtype=torch.int32)
    seqused = torch.tensor(lengths, dtype=torch.int32) + 1
    return [x.to(device) for x in (q, k, v, k_cache, v_cache, slots, cu_q, seqused, table)]


def test_fullgraph_compile_of_a_paged_decode_step(device: str) -> None:
    _skip_without_kernel("GroupedQueryAttentionPagedFwdOp", device)
    torch._dynamo.reset()
    graphs: list[torch.fx.GraphModule] = []
    backend = _recording_backend(graphs)
    step = DecodeStep()
    compiled = torch.compile(step, fullgraph=True, backend=backend, dynamic=False)
    for lengths, seed in (([5, 30, 17], 1), ([63, 0], 2), ([1, 2, 3, 40], 3)):
        got_in = _decode_inputs(device, lengths, seed)
        want_in = _decode_inputs(device, lengths, seed)
        # the batch varies: the tokens, the slots, the offsets, the lengths and the table rows
        for i, dim in ((0, 0), (1, 0), (2, 0), (5, 0), (6, 0), (7, 0), (8, 0)):
            torch._dynamo.mark_dynamic(got_in[i], dim)
        got = compiled(*got_in)
        want = step(*want_in)
        for g_, w in zip(got, want):
            torch.testing.assert_close(g_, w, rtol=0, atol=0)
        torch.testing.assert_close(got_in[3], want_in[3], rtol=0, atol=0)  # the written caches
    assert len(graphs) == 1, "one graph for every batch size"
    calls = [n for n in graphs[0].graph.nodes if n.op == "call_function" and "tileops" in str(n.target)]
    assert len(calls) == 2


@requires_cuda
def test_cuda_graph_of_a_paged_decode_step_replays_with_new_lengths() -> None:
    # Captured once; replayed after the lengths (seqused_k), the slots, the tables and the queries
    # change: the kernels read them on the device only, and their work split depends on shapes.
    _skip_without_kernel("GroupedQueryAttentionPagedFwdOp", "cuda")
    step = DecodeStep()
    static = _decode_inputs("cuda", [5, 30, 17, 40], 1)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            step(*[x.clone() for x in static])
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out, static_lse = step(*static)
    for seed, lengths in ((2, [62, 0, 16, 3]), (3, [1, 47, 15, 33])):
        fresh = _decode_inputs("cuda", lengths, seed)
        for dst, src in zip(static, fresh):
            dst.copy_(src)
        want_in = [x.clone() for x in fresh]
        graph.replay()
        torch.cuda.synchronize()
        want_out, want_lse = step(*want_in)
        assert torch.equal(static_out, want_out) and torch.equal(static_lse, want_lse)
        assert torch.equal(static[3], want_in[3])  # the caches written alike
