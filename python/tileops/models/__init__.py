"""Models with tileops inside: tiny configurations per architecture, FP8 experts as a checkpoint
loads them, and the benchmark (``python -m tileops.models bench``) of transformers models with
and without tileops (tileops.integrations.transformers)."""

from __future__ import annotations

from tileops.models._configs import ARCHITECTURES, KINDS, config, randomize, tiny_config, tiny_model
from tileops.models._fp8 import dequantize_blocks, dequantize_experts, fp8_experts, quantize_blocks

__all__ = [
    "ARCHITECTURES",
    "KINDS",
    "config",
    "dequantize_blocks",
    "dequantize_experts",
    "fp8_experts",
    "quantize_blocks",
    "randomize",
    "tiny_config",
    "tiny_model",
]
