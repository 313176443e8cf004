"""scripts/mutation_sweep.py: the mutants it enumerates, how it plants them, and its verdicts."""

import importlib.util
import sys
from io import StringIO
from pathlib import Path

from xdsl.printer import Printer

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("mutation_sweep", ROOT / "scripts" / "mutation_sweep.py")
sweep = sys.modules["mutation_sweep"] = importlib.util.module_from_spec(_spec)  # its dataclass looks itself up
_spec.loader.exec_module(sweep)


def _text(module) -> str:
    stream = StringIO()
    Printer(stream=stream).print_op(module)
    return stream.getvalue()


def test_every_operator_has_mutants_on_the_hopper_reference():
    found = sweep.mutants(sweep.load("sm90", None))
    assert {mutant.operator for mutant in found} == set(sweep.OPERATORS)
    assert len({(m.index, m.operator, m.change) for m in found}) == len(found) > 250


def test_each_operator_plants_a_change():
    reference = _text(sweep.load("sm90", None))
    found = sweep.mutants(sweep.load("sm90", None))
    for operator in sweep.OPERATORS:
        mutant = next(m for m in found if m.operator == operator)
        module = sweep.load("sm90", None)
        assert sweep.apply(module, mutant), mutant
        assert _text(module) != reference, mutant


def test_a_dropped_wgmma_fence_is_killed():
    fence = next(m for m in sweep.mutants(sweep.load("sm90", None)) if "cuir.gemm_fence" in m.description)
    mutant, verdict, _, finding = sweep.run(("sm90", None, fence, 60))
    assert (mutant, verdict) == (fence, "killed")
    assert finding.startswith("race: ")


def test_a_spec_that_cannot_be_read_is_a_one_line_error(capsys, tmp_path):
    assert sweep.main(["sm90", "--spec", str(tmp_path / "missing.py")]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == f"{tmp_path / 'missing.py'}: error: cannot read spec: no such file"
