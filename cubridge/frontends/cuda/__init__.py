"""CUDA kernels into CuIR: tree-sitter parsing with located errors, the primitives' inline PTX, lifting
profiles and the lifter (`cuir-opt --lift`)."""

from __future__ import annotations

from pathlib import Path

from cubridge.runtime.primitives import HEADER_DIR


def lift_cuda_file(path: str | Path, entry: str | None = None, profile: str = "cubridge"):
    """Lift entry point `entry` (None: the file's first) of the CUDA file at `path` with lifting profile
    `profile` (a name in profiles/ or a TOML file); returns a LiftResult (module, entry, note)."""
    from cubridge.frontends.cuda.lift import lift_file
    from cubridge.frontends.cuda.profile import load_profile

    return lift_file(path, entry, load_profile(profile), (HEADER_DIR.parent,))
