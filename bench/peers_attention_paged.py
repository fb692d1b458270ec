#!/usr/bin/env python3
"""Peers of the paged attention op (GroupedQueryAttentionPagedFwdOp's workloads in
manifest/attention.yaml), timed as bench/peers.py times every peer (its L2 flush before each timed
call, CUDA events, the median; its helpers and those of peers_attention.py are imported, not
copied).

Each case draws contiguous keys and values [B * sk, Hkv, D] and lays them into pages of the
case's size at a shuffled choice of blocks (the paged cache an engine holds). Peers:
  tileops              our paged op on the shuffled pages, through its custom operator
  tileops-contiguous   our paged op on the same keys with the pages in order (the contiguous
                       layout through the same kernel: what the paging costs)
  tileops-varlen       our varlen op on the contiguous keys (cu_seqlens_k): issue 31's goal
                       for chunked prefill is the paged op within 10% of it (the summary's
                       last column: varlen time / ours)
  sdpa-cudnn, -flash   F.scaled_dot_product_attention over the contiguous keys viewed
                       [B, Hkv, sk, D] (the keys gathered contiguous, not timed), GQA enabled;
                       bottom-right causal through causal_lower_right where sq < sk
  flex-paged           flex_attention under torch.compile over the physical pages (viewed
                       [1, Hkv, num_blocks * page, D]) with a paged block mask
                       (torch.nn.attention.experimental._paged_attention.PagedAttention over the
                       same block table), for the cases named by --flex
The cases named by --graph are also timed as CUDA graph replays (ours and SDPA's: the kernels
without the host's launch path, which a decoding call of a few microseconds is bound by).
KV TB/s = bytes of the keys and values the sequences use / time (the roofline's bytes less q,
out and the metadata); chunked prefill also in TFLOP/s (the manifest's visible pairs). Each
peer's output is compared with ours (max |difference|). The mixed batch (60 decoding sequences
and 4 prefill chunks of 512) has no SDPA or flex row (no single padded batch holds it).

Writes a table (stdout, the summary last) and a CSV ($OUT/peers_attention_paged.csv, or --csv).

Usage: python3 bench/peers_attention_paged.py [--iters N] [--csv PATH] [--cases a,b]
                                              [--flex a,b | --flex none] [--graph a,b | none]
"""
import argparse
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import compile_static, time_median_us  # noqa: E402  (bench/peers.py)
from peers_attention import max_diff, sdpa_peers, tileops_module, visible_pairs  # noqa: E402

HQ, HKV, D = 32, 8, 128  # Llama-3-8B's heads
CASES = [  # (label, query lengths, keys per sequence, page size): the manifest's rows
    ("decode-64x4k-page16", [1] * 64, 4096, 16),
    ("decode-64x4k-page64", [1] * 64, 4096, 64),
    ("decode-8x32k-page16", [1] * 8, 32768, 16),
    ("decode-8x32k-page64", [1] * 8, 32768, 64),
    ("decode-1x4k-page16", [1], 4096, 16),
    ("chunk-8x512-on-4k-page16", [512] * 8, 4096, 16),
    ("chunk-8x512-on-4k-page32", [512] * 8, 4096, 32),
    ("chunk-8x512-on-4k-page64", [512] * 8, 4096, 64),
    ("mixed-60x1-4x512-page16", [1] * 60 + [512] * 4, 4096, 16),
]
FLEX_DEFAULT = "decode-64x4k-page16,decode-1x4k-page16"
GRAPH_DEFAULT = "decode-1x4k-page16"


