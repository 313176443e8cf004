"""Compile CUDA C++ to cubin with nvcc, cached on disk.

The cache key is sha256 over the source, every header it includes with quotes (found recursively in the
include directories), the flags (with those the environment adds: `debug_flags`), the target arch and
`nvcc --version`. Cache directory: $CUBRIDGE_CACHE_DIR, else ~/.cache/cubridge. Entries are written to a
temporary file and moved into place with os.replace, so a reader never sees a partial cubin. Where ptxas
serialized a function's wgmma (its "Potential Performance Loss" note: every GEMM of the function then waits for
the previous one, far below the kernel's speed), the entry keeps those functions beside the cubin
(`<cubin stem>.serialized`, written before the cubin), and CompiledKernel.serialized_gemms names them on every hit.
"""

from __future__ import annotations

import functools
import hashlib
import math
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cubridge.files import write_atomically
from cubridge.runtime.errors import CompileError, InvalidSettingError, NvccNotFoundError, UnsupportedArchError

RUNTIME_DIR = Path(__file__).resolve().parent
INCLUDE_DIR = RUNTIME_DIR / "include"
KERNELS_DIR = RUNTIME_DIR / "kernels"
BASE_FLAGS = ("-O3", "-std=c++17")
WAIT_TIMEOUT_VARIABLE = "CUBRIDGE_WAIT_TIMEOUT"
PERTURB_WAITS_VARIABLE = "CUBRIDGE_PERTURB_WAITS"
MAX_PERTURB_NS = 1_000_000  # __nanosleep's bound

_QUOTED_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)
_SERIALIZED_GEMMS = re.compile(r"Potential Performance Loss: wgmma\.mma_async instructions are serialized due to "
                               r"(?P<reason>.+?) in the function '(?P<function>\w+)'")
_NVCC_DIAGNOSTIC = re.compile(r"^(?P<file>[^\s(][^(]*)\((?P<line>\d+)\): (?P<message>(?:catastrophic )?error.*)$")


class SerializedGemmsWarning(UserWarning):
    """A compiled kernel whose wgmma ptxas serialized (CompiledKernel.serialized_gemms): it is correct but runs far
    below the reference kernel's speed."""


@dataclass(frozen=True)
class CompiledKernel:
    """A cubin and where it came from: `cache_hit` is True when no nvcc ran for it. `serialized_gemms`: the
    functions whose wgmma ptxas serialized, each as `name (ptxas's reason)`; empty for a kernel at full speed."""

    cubin: bytes
    path: Path
    cache_hit: bool
    serialized_gemms: tuple[str, ...] = ()


def arch_flags(capability: tuple[int, int]) -> tuple[str, ...]:
    """nvcc target flags for a compute capability: sm_90 gets the sm_90a target (wgmma, setmaxnreg)."""
    major, minor = capability
    if major < 8:
        raise UnsupportedArchError(f"CuBridge kernels need sm_80 or newer; this GPU is sm_{major}{minor}")
    if (major, minor) == (9, 0):
        return ("-gencode=arch=compute_90a,code=sm_90a",)
    return (f"-arch=sm_{major}{minor}",)


def cache_dir() -> Path:
    """The cubin cache directory ($CUBRIDGE_CACHE_DIR or ~/.cache/cubridge); created on first use."""
    configured = os.environ.get("CUBRIDGE_CACHE_DIR")
    return Path(configured) if configured else Path.home() / ".cache" / "cubridge"


def find_nvcc() -> Path:
    """Path of nvcc: PATH first, then $CUDA_HOME/bin and /usr/local/cuda/bin."""
    on_path = shutil.which("nvcc")
    if on_path:
        return Path(on_path)
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and (Path(root) / "bin" / "nvcc").is_file():
            return Path(root) / "bin" / "nvcc"
    raise NvccNotFoundError("nvcc not found on PATH or under $CUDA_HOME/bin; install the CUDA toolkit")


@functools.cache
def nvcc_version(nvcc: Path) -> str:
    """Full `nvcc --version` text (part of every cache key)."""
    return subprocess.run([str(nvcc), "--version"], capture_output=True, text=True, check=True).stdout


def debug_flags() -> tuple[str, ...]:
    """Flags the environment adds to every compile: $CUBRIDGE_WAIT_TIMEOUT (seconds, > 0) bounds each mbarrier wait
    of the Hopper primitives, which then print the barrier they waited on and trap; $CUBRIDGE_PERTURB_WAITS
    (nanoseconds, 1 to 1000000) makes each thread sleep a pseudo-random time below it after every completed wait,
    so that a missing wait shows as wrong results (hopper.cuh)."""
    return _wait_timeout_flags() + _perturb_waits_flags()


