"""CPU tests of the nvcc compiler wrapper and its cubin cache (need the local nvcc; no GPU)."""

import os
import shutil
from pathlib import Path

import pytest

from cubridge.runtime import compiler
from cubridge.runtime.compiler import INCLUDE_DIR, KERNELS_DIR, arch_flags, compile_cubin
from cubridge.runtime.errors import CompileError, InvalidSettingError, UnsupportedArchError

HOPPER_CHECK = Path(__file__).parent / "cuda" / "hopper_primitives_check.cu"
AMPERE_CHECK = Path(__file__).parent / "cuda" / "ampere_primitives_compile_check.cu"
SERIALIZED_CHECK = Path(__file__).parent / "cuda" / "serialized_gemms_check.cu"
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH; install the CUDA toolkit")

TINY_KERNEL = '#include "tiny.cuh"\nextern "C" __global__ void tiny(float* x) { x[threadIdx.x] = kValue; }\n'


@pytest.fixture
def cache(tmp_path, monkeypatch):
    directory = tmp_path / "cache"
    monkeypatch.setenv("CUBRIDGE_CACHE_DIR", str(directory))
    return directory


@pytest.fixture
def tiny_source(tmp_path):
    include = tmp_path / "include"
    include.mkdir()
    (include / "tiny.cuh").write_text("constexpr float kValue = 1.0f;\n")
    source = tmp_path / "tiny.cu"
    source.write_text(TINY_KERNEL)
    return source, include


def test_arch_flags_map_sm90_to_the_a_target():
    assert arch_flags((8, 0)) == ("-arch=sm_80",)
    assert arch_flags((8, 9)) == ("-arch=sm_89",)
    assert arch_flags((9, 0)) == ("-gencode=arch=compute_90a,code=sm_90a",)


def test_arch_below_sm80_is_rejected():
    with pytest.raises(UnsupportedArchError, match="sm_75"):
        arch_flags((7, 5))


def test_cache_dir_follows_environment(cache):
    assert compiler.cache_dir() == cache


@needs_nvcc
def test_compile_miss_then_hit_leaves_no_temporary_files(cache, tiny_source):
    source, include = tiny_source
    first = compile_cubin(source, (8, 0), include_dirs=(include,))
    second = compile_cubin(source, (8, 0), include_dirs=(include,))
    assert not first.cache_hit and second.cache_hit
    assert first.path == second.path and first.cubin == second.cubin
    assert first.cubin[:4] == b"\x7fELF"
    assert sorted(p.name for p in cache.iterdir()) == [first.path.name]


@needs_nvcc
def test_cache_key_changes_with_flags_arch_and_headers(cache, tiny_source):
    source, include = tiny_source
    base = compile_cubin(source, (8, 0), include_dirs=(include,)).path
    with_flag = compile_cubin(source, (8, 0), extra_flags=("-lineinfo",), include_dirs=(include,)).path
    other_arch = compile_cubin(source, (9, 0), include_dirs=(include,)).path
    (include / "tiny.cuh").write_text("constexpr float kValue = 2.0f;\n")
    edited_header = compile_cubin(source, (8, 0), include_dirs=(include,))
    assert len({base, with_flag, other_arch, edited_header.path}) == 4
    assert not edited_header.cache_hit


@needs_nvcc
def test_compile_error_names_file_and_line_and_caches_nothing(cache, tmp_path):
    broken = tmp_path / "broken_kernel.cu"
    broken.write_text('extern "C" __global__ void broken(float* x) {\n  x[0] = 1.0f\n}\n')
    with pytest.raises(CompileError) as raised:
        compile_cubin(broken, (8, 0), include_dirs=())
    first_line = str(raised.value).splitlines()[0]
    assert "broken_kernel.cu:3: error" in first_line
    assert "sm_80" in first_line
    assert not cache.exists() or list(cache.iterdir()) == []


