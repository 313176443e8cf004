"""benchmarks/variant_diagnostics.py's variants against the kernel they edit."""

from pathlib import Path

from benchmarks.variant_diagnostics import VARIANTS, extra_files
from cubridge.runtime.variant import build_variant


def test_every_substitution_finds_its_text_in_a_table_masks_lowering():
    """A substitution whose text left the kernel makes its variant time the shipped kernel under another name
    (keep-true and no-mask had gone stale before run 144); the document mask's lowering holds every target."""
    source = build_variant("examples/specs/document_mask.py", "sm90").lowered("bf16", 128).source
    stale = [(name, old) for name, (substitutions, _, _) in VARIANTS.items() for old, _ in substitutions
             if old not in source]
    assert stale == []


def test_an_extra_file_names_each_specs_own_lowering():
    """One process times several specs against their own earlier lowerings: `{spec}` in an --extra file is the
    spec's stem, and a file without it is the same for every spec."""
    extras = {"old": "before/{spec}.cu", "fixed": "edited.cu"}
    assert extra_files(extras, "examples/specs/softcap.py") == {"old": Path("before/softcap.cu"),
                                                                 "fixed": Path("edited.cu")}
    assert extra_files(extras, "examples/specs/comb.py")["old"] == Path("before/comb.cu")
