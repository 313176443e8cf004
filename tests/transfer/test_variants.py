"""Every example spec, transferred onto both reference programs, verifies by execution.

Shapes are unaligned to every tile size, use grouped-query heads and SQ != SKV;
in the last one, windowed masks leave whole query tiles without a visible key.
"""

import pytest

from cubridge.frontends.spec import load_spec
from cubridge.interpreter import ProblemShape, verify

from transfer_helpers import PROGRAMS, SPECS, spec_path, transferred

SHAPES = (
    ProblemShape(2, 4, 2, 200, 300, 128),
    ProblemShape(1, 3, 1, 77, 130, 128),
    ProblemShape(1, 2, 2, 400, 129, 128),
)


@pytest.mark.parametrize("program", PROGRAMS)
@pytest.mark.parametrize("name", SPECS)
def test_variant_verifies(name, program):
    module = transferred(program, spec_path(name))
    result = verify(module, load_spec(spec_path(name)), shapes=SHAPES)
    assert result.ok, result.summary()


@pytest.mark.parametrize("program", PROGRAMS)
def test_verification_tells_variants_apart(program):
    """A sliding-window kernel does not pass as causal: the check can fail."""
    module = transferred(program, spec_path("sliding_window"))
    result = verify(module, load_spec(spec_path("causal")), shapes=SHAPES[:1])
    assert result.verdict == "mismatch"
