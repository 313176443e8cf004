"""benchmarks/variant_diagnostics.py's variants against the kernel they edit."""

from benchmarks.variant_diagnostics import VARIANTS
from cubridge.runtime.variant import build_variant


def test_every_substitution_finds_its_text_in_a_table_masks_lowering():
    """A substitution whose text left the kernel makes its variant time the shipped kernel under another name
    (keep-true and no-mask had gone stale before run 144); the document mask's lowering holds every target."""
    source = build_variant("examples/specs/document_mask.py", "sm90").lowered("bf16", 128).source
    stale = [(name, old) for name, (substitutions, _, _) in VARIANTS.items() for old, _ in substitutions
             if old not in source]
    assert stale == []