@needs_nvcc
def test_cache_write_is_atomic_replace(cache, tiny_source, monkeypatch):
    source, include = tiny_source
    replaced = []
    real_replace = os.replace

    def recording_replace(src, dst):
        replaced.append((Path(src).name, Path(dst).name))
        real_replace(src, dst)

    monkeypatch.setattr(compiler.os, "replace", recording_replace)
    compiled = compile_cubin(source, (8, 0), include_dirs=(include,))
    assert len(replaced) == 1
    temporary, final = replaced[0]
    assert temporary.endswith(".cubin.tmp") and final == compiled.path.name


def shipped_kernel_targets():
    """(kernel source, capability) pairs CI compiles: every shipped kernel for sm_80 and sm_90a, except the
    Hopper-only ones (wgmma, setmaxnreg: *_sm90.cu), which exist for sm_90a alone."""
    for source in sorted(KERNELS_DIR.glob("*.cu")):
        hopper_only = source.stem.endswith("_sm90")
        for capability, arch_id in (((8, 0), "sm_80"), ((9, 0), "sm_90a")):
            if hopper_only and capability != (9, 0):
                continue
            yield pytest.param(source, capability, id=f"{source.name}-{arch_id}")


def test_hopper_kernel_is_listed_for_sm90a_only():
    targets = {(param.values[0].name, param.values[1]) for param in shipped_kernel_targets()}
    assert ("attention_sm90.cu", (9, 0)) in targets
    assert ("attention_sm90.cu", (8, 0)) not in targets
    assert ("attention_sm80.cu", (8, 0)) in targets and ("attention_sm80.cu", (9, 0)) in targets


@needs_nvcc
@pytest.mark.parametrize("source, capability", list(shipped_kernel_targets()))
def test_shipped_kernels_compile(cache, source, capability):
    compiled = compile_cubin(source, capability)
    assert compiled.cubin[:4] == b"\x7fELF"
    assert compiled.serialized_gemms == ()  # ptxas kept every entry point's wgmma pipelined


@needs_nvcc
def test_a_kernel_whose_gemms_ptxas_serialized_names_them_on_the_miss_and_every_hit(cache):
    first = compile_cubin(SERIALIZED_CHECK, (9, 0))
    second = compile_cubin(SERIALIZED_CHECK, (9, 0))
    assert not first.cache_hit and second.cache_hit
    assert len(first.serialized_gemms) == 1 and first.serialized_gemms[0].startswith("serialized_steps (")
    assert second.serialized_gemms == first.serialized_gemms
    assert sorted(p.name for p in cache.iterdir()) == sorted([first.path.name, first.path.stem + ".serialized"])


def test_serialized_gemms_reads_each_function_once_with_its_reason():
    note = ("ptxas info    : (C7515) Potential Performance Loss: wgmma.mma_async instructions are serialized due to "
            "non wgmma instructions defining accumulator registers of a wgmma between start and end of the pipeline "
            "stage in the function '{}'")
    output = "\n".join([note.format("first"), "ptxas info    : (C7519) warpgroup.arrive is injected in function "
                        "'first'", note.format("second"), note.format("first")])
    assert compiler.serialized_gemms(output) == (
        "first (non wgmma instructions defining accumulator registers of a wgmma between start and end of the "
        "pipeline stage)",
        "second (non wgmma instructions defining accumulator registers of a wgmma between start and end of the "
        "pipeline stage)")
    assert compiler.serialized_gemms("ptxas info    : (C7519) warpgroup.arrive is injected") == ()


@needs_nvcc
def test_hopper_primitives_compile_for_sm90a(cache):
    compiled = compile_cubin(HOPPER_CHECK, (9, 0), include_dirs=(INCLUDE_DIR,))
    assert compiled.cubin[:4] == b"\x7fELF"


def test_wait_timeout_setting_adds_its_bound_to_every_compile(monkeypatch):
    monkeypatch.delenv(compiler.WAIT_TIMEOUT_VARIABLE, raising=False)
    assert compiler.debug_flags() == ()
    monkeypatch.setenv(compiler.WAIT_TIMEOUT_VARIABLE, " 2.5 ")
    assert compiler.debug_flags() == ("-DCUBRIDGE_WAIT_TIMEOUT_NS=2500000000ULL",)


