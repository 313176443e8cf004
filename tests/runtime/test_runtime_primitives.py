"""CPU checks that the CuIR-op -> primitive table names functions that exist in the named headers, with the
named PTX instruction in their bodies."""

import re

import pytest

from cubridge.runtime.primitives import HEADER_DIR, PLAIN_CPP_OPS, PRIMITIVES, markdown_table, primitives_for


@pytest.mark.parametrize("primitive", PRIMITIVES, ids=lambda p: p.function)
def test_primitive_is_defined_in_its_header(primitive):
    text = (HEADER_DIR / primitive.header).read_text()
    definition = re.search(r"__device__ __forceinline__ [\w<>:]+ " + primitive.function + r"(<[^>]*>)?\(", text)
    assert definition, f"{primitive.function} not defined in {primitive.header}"


@pytest.mark.parametrize("primitive", [p for p in PRIMITIVES if p.inline_asm], ids=lambda p: p.function)
def test_primitive_header_contains_its_ptx(primitive):
    text = (HEADER_DIR / primitive.header).read_text()
    mnemonic = primitive.ptx.split()[0].split("{")[0].rstrip(".")
    assert mnemonic in text, f"{mnemonic} not found in {primitive.header}"


def test_every_brief_op_has_a_primitive():
    ops = ["cuir.copy_async", "cuir.commit_group", "cuir.wait_group", "cuir.load", "cuir.gemm", "cuir.store_async",
           "cuir.mbarrier_init", "cuir.mbarrier_arrive", "cuir.mbarrier_expect_tx", "cuir.mbarrier_wait",
           "cuir.gemm_fence", "cuir.gemm_async", "cuir.gemm_wait", "cuir.named_barrier_sync",
           "cuir.named_barrier_arrive", "cuir.barrier", "cuir.fence_async_shared", "cuir.row_reduce",
           "cuir.convert", "cuir.store", "math.exp2", "math.tanh"]
    assert [op for op in ops if not primitives_for(op)] == []
    assert markdown_table().count("\n") == len(PRIMITIVES) + len(PLAIN_CPP_OPS) + 1
