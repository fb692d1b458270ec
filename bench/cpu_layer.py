"""One transformers Llama decoder layer on the CPU, patched by apply_tileops against unpatched.

Times the layer (its rotary module's call included) at a few token counts in float32 and
bfloat16: both modules alternate, batch after batch of calls, and the median batch is reported,
so that the noise of a shared machine falls on both alike. A small layer by default, where the
norms, the rotation and the attention are a visible share of the time beside the projections.

    PYTHONPATH=build/python python bench/cpu_layer.py --hidden 1024 --heads 16
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time

import torch
from torch import nn


def layer(hidden: int, heads: int, kv_heads: int, dtype: torch.dtype) -> nn.Module:
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding

    config = LlamaConfig(hidden_size=hidden, intermediate_size=2 * hidden, num_attention_heads=heads,
                         num_key_value_heads=kv_heads, num_hidden_layers=1, attn_implementation="sdpa")

    class Layer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = LlamaDecoderLayer(config, 0)
            self.rotary = LlamaRotaryEmbedding(config)

        def forward(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
            out = self.layer(x, position_embeddings=self.rotary(x, positions), position_ids=positions)
            return out[0] if isinstance(out, tuple) else out

    return Layer().eval().to(dtype)


def batch_us(module: nn.Module, x: torch.Tensor, positions: torch.Tensor, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        module(x, positions)
    return (time.perf_counter() - start) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--kv-heads", type=int, default=4)
    parser.add_argument("--tokens", default="1,64,256")
    parser.add_argument("--batches", type=int, default=15, help="timed batches per module")
    parser.add_argument("--calls", type=int, default=20, help="calls per batch")
    args = parser.parse_args()

    from tileops.integrations.transformers import apply_tileops

    torch.manual_seed(0)
    print(f"Llama layer, hidden {args.hidden}, {args.heads} / {args.kv_heads} heads, "
          f"torch {torch.__version__}, {torch.get_num_threads()} torch threads")
    print("| dtype | tokens | unpatched us | tileops us | unpatched / tileops |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for dtype in (torch.float32, torch.bfloat16):
        unpatched = layer(args.hidden, args.heads, args.kv_heads, dtype)
        patched = copy.deepcopy(unpatched)
        apply_tileops(patched)
        for tokens in (int(t) for t in args.tokens.split(",")):
            x = torch.randn(1, tokens, args.hidden, dtype=dtype)
            positions = torch.arange(tokens)[None]
            times: dict[str, list[float]] = {"unpatched": [], "tileops": []}
            with torch.no_grad():
                for module in (unpatched, patched):
                    batch_us(module, x, positions, 5)
                for _ in range(args.batches):
                    times["unpatched"].append(batch_us(unpatched, x, positions, args.calls))
                    times["tileops"].append(batch_us(patched, x, positions, args.calls))
            a, b = statistics.median(times["unpatched"]), statistics.median(times["tileops"])
            print(f"| {str(dtype).removeprefix('torch.')} | {tokens} | {a:.1f} | {b:.1f} | {a / b:.2f} |")


if __name__ == "__main__":
    main()
