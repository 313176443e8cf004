"""Every planted bug of `mutants.MUTANTS` is rejected by the default verifier
(`verify` with no shapes, seeds or schedules given), and the unmutated kernels
it is planted into verify: a kill means the bug was found, not that the
kernel never passed.

The suite prints the kill rate (pytest -s shows it). Add a mutant whenever
a real bug is found.
"""

from functools import cache

import pytest
from mutants import MUTANTS, ROOT

from cubridge.diagnostics import parse_module
from cubridge.dialect import cuir_context
from cubridge.frontends.spec import load_spec
from cubridge.interpreter import verify
from cubridge.interpreter.executor import find_kernel
from cubridge.passes.transfer import transfer_kernel

TARGETS = sorted({(mutant.program, mutant.spec) for mutant in MUTANTS}, key=str)


@cache
def _spec(path: str | None):
    return None if path is None else load_spec(path)


def _kernel(program: str, spec_path: str | None):
    """A fresh module of the reference program, transferred to the spec if one is given."""
    path = ROOT / "examples" / "ir" / f"attention_{program}.mlir"
    module = parse_module(cuir_context(), path.read_text(), str(path))
    if spec_path is not None:
        transfer_kernel(find_kernel(module), _spec(spec_path))
    return module


def test_mutants_are_distinct_and_enough():
    assert len({mutant.name for mutant in MUTANTS}) == len(MUTANTS) >= 30
    assert len({mutant.mutate for mutant in MUTANTS}) == len(MUTANTS)


@pytest.mark.parametrize("program, spec_path", TARGETS, ids=lambda t: str(t).rsplit("/", 1)[-1])
def test_unmutated_kernel_verifies(program, spec_path):
    result = verify(_kernel(program, spec_path), _spec(spec_path))
    assert result.ok, result.summary()


def test_default_verifier_kills_every_mutant():
    survivors = []
    for mutant in MUTANTS:
        module = _kernel(mutant.program, mutant.spec)
        mutant.mutate(module)
        result = verify(module, _spec(mutant.spec))
        if result.ok:
            survivors.append(mutant.name)
    killed = len(MUTANTS) - len(survivors)
    print(f"\nmutation kill rate: {killed}/{len(MUTANTS)} ({100 * killed / len(MUTANTS):.0f}%)")
    assert not survivors, f"mutants the default verifier passes: {survivors}"
