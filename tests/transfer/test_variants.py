"""Every example spec, transferred onto both reference programs, verifies by execution.

Shapes are unaligned to every tile size, use grouped-query heads and SQ != SKV;
in the last one, windowed masks leave whole query tiles without a visible key.
"""

import pytest
from xdsl.passes import PassPipeline

from cubridge.dialect import cuir_context
from cubridge.frontends.spec import load_spec
from cubridge.interpreter import ProblemShape, verify
from cubridge.tools import cuir_opt
from cubridge.tools.cuir_opt import XDSL_PASSES_FOR_CUIR

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


@pytest.mark.parametrize("name", ["causal", "sliding_window", "document_mask", "sigmoid"])
def test_hopper_variant_verifies_with_several_tiles_per_program(name):
    """Two programs run all tiles, so each carries its pipeline counters from tile to
    tile: the tests for an in-flight P V must follow the moved kv loop bounds."""
    module = transferred("sm90", spec_path(name))
    shape = ProblemShape(1, 2, 1, 500, 500, 128)
    result = verify(module, load_spec(spec_path(name)), shapes=[shape], num_sms=2, schedules=2)
    assert result.ok, result.summary()


@pytest.mark.parametrize(
    "name, schedule",
    [("causal", "dynamic"), ("sliding_window", "dynamic"), ("document_mask", "dynamic"), ("softcap", "persistent")],
)
def test_persistent_kernel_claims_tiles_dynamically_when_their_kv_ranges_differ(name, schedule):
    kernels = [op for op in transferred("sm90", spec_path(name)).walk() if op.name == "cuir.kernel"]
    assert [k.schedule.data for k in kernels] == [schedule]
    grid = [op for op in transferred("sm80", spec_path(name)).walk() if op.name == "cuir.kernel"]
    assert [k.schedule.data for k in grid] == ["grid"]


@pytest.mark.parametrize("name", XDSL_PASSES_FOR_CUIR)
def test_xdsl_passes_listed_for_cuir_keep_a_transferred_kernel_correct(name):
    module = transferred("sm90", spec_path("document_mask"))
    PassPipeline.parse_spec(cuir_opt.CuirOptMain(args=["-"]).available_passes, name).apply(cuir_context(), module)
    result = verify(module, load_spec(spec_path("document_mask")), shapes=[ProblemShape(1, 2, 1, 200, 260, 128)])
    assert result.ok, result.summary()
