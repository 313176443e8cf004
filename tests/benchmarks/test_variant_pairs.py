"""benchmarks/variant_pairs.py's refusals, before any GPU work."""

import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("arguments, message", [
    (["no_such_spec.py"], "variant_pairs: no spec file no_such_spec.py"),
    (["examples/specs/softcap.py", "--seconds", "1", "--settle", "1"],
     "variant_pairs: --settle must be shorter than --seconds"),
])
def test_bad_arguments_are_one_line(arguments, message):
    result = subprocess.run([sys.executable, str(REPO_ROOT / "benchmarks" / "variant_pairs.py"), *arguments],
                            capture_output=True, text=True, cwd=REPO_ROOT)
    assert result.returncode != 0
    assert result.stderr.strip().splitlines()[-1] == message
