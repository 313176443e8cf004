"""GPU check of the Hopper primitives (TMA, mbarrier, wgmma, TMA store, named barriers, setmaxnreg) on sm_90, and
of the mbarrier wait timeout."""

import ctypes
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from cubridge.runtime.compiler import INCLUDE_DIR, compile_cubin
from cubridge.runtime.driver import launch, load_function
from cubridge.runtime.tensor_map import encode_tiled

pytestmark = pytest.mark.gpu

SOURCE = Path(__file__).parent / "cuda" / "hopper_primitives_check.cu"
GEMM_SHARED_BYTES = 1024 + 4 * 64 * 64 * 2 + 64 * 64 * 4 + 8


@pytest.fixture(scope="module")
def hopper_cubin():
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("needs an sm_90 (Hopper) GPU")
    return compile_cubin(SOURCE, (9, 0), include_dirs=(INCLUDE_DIR,))


@pytest.mark.parametrize("kernel, ctas", [("hopper_gemm_check", 1), ("hopper_gemm_check_in_cluster", 2)])
def test_tma_mbarrier_wgmma_and_tma_store(hopper_cubin, kernel, ctas):
    """C = A B^T (K-major B) through the TMA store and D = A V (MN-major B, two panels) from the accumulators, in
    one CTA and in each CTA of a cluster of two (rank 1's shared addresses carry its rank: its wgmma descriptors
    once read V's second panel from the wrong place)."""
    generator = torch.Generator(device="cuda").manual_seed(3)
    a = torch.randn(1, 1, 64, 64, generator=generator, device="cuda").bfloat16()
    b = torch.randn(64, 64, generator=generator, device="cuda").bfloat16()
    v = torch.randn(64, 128, generator=generator, device="cuda").bfloat16()
    c = torch.full((64, 64), float("nan"), device="cuda")
    d = torch.full((ctas, 64, 128), float("nan"), device="cuda")
    maps = [
        encode_tiled(a, (1, 1, 64, 64), swizzle_128b=True),
        encode_tiled(b, (64, 64), swizzle_128b=True),
        encode_tiled(v, (64, 64), swizzle_128b=True),
        encode_tiled(c, (64, 64), swizzle_128b=False),
    ]
    function = load_function(hopper_cubin, kernel, 0, GEMM_SHARED_BYTES)
    launch(function, (ctas, 1, 1), (128, 1, 1), GEMM_SHARED_BYTES, [*maps, ctypes.c_void_p(d.data_ptr())], 0)
    torch.cuda.synchronize()
    a2 = a[0, 0].float()
    torch.testing.assert_close(c, a2 @ b.float().T, rtol=1e-4, atol=1e-3)
    for rank in range(ctas):
        torch.testing.assert_close(d[rank], a2 @ v.float(), rtol=1e-4, atol=1e-3)


def test_named_barriers_with_register_reallocation(hopper_cubin):
    out = torch.full((128,), -1, dtype=torch.int32, device="cuda")
    function = load_function(hopper_cubin, "named_barrier_check", 0, 0)
    launch(function, (1, 1, 1), (256, 1, 1), 0, [ctypes.c_void_p(out.data_ptr())], 0)
    torch.cuda.synchronize()
    assert torch.equal(out.cpu(), torch.arange(128, dtype=torch.int32) * 3 + 1)


def test_fma_exp2_within_its_error_bound_and_zero_below_the_floats(hopper_cubin):
    """fma_exp2 (the softmax's exp2 on the FMA pipe) against float64 exp2: relative error at most 1.1e-4 wherever
    the result is a normal float, and exactly +0 from -127 down, -inf included (a masked score's probability)."""
    normal = torch.cat([torch.linspace(-126.0, 0.0, 200_001, dtype=torch.float64),
                        -torch.rand(100_000, dtype=torch.float64, generator=torch.Generator().manual_seed(5)) * 30])
    floor = torch.tensor([-127.0, -127.5, -200.0, -1e30, float("-inf")], dtype=torch.float64)
    x = torch.cat([normal, floor]).float().cuda()
    y = torch.full_like(x, float("nan"))
    function = load_function(hopper_cubin, "fma_exp2_check", 0, 0)
    launch(function, ((x.numel() + 255) // 256, 1, 1), (256, 1, 1), 0,
           [ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(y.data_ptr()), ctypes.c_int(x.numel())], 0)
    torch.cuda.synchronize()
    expected = torch.exp2(x[: normal.numel()].double().cpu())
    relative = ((y[: normal.numel()].double().cpu() - expected) / expected).abs()
    assert relative.max().item() <= 1.1e-4
    assert torch.equal(y[normal.numel():].cpu(), torch.zeros(floor.numel()))
    assert not torch.signbit(y[normal.numel():]).any()


def test_accurate_sin_and_cos_within_their_error_bound(hopper_cubin):
    """accurate_sin / accurate_cos (a hook's math.sin / math.cos) against float64 over |x| <= 2^20, every integer
    (the sine of an index) and random reals: absolute error at most 1e-6, so a sign is right wherever the value
    is larger; __sinf, which reduces in one fp32 multiply, flipped sin(q_idx) at q_idx = 1065 (run 207)."""
    integers = torch.arange(-2**20, 2**20 + 1, dtype=torch.float64)
    reals = (torch.rand(1_000_000, dtype=torch.float64, generator=torch.Generator().manual_seed(7)) * 2 - 1) * 2**20
    x = torch.cat([integers, reals]).float().cuda()
    sine, cosine = torch.full_like(x, float("nan")), torch.full_like(x, float("nan"))
    function = load_function(hopper_cubin, "accurate_sin_cos_check", 0, 0)
    launch(function, ((x.numel() + 255) // 256, 1, 1), (256, 1, 1), 0,
           [ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(sine.data_ptr()), ctypes.c_void_p(cosine.data_ptr()),
            ctypes.c_int(x.numel())], 0)
    torch.cuda.synchronize()
    exact_x = x.double().cpu()
    assert (sine.double().cpu() - torch.sin(exact_x)).abs().max().item() <= 1e-6
    assert (cosine.double().cpu() - torch.cos(exact_x)).abs().max().item() <= 1e-6


def test_a_wait_past_its_timeout_names_its_barrier_and_fails_the_launch(hopper_cubin):
    """A deadlocked launch built with $CUBRIDGE_WAIT_TIMEOUT fails once the bound has passed and prints the barrier
    it waited on, instead of hanging (in a child process: the trap leaves its CUDA context unusable)."""
    script = textwrap.dedent(f"""
        import torch
        from cubridge.runtime.compiler import INCLUDE_DIR, compile_cubin
        from cubridge.runtime.driver import launch, load_function
        cubin = compile_cubin({str(SOURCE)!r}, (9, 0), include_dirs=(INCLUDE_DIR,))
        launch(load_function(cubin, "stuck_wait_check", 0, 0), (2, 1, 1), (64, 1, 1), 0, [], 0)
        torch.cuda.synchronize()
    """)
    environment = os.environ | {"CUBRIDGE_WAIT_TIMEOUT": "0.5"}
    child = subprocess.run([sys.executable, "-c", script], env=environment, capture_output=True, text=True,
                           timeout=300)
    assert child.returncode != 0
    assert "cubridge: mbarrier wait timed out after 500000000 ns: barrier at shared address 0x" in child.stdout, (
        child.stdout[-2000:] + child.stderr[-2000:])
