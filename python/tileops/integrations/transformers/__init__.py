"""tileops inside Hugging Face transformers models.

``apply_tileops(model)`` swaps, in place, the modules of a transformers model instance that
tileops serves for tileops-backed ones and returns how many of each kind it replaced::

    from transformers import AutoModelForCausalLM
    from tileops.integrations.transformers import apply_tileops

    model = AutoModelForCausalLM.from_pretrained(name, dtype=torch.bfloat16, device_map="cuda")
    apply_tileops(model)          # {"rms_norm": 65, "rope": 32, "moe": 0, "attention": 32}
    model.generate(...)           # or torch.compile(model)

Kinds: "rms_norm" (RMSNormFwdOp), "rope" (LongRoPEFwdOp: the rotary module and the rotation in
every attention layer), "moe" (FusedMoEFwdOp, bf16 or FP8 block-scaled experts), "attention"
(GroupedQueryAttentionVarlenFwdOp for the sdpa calls it computes exactly: prefill without
padding, and decode steps on the CPU in half precision; masked calls and other decode steps run
the model's own function). Architectures:
Llama, Qwen2, Qwen3, Qwen3-MoE, Mixtral, DeepSeek-V3, Phi-3. Modules it cannot serve stay as
they are and are reported (:func:`tileops_report`). Design: docs/design/integrations.md.
Supported transformers versions: ``SUPPORTED_TRANSFORMERS`` (an ImportError otherwise). Under
torch.compile, calls of fewer than ``compiled_min_tokens`` tokens (``COMPILED_MIN_TOKENS``) run
transformers' norm, rotation and attention, which inductor fuses (see apply_tileops).
"""

from __future__ import annotations

from tileops.integrations.transformers import _version

try:
    import transformers as _transformers
except ImportError as _exc:  # pragma: no cover (CI installs transformers)
    raise ImportError(
        "tileops.integrations.transformers needs Hugging Face transformers "
        f"({_version.SUPPORTED}): pip install 'transformers{_version.SUPPORTED}'"
    ) from _exc

_version.check(_transformers.__version__)

from tileops.integrations.transformers._apply import (  # noqa: E402
    COMPILED_MIN_TOKENS,
    KINDS,
    Kind,
    NotServed,
    Report,
    TileOpsNotServedWarning,
    apply_tileops,
    remove_tileops,
    tileops_report,
)
from tileops.integrations.transformers._architectures import ARCHITECTURES, Architecture  # noqa: E402
from tileops.integrations.transformers._attention import TileOpsAttention  # noqa: E402
from tileops.integrations.transformers._common import Replacement  # noqa: E402
from tileops.integrations.transformers._moe import TileOpsMoE  # noqa: E402
from tileops.integrations.transformers._rms_norm import TileOpsRMSNorm  # noqa: E402
from tileops.integrations.transformers._rope import TileOpsRotaryEmbedding  # noqa: E402

SUPPORTED_TRANSFORMERS = _version.SUPPORTED

__all__ = [
    "ARCHITECTURES",
    "COMPILED_MIN_TOKENS",
    "KINDS",
    "SUPPORTED_TRANSFORMERS",
    "Architecture",
    "Kind",
    "NotServed",
    "Replacement",
    "Report",
    "TileOpsAttention",
    "TileOpsMoE",
    "TileOpsNotServedWarning",
    "TileOpsRMSNorm",
    "TileOpsRotaryEmbedding",
    "apply_tileops",
    "remove_tileops",
    "tileops_report",
]