@pytest.mark.parametrize("value", ["0", "-1", "soon", "inf", "nan"])
def test_unusable_wait_timeout_is_a_one_line_error(monkeypatch, value):
    monkeypatch.setenv(compiler.WAIT_TIMEOUT_VARIABLE, value)
    with pytest.raises(InvalidSettingError) as raised:
        compiler.debug_flags()
    assert str(raised.value) == f"$CUBRIDGE_WAIT_TIMEOUT must be a positive number of seconds, got {value!r}"


def test_perturb_waits_setting_adds_its_bound_to_every_compile(monkeypatch):
    monkeypatch.delenv(compiler.WAIT_TIMEOUT_VARIABLE, raising=False)
    monkeypatch.delenv(compiler.PERTURB_WAITS_VARIABLE, raising=False)
    assert compiler.debug_flags() == ()
    monkeypatch.setenv(compiler.PERTURB_WAITS_VARIABLE, " 3000 ")
    assert compiler.debug_flags() == ("-DCUBRIDGE_PERTURB_WAITS_NS=3000u",)
    monkeypatch.setenv(compiler.WAIT_TIMEOUT_VARIABLE, "1")
    assert compiler.debug_flags() == ("-DCUBRIDGE_WAIT_TIMEOUT_NS=1000000000ULL", "-DCUBRIDGE_PERTURB_WAITS_NS=3000u")


@pytest.mark.parametrize("value", ["0", "-5", "2.5", "1000001", "soon"])
def test_unusable_perturb_waits_is_a_one_line_error(monkeypatch, value):
    monkeypatch.setenv(compiler.PERTURB_WAITS_VARIABLE, value)
    with pytest.raises(InvalidSettingError) as raised:
        compiler.debug_flags()
    assert str(raised.value) == ("$CUBRIDGE_PERTURB_WAITS must be a whole number of nanoseconds from 1 to 1000000, "
                                 f"got {value!r}")


@needs_nvcc
def test_a_perturbed_build_is_its_own_cubin_that_sleeps_after_waits(cache, monkeypatch):
    """The bound is part of the cache key: the perturbed build is a cubin of its own, not the plain one."""
    monkeypatch.delenv(compiler.WAIT_TIMEOUT_VARIABLE, raising=False)
    monkeypatch.delenv(compiler.PERTURB_WAITS_VARIABLE, raising=False)
    plain = compile_cubin(HOPPER_CHECK, (9, 0), include_dirs=(INCLUDE_DIR,))
    monkeypatch.setenv(compiler.PERTURB_WAITS_VARIABLE, "2000")
    perturbed = compile_cubin(HOPPER_CHECK, (9, 0), include_dirs=(INCLUDE_DIR,))
    assert perturbed.path != plain.path and not perturbed.cache_hit
    assert perturbed.cubin != plain.cubin


@needs_nvcc
def test_a_wait_timeout_build_is_its_own_cubin_with_the_timeout_report(cache, monkeypatch):
    """The bound is part of the cache key, and only the bounded build carries the report's text."""
    monkeypatch.delenv(compiler.WAIT_TIMEOUT_VARIABLE, raising=False)
    plain = compile_cubin(HOPPER_CHECK, (9, 0), include_dirs=(INCLUDE_DIR,))
    monkeypatch.setenv(compiler.WAIT_TIMEOUT_VARIABLE, "1")
    bounded = compile_cubin(HOPPER_CHECK, (9, 0), include_dirs=(INCLUDE_DIR,))
    assert bounded.path != plain.path and not bounded.cache_hit
    report = b"cubridge: mbarrier wait timed out"
    assert report in bounded.cubin and report not in plain.cubin


@needs_nvcc
@pytest.mark.parametrize("capability", [(8, 0), (9, 0)], ids=["sm_80", "sm_90a"])
def test_ampere_primitives_compile(cache, capability):
    compiled = compile_cubin(AMPERE_CHECK, capability, include_dirs=(INCLUDE_DIR,))
    assert compiled.cubin[:4] == b"\x7fELF"
