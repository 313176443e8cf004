"""benchmarks/ab_variants.py's variants: a repeated name is an A/A control of the same source; named variants edit
the shipped kernel by text."""

from pathlib import Path

from benchmarks.ab_variants import VARIANTS, source_of, unique_names
from cubridge.runtime.compiler import KERNELS_DIR


def test_a_repeated_extra_variant_times_its_own_file_again():
    shipped, extra = Path("attention_sm90.cu"), {"base": Path("base.cu")}
    names = unique_names(["shipped", "base", "shipped", "base"])
    assert names == ["shipped", "base", "shipped#2", "base#2"]
    assert [source_of(name, extra, shipped) for name in names] == [shipped, Path("base.cu"), shipped,
                                                                    Path("base.cu")]


def test_every_named_variant_finds_its_text_in_its_kernel():
    """A named variant edits the shipped kernel by text: every pattern it replaces is still in that kernel's source
    (ab_variants refuses to run one that is not)."""
    stale = [(kernel, name, old) for kernel, variants in VARIANTS.items()
             for name, (_, substitutions) in variants.items() for old, _ in substitutions
             if old not in (KERNELS_DIR / f"attention_{kernel}.cu").read_text()]
    assert stale == []


def test_diag_no_exp2_leaves_no_softmax_exp2_on_either_pipe():
    """diag-no-exp2 prices the softmax's exp2: both the MUFU's and the FMA pipe's (one in kFmaExp2Period) go."""
    text = (KERNELS_DIR / "attention_sm90.cu").read_text()
    for old, new in VARIANTS["sm90"]["diag-no-exp2"][1]:
        text = text.replace(old, new)
    assert "fast_exp2(exponent)" not in text and "fma_exp2(exponent)" not in text


def test_sleeping_waits_leaves_no_spinning_mbarrier_wait():
    """sleeping-waits prices polling without suspending: every mbarrier wait of the kernel, the producer's and the
    consumers', goes through the hinted try_wait."""
    text = (KERNELS_DIR / "attention_sm90.cu").read_text()
    for old, new in VARIANTS["sm90"]["sleeping-waits"][1]:
        text = text.replace(old, new)
    assert "mbarrier_wait(" not in text and text.count("mbarrier_wait_sleeping(") > 1