def graph_of(fn):
    """fn captured in a CUDA graph (after a warm-up on a side stream): replay() runs the same
    kernels without the host's launch path, which small decoding calls are bound by."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


def offsets(lengths):
    out = [0]
    for n in lengths:
        out.append(out[-1] + n)
    return torch.tensor(out, dtype=torch.int32, device="cuda")


def flex_paged_peer(q4, k_cache, v_cache, table, sk, page, scale):
    """flex_attention over the physical pages with the block table's paged block mask (decoding:
    one query per sequence, every key visible). fn() -> out [B, Hq, 1, D]."""
    from torch.nn.attention.experimental._paged_attention import PagedAttention
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    batch, width = table.shape
    blocks = k_cache.shape[0]
    paged = PagedAttention(blocks, page, batch)
    paged.page_table[:, :width] = table.long()
    rows = torch.arange(batch, device="cuda")[:, None].expand(batch, width)
    paged.physical_to_logical[rows, table.long()] = torch.arange(width, device="cuda")[None, :]
    kv_len = torch.full((batch,), sk, dtype=torch.int64, device="cuda")

    def visible(b, h, q_idx, kv_idx):
        return kv_idx < sk

    logical = create_block_mask(visible, B=batch, H=None, Q_LEN=1, KV_LEN=width * page,
                                BLOCK_SIZE=(128, page), device="cuda")
    physical = paged.convert_logical_block_mask(logical, kv_len=kv_len)
    k4 = k_cache.view(1, blocks * page, HKV, D).transpose(1, 2)  # [1, Hkv, pages * page, D]
    v4 = v_cache.view(1, blocks * page, HKV, D).transpose(1, 2)
    compiled = compile_static(flex_attention)
    return lambda: compiled(q4, k4, v4, block_mask=physical, scale=scale, enable_gqa=True)


def bench_case(tileops, label, q_lengths, sk, page, iters, flex_cases, graph_cases, record):
    dtype = torch.bfloat16
    batch = len(q_lengths)
    sq_total = sum(q_lengths)
    width = sk // page
    blocks = batch * width
    q = torch.randn(sq_total, HQ, D, dtype=dtype, device="cuda")
    k = torch.randn(batch * sk, HKV, D, dtype=dtype, device="cuda")
    v = torch.randn(batch * sk, HKV, D, dtype=dtype, device="cuda")
    cu_q = offsets(q_lengths)
    cu_k = offsets([sk] * batch)
    seqused = torch.full((batch,), sk, dtype=torch.int32, device="cuda")
    # Logical page i (sequence i // width, page i % width) at physical block perm[i].
    perm = torch.randperm(blocks, device="cuda")
    k_pages = k.view(blocks, page, HKV, D)
    v_pages = v.view(blocks, page, HKV, D)
    k_cache = torch.empty_like(k_pages)
    v_cache = torch.empty_like(v_pages)
    k_cache[perm] = k_pages
    v_cache[perm] = v_pages
    table = perm.to(torch.int32).view(batch, width)
    in_order = torch.arange(blocks, dtype=torch.int32, device="cuda").view(batch, width)
    scale = 1 / math.sqrt(D)
    nbytes = 2 * batch * sk * HKV * D * k.element_size()
    flops = 4 * D * HQ * sum(visible_pairs(n, sk, True, -1) for n in q_lengths)
    note_flops = flops if q_lengths[0] > 1 else 0.0
    ours = None
    if tileops is not None:
        paged_fn = torch.ops.tileops.attention_grouped_query_attention_paged_fwd.default
        varlen_fn = torch.ops.tileops.attention_grouped_query_attention_varlen_fwd.default
        # The instances stay alive while their keys are called (a key names a live instance).
        paged_op = tileops.GroupedQueryAttentionPagedFwdOp()
        varlen_op = tileops.GroupedQueryAttentionVarlenFwdOp()
        paged_key = paged_op.instance_key
        varlen_key = varlen_op.instance_key
        runs = [
            ("tileops", lambda: paged_fn(paged_key, q, k_cache, v_cache, cu_q, seqused, table)),
            ("tileops-contiguous",
             lambda: paged_fn(paged_key, q, k_pages, v_pages, cu_q, seqused, in_order)),
            ("tileops-varlen", lambda: varlen_fn(varlen_key, q, k, v, cu_q, cu_k)),
        ]
        for name, fn in runs:
            try:
                out = fn()[0]
                if ours is None:
                    ours = out
                note = "" if name == "tileops" else f"max |ours - {name}| = {max_diff(out, ours):.3g}"
                record(label, name, time_median_us(fn, iters), nbytes, note_flops, note)
                if name == "tileops" and label in graph_cases:
                    record(label, "tileops(graph)", time_median_us(graph_of(fn), iters), nbytes,
                           note_flops, "CUDA graph replay")
            except Exception as exc:  # noqa: BLE001 (OpNotAvailableError without the kernel)
                print(f"  {label} {name}: {str(exc).splitlines()[0][:160]}", flush=True)
    peers = []
    uniform = len(set(q_lengths)) == 1
    if uniform:
        sq = q_lengths[0]
        q4 = q.view(batch, sq, HQ, D).transpose(1, 2)
        k4 = k.view(batch, sk, HKV, D).transpose(1, 2)
        v4 = v.view(batch, sk, HKV, D).transpose(1, 2)
        peers += sdpa_peers(q4, k4, v4, sq, sk, True, scale)
        if label in flex_cases and sq == 1:
            try:
                peers.append(("flex-paged",
                              flex_paged_peer(q4, k_cache, v_cache, table, sk, page, scale)))
            except Exception as exc:  # noqa: BLE001
                print(f"  {label} flex-paged: {str(exc).splitlines()[0][:160]}", flush=True)
    for name, peer in peers:
        try:
            got = peer()
            note = ""
            if ours is not None:
                got = got.transpose(1, 2).reshape(sq_total, HQ, D)
                note = f"max |ours - {name}| = {max_diff(got, ours):.3g}"
            record(label, name, time_median_us(peer, iters), nbytes, note_flops, note)
            if label in graph_cases and name.startswith("sdpa"):
                record(label, f"{name}(graph)", time_median_us(graph_of(peer), iters), nbytes,
                       note_flops, "CUDA graph replay")
        except Exception as exc:  # noqa: BLE001
            print(f"  {label} {name}: {str(exc).splitlines()[0][:160]}", flush=True)
    del q, k, v, k_cache, v_cache
    torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--csv",
                    default=os.path.join(os.environ.get("OUT", "."), "peers_attention_paged.csv"))
    ap.add_argument("--cases", default="", help="comma-separated labels (default: all)")
    ap.add_argument("--flex", default=FLEX_DEFAULT,
                    help="comma-separated labels that get the flex peer, or 'none'")
    ap.add_argument("--graph", default=GRAPH_DEFAULT,
                    help="comma-separated labels also timed as CUDA graph replays (ours, SDPA)")
    args = ap.parse_args()
    torch.manual_seed(0)
    wanted = set(filter(None, args.cases.split(",")))
    flex_cases = set() if args.flex == "none" else set(filter(None, args.flex.split(",")))
    graph_cases = set() if args.graph == "none" else set(filter(None, args.graph.split(",")))
    rows = []

    def record(case, peer, us, nbytes, flops, note=""):
        tbps = nbytes / (us * 1e-6) / 1e12
        tflops = flops / (us * 1e-6) / 1e12 if flops else 0.0
        rows.append((case, peer, us, tbps, tflops))
        extra = f" {tflops:7.1f} TFLOP/s" if flops else ""
        print(f"{case:26s} {peer:26s} {us:10.2f} us {tbps:6.3f} TB/s{extra}  {note}", flush=True)

    tileops = tileops_module()
    print(f"# {torch.cuda.get_device_name()} torch {torch.__version__} "
          f"cudnn {torch.backends.cudnn.version()}", flush=True)
    for label, q_lengths, sk, page in CASES:
        if wanted and label not in wanted:
            continue
        bench_case(tileops, label, q_lengths, sk, page, args.iters, flex_cases, graph_cases,
                   record)
    with open(args.csv, "w") as f:
        f.write(f"# gpu={torch.cuda.get_device_name()} torch={torch.__version__} "
                f"cudnn={torch.backends.cudnn.version()}\n")
        f.write("case,peer,median_us,kv_tb_per_s,tflop_per_s\n")
        for case, peer, us, tbps, tflops in rows:
            f.write(f"{case},{peer},{us:.3f},{tbps:.4f},{tflops:.2f}\n")
    # The summary: ours beside the best peer of each case.
    print("\ncase                       tileops us  KV TB/s | best peer                   us  ratio"
          " | varlen us  ratio")
    for label, *_ in CASES:
        mine = [r for r in rows if r[0] == label and r[1] == "tileops"]
        others = [r for r in rows if r[0] == label and not r[1].startswith("tileops")
                  and "(graph)" not in r[1]]
        if not mine:
            continue
        best = min(others, key=lambda r: r[2]) if others else None
        tail = f"{best[1]:22s} {best[2]:9.2f}  {best[2] / mine[0][2]:5.2f}x" if best else "-"
        varlen = [r for r in rows if r[0] == label and r[1] == "tileops-varlen"]
        if varlen:
            tail += f" | {varlen[0][2]:9.2f} {varlen[0][2] / mine[0][2]:5.2f}x"
        print(f"{label:26s} {mine[0][2]:10.2f} {mine[0][3]:8.3f} | {tail}")
        for r in rows:
            if r[0] == label and "(graph)" in r[1]:
                print(f"{'':26s} {r[1]:22s} {r[2]:9.2f} us {r[3]:6.3f} TB/s")
    print(f"wrote {args.csv}")


if __name__ == "__main__":
    sys.exit(main())
