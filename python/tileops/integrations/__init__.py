"""tileops inside other libraries' models.

``tileops.integrations.transformers.apply_tileops(model)`` swaps a Hugging Face transformers
model's modules for tileops-backed ones (docs/design/integrations.md).
"""
