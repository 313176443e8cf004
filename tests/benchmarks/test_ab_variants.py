"""benchmarks/ab_variants.py's variant names: a repeated name is an A/A control of the same source."""

from pathlib import Path

from benchmarks.ab_variants import source_of, unique_names


def test_a_repeated_extra_variant_times_its_own_file_again():
    shipped, extra = Path("attention_sm90.cu"), {"base": Path("base.cu")}
    names = unique_names(["shipped", "base", "shipped", "base"])
    assert names == ["shipped", "base", "shipped#2", "base#2"]
    assert [source_of(name, extra, shipped) for name in names] == [shipped, Path("base.cu"), shipped,
                                                                    Path("base.cu")]
