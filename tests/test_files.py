"""`write_atomically`: whole files with the permissions a plain write gives them."""

import os
import stat

import pytest

from cubridge.files import plain_mode, write_atomically


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def umask_022():
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def test_new_file_gets_the_umask_mode(tmp_path, umask_022):
    target = tmp_path / "out.cu"
    write_atomically(target, "kernel\n")
    assert target.read_text() == "kernel\n"
    assert _mode(target) == 0o644


def test_replaced_file_keeps_its_mode(tmp_path, umask_022):
    target = tmp_path / "run.sh"
    target.write_text("old\n")
    target.chmod(0o755)
    write_atomically(target, b"new\n")
    assert target.read_bytes() == b"new\n"
    assert _mode(target) == 0o755


def test_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "out.cu"
    target.write_text("old\n")
    with pytest.raises(TypeError):
        write_atomically(target, 42)
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.cu"]


def test_plain_mode_follows_the_umask(umask_022):
    assert plain_mode() == 0o644
    assert plain_mode(directory=True) == 0o755