def _wait_timeout_flags() -> tuple[str, ...]:
    text = os.environ.get(WAIT_TIMEOUT_VARIABLE, "").strip()
    if not text:
        return ()
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not 0 < seconds < math.inf:
        raise InvalidSettingError(f"${WAIT_TIMEOUT_VARIABLE} must be a positive number of seconds, got {text!r}")
    return (f"-DCUBRIDGE_WAIT_TIMEOUT_NS={max(1, round(seconds * 1e9))}ULL",)


def _perturb_waits_flags() -> tuple[str, ...]:
    text = os.environ.get(PERTURB_WAITS_VARIABLE, "").strip()
    if not text:
        return ()
    if not text.isdigit() or not 1 <= int(text) <= MAX_PERTURB_NS:
        raise InvalidSettingError(
            f"${PERTURB_WAITS_VARIABLE} must be a whole number of nanoseconds from 1 to {MAX_PERTURB_NS}, got {text!r}")
    return (f"-DCUBRIDGE_PERTURB_WAITS_NS={int(text)}u",)


def included_headers(source: str, include_dirs: tuple[Path, ...]) -> list[Path]:
    """Headers reachable from `source` through quoted #include lines, each once, in discovery order."""
    found: list[Path] = []
    pending = [source]
    while pending:
        text = pending.pop()
        for name in _QUOTED_INCLUDE.findall(text):
            for directory in include_dirs:
                candidate = (directory / name).resolve()
                if candidate.is_file() and candidate not in found:
                    found.append(candidate)
                    pending.append(candidate.read_text())
                    break
    return found


def cache_key(source: str, flags: tuple[str, ...], arch: tuple[str, ...], nvcc: Path,
              include_dirs: tuple[Path, ...]) -> str:
    """sha256 over source, included headers (name and text), flags, arch and the nvcc version."""
    digest = hashlib.sha256()
    digest.update(source.encode())
    for header in included_headers(source, include_dirs):
        digest.update(b"\0header\0" + header.name.encode() + b"\0" + header.read_bytes())
    digest.update(b"\0flags\0" + "\0".join(flags).encode())
    digest.update(b"\0arch\0" + "\0".join(arch).encode())
    digest.update(b"\0nvcc\0" + nvcc_version(nvcc).encode())
    return digest.hexdigest()


def serialized_gemms(ptxas_output: str) -> tuple[str, ...]:
    """The functions whose wgmma ptxas reports serialized in `ptxas_output`, each once as `name (reason)`."""
    found = {match["function"]: match["reason"] for match in _SERIALIZED_GEMMS.finditer(ptxas_output)}
    return tuple(f"{function} ({reason})" for function, reason in found.items())


def _summarize_nvcc_error(stderr: str, source_name: str) -> str:
    for line in stderr.splitlines():
        match = _NVCC_DIAGNOSTIC.match(line.strip())
        if match:
            return f"{match['file']}:{match['line']}: {match['message']}"
    first = next((line for line in stderr.splitlines() if line.strip()), "nvcc failed without a message")
    return f"{source_name}: {first.strip()}"


def compile_cubin(source_path: Path, capability: tuple[int, int], extra_flags: tuple[str, ...] = (),
                  include_dirs: tuple[Path, ...] = (INCLUDE_DIR,)) -> CompiledKernel:
    """Compile `source_path` to a cubin for `capability`; returns the cached cubin when the key matches."""
    arch = arch_flags(capability)
    flags = BASE_FLAGS + debug_flags() + tuple(extra_flags)
    nvcc = find_nvcc()
    source_path = Path(source_path).resolve()
    source = source_path.read_text()
    key = cache_key(source, flags, arch, nvcc, include_dirs)
    directory = cache_dir()
    cubin_path = directory / f"{source_path.stem}-{key[:32]}.cubin"
    serialized_path = cubin_path.with_suffix(".serialized")
    if cubin_path.is_file():
        serialized = tuple(serialized_path.read_text().splitlines()) if serialized_path.is_file() else ()
        return CompiledKernel(cubin_path.read_bytes(), cubin_path, cache_hit=True, serialized_gemms=serialized)

    directory.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=f".{source_path.stem}-", suffix=".cubin.tmp")
    os.close(handle)
    include_args = [f"-I{d}" for d in include_dirs]
    command = [str(nvcc), "-cubin", *flags, *arch, *include_args, str(source_path), "-o", temporary]
    try:
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            summary = _summarize_nvcc_error(result.stderr, source_path.name)
            raise CompileError(
                f"nvcc failed on {source_path.name} for {' '.join(arch)}: {summary}\n"
                f"command: {' '.join(command)}\n{result.stderr.rstrip()}"
            )
        serialized = serialized_gemms(result.stdout + result.stderr)
        if serialized:
            write_atomically(serialized_path, "\n".join(serialized) + "\n")
        os.replace(temporary, cubin_path)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
    return CompiledKernel(cubin_path.read_bytes(), cubin_path, cache_hit=False, serialized_gemms=serialized)
