"""Build CuIR with the Python API, verify it, print it, re-parse it.

The kernel built here is a small producer/consumer pipeline: a TMA producer
fills a 2-stage shared buffer, a consumer runs gemm_async, a map with an
arith body, and carries a tile and a counter through cuir.for_each_tile.
"""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from xdsl.dialects import arith, builtin
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    IndexType,
    ModuleOp,
    f32,
)
from xdsl.ir import Block, Region
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from cubridge.dialect import cuir_context
from cubridge.diagnostics import CuBridgeError, parse_module, verify_module
from cubridge.dialect.cuir import (
    CUIR_OPS,
    AllocOp,
    CommitGroupOp,
    ConvertOp,
    CopyAsyncOp,
    DimOp,
    FillOp,
    ForEachTileOp,
    GemmAsyncOp,
    GemmOp,
    GemmWaitOp,
    KernelOp,
    LoadOp,
    MapOp,
    MbarrierExpectTxOp,
    MbarrierInitOp,
    MbarrierWaitOp,
    RowReduceOp,
    StoreOp,
    WaitGroupOp,
    WorkerOp,
    YieldOp,
)
from cubridge.dialect.types import (
    ColVectorType,
    GlobalTensorType,
    MbarrierType,
    RowVectorType,
    SharedBufferType,
    TileType,
    TokenType,
)

BF16 = BFloat16Type()
Q_TYPE = GlobalTensorType(4, BF16)
LSE_TYPE = GlobalTensorType(3, Float32Type())
A_SMEM = SharedBufferType((64, 128), BF16, stages=2, swizzle=128)
B_SMEM = SharedBufferType((128, 128), BF16, stages=2, swizzle=128)
SMEM_BYTES = A_SMEM.total_bytes + B_SMEM.total_bytes + 8 * 2


def to_text(op) -> str:
    stream = StringIO()
    Printer(stream=stream).print_op(op)
    return stream.getvalue()


def index_constant(block: Block, value: int) -> arith.ConstantOp:
    const = arith.ConstantOp.from_int_and_width(value, IndexType())
    block.add_op(const)
    return const


def build_kernel(*, consumer_regs: int = 240) -> tuple[ModuleOp, dict]:
    """A 384-thread producer/consumer kernel; returns the module and its key ops."""
    kernel = KernelOp(
        "pipeline",
        [("q", Q_TYPE), ("lse", LSE_TYPE), ("softmax_scale", f32)],
        threads=384,
        smem_bytes=SMEM_BYTES,
        tile_m=128,
        schedule="persistent",
    )
    prologue = kernel.body.block
    a_smem = AllocOp(A_SMEM)
    b_smem = AllocOp(B_SMEM)
    full = AllocOp(MbarrierType(2))
    prologue.add_ops([a_smem, b_smem, full, MbarrierInitOp(full.result, 1)])

    # producer: one warp group, TMA copies into stage 0
    producer = WorkerOp("producer", (0, 128), regs=24)
    prologue.add_op(producer)
    pblock = producer.body.block
    c0 = index_constant(pblock, 0)
    seqlen = DimOp(kernel.argument("q"), 2)
    pblock.add_op(seqlen)
    ptiles = ForEachTileOp()
    pblock.add_op(ptiles)
    q_tile, head, batch = ptiles.tile_coords
    expect = MbarrierExpectTxOp(full.result, c0.result, A_SMEM.stage_bytes)
    copy = CopyAsyncOp(
        kernel.argument("q"),
        [batch, head, q_tile, c0.result],
        a_smem.result,
        c0.result,
        full.result,
        c0.result,
    )
    ptiles.body.block.add_ops([expect, copy, YieldOp()])

    # consumer: two warp groups, carry (accumulator, counter) through the tiles
    consumer = WorkerOp("consumer", (128, 384), regs=consumer_regs)
    prologue.add_op(consumer)
    cblock = consumer.body.block
    k0 = index_constant(cblock, 0)
    k1 = index_constant(cblock, 1)
    acc_type = TileType((64, 128), f32, "consumer")
    zero = FillOp(0.0, acc_type)
    cblock.add_op(zero)
    tiles = ForEachTileOp([zero.result, k0.result])
    cblock.add_op(tiles)
    body = tiles.body.block
    acc, count = tiles.carried
    wait = MbarrierWaitOp(full.result, k0.result, k1.result)
    gemm = GemmAsyncOp(
        "abt", a_smem.result, k0.result, b_smem.result, k0.result, acc_type, acc=acc
    )
    gemm_wait = GemmWaitOp(gemm.token)
    body.add_ops([wait, gemm, gemm_wait])

    scale_body = Block(arg_types=[f32, IndexType(), IndexType()])
    scaled = arith.MulfOp(scale_body.args[0], kernel.argument("softmax_scale"))
    scale_body.add_ops([scaled, YieldOp(scaled.result)])
    scores = MapOp([gemm.result], [tiles.tile_coords[0], k0.result], acc_type, Region(scale_body))
    row_max = RowReduceOp("max", scores.result, RowVectorType(64, f32, "consumer"))
    p_bf16 = ConvertOp(scores.result, TileType((64, 128), BF16, "consumer"))
    store = StoreOp(p_bf16.result, a_smem.result, [k1.result])
    group = CommitGroupOp("consumer")
    wait_group = WaitGroupOp(group.token)
    lse_store = StoreOp(row_max.result, kernel.argument("lse"), [tiles.tile_coords[2], tiles.tile_coords[1], k0.result])
    next_count = arith.AddiOp(count, k1.result)
    body.add_ops(
        [scores, row_max, p_bf16, store, group, wait_group, lse_store, next_count,
         YieldOp(scores.result, next_count.result)]
    )
    module = ModuleOp([kernel])
    ops = {
        "kernel": kernel,
        "producer": producer,
        "consumer": consumer,
        "copy": copy,
        "gemm": gemm,
        "map": scores,
        "tiles": tiles,
        "row_max": row_max,
    }
    return module, ops


def test_built_kernel_verifies_prints_and_reparses():
    module, _ = build_kernel()
    module.verify()
    verify_module(module)
    text = to_text(module)
    reparsed = parse_module(cuir_context(), text, "built.mlir")
    verify_module(reparsed)
    assert to_text(reparsed) == text
    assert reparsed.is_structurally_equivalent(module)


def test_built_kernel_printed_lines():
    module, _ = build_kernel()
    lines = [line.strip() for line in to_text(module).splitlines()]
    assert lines[1] == (
        "cuir.kernel @pipeline(%q: !cuir.global<4 x bf16, strided>, "
        "%lse: !cuir.global<3 x f32, strided>, %softmax_scale: f32) threads 384 "
        f"smem {SMEM_BYTES} cluster 1x1x1 tile_m 128 schedule persistent {{"
    )
    workers = [line for line in lines if line.startswith("cuir.worker")]
    assert len(workers) == 2
    assert workers[0].startswith("cuir.worker @producer threads 0 to 128 regs 24 (%")
    assert workers[1].startswith("cuir.worker @consumer threads 128 to 384 regs 240 (%")
    assert all(line.endswith(") {") for line in workers)
    copy_line = next(line for line in lines if line.startswith("cuir.copy_async"))
    assert copy_line.endswith(
        ": !cuir.global<4 x bf16, strided>, !cuir.smem<64x128xbf16, stages 2, swizzle 128>, "
        "!cuir.mbarrier<2>"
    )
    gemm_line = next(line for line in lines if "cuir.gemm_async" in line)
    assert " = cuir.gemm_async abt %" in gemm_line and " acc %" in gemm_line
    assert gemm_line.endswith(
        ": !cuir.smem<64x128xbf16, stages 2, swizzle 128>, "
        "!cuir.smem<128x128xbf16, stages 2, swizzle 128>, !cuir.tile<64x128xf32, @consumer> "
        "-> !cuir.tile<64x128xf32, @consumer>"
    )
    assert any(
        line.startswith("%") and " = cuir.for_each_tile (" in line and " iter_args(" in line
        and line.endswith("-> (!cuir.tile<64x128xf32, @consumer>, index) {")
        for line in lines
    )


def test_generic_form_reparses_to_the_same_module():
    module, _ = build_kernel()
    stream = StringIO()
    Printer(stream=stream, print_generic_format=True).print_op(module)
    generic = stream.getvalue()
    assert '"cuir.kernel"() <{' in generic
    reparsed = parse_module(cuir_context(), generic, "generic.mlir")
    verify_module(reparsed)
    assert to_text(reparsed) == to_text(module)


def test_kernel_argument_and_worker_instances():
    module, ops = build_kernel()
    kernel: KernelOp = ops["kernel"]
    assert kernel.argument("q") is kernel.body.block.args[0]
    assert kernel.argument("softmax_scale").type == f32
    assert kernel.argument("lse").type == LSE_TYPE
    with pytest.raises(KeyError, match="kernel @pipeline has no argument 'v'"):
        kernel.argument("v")
    assert [w.sym_name.data for w in kernel.workers] == ["producer", "consumer"]
    assert ops["producer"].instances == 1
    assert ops["consumer"].instances == 2
    assert ops["consumer"].thread_range == (128, 384)
    assert ops["copy"].tile_bytes == 64 * 128 * 2
    assert ops["map"].index_count == 2
    assert len(ops["map"].scalar_args) == 1 and len(ops["map"].index_args) == 2
    assert len(ops["tiles"].carried) == 2
    assert ops["gemm"].token.type == TokenType("consumer")


def test_parsed_kernel_keeps_names_for_argument_lookup():
    module, _ = build_kernel()
    reparsed = parse_module(cuir_context(), to_text(module), "names.mlir")
    kernel = next(op for op in reparsed.walk() if isinstance(op, KernelOp))
    assert kernel.argument("lse").type == LSE_TYPE
    assert [w.instances for w in kernel.workers] == [1, 2]


def test_register_budget_error_is_exact():
    module, ops = build_kernel(consumer_regs=248)
    with pytest.raises(VerifyException) as info:
        ops["kernel"].verify()
    assert str(info.value) == (
        "worker register budgets need 66560 registers, above the 64512 a 384-thread block holds from "
        "launch (168 per thread; setmaxnreg only moves registers between its warps)"
    )


def test_verify_module_locates_the_failing_op():
    module, ops = build_kernel()
    bad = RowReduceOp("max", ops["map"].result, RowVectorType(32, f32, "consumer"))
    ops["tiles"].body.block.insert_op_before(bad, ops["row_max"])
    with pytest.raises(CuBridgeError) as info:
        verify_module(module)
    # built ops carry no file location, so the op name stands in for it
    assert str(info.value) == (
        "<cuir.row_reduce>: error: cuir.row_reduce of a 64-row tile gives 64 values, not 32"
    )


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda t: GemmOp("ba", t, t, t.type), "gemm layout must be one of ab, abt, got 'ba'"),
        (
            lambda t: RowReduceOp("min", t, RowVectorType(64, f32, "w")),
            "row reduction must be one of max, sum, got 'min'",
        ),
        (
            lambda t: KernelOp("k", [], threads=128, smem_bytes=0, tile_m=64, schedule="static"),
            "schedule must be one of grid, persistent, dynamic, got 'static'",
        ),
    ],
)
def test_constructors_reject_words_outside_an_enum(build, message):
    tile = FillOp(0.0, TileType((64, 64), f32, "w"))
    with pytest.raises(VerifyException) as info:
        build(tile.result)
    assert str(info.value) == message


@pytest.mark.parametrize(
    "make_op, message",
    [
        (
            lambda k, a, b, t: GemmAsyncOp("abt", t, None, t, None, TileType((128, 128), f32, "w")),
            "'cuir.gemm_async' reads B from shared memory, but B is !cuir.tile<128x128xbf16, @w>",
        ),
        (
            lambda k, a, b, t: GemmOp("ab", t, t, TileType((128, 64), f32, "w")),
            "'cuir.gemm' ab: result must be 128x128, got 128x64",
        ),
        (
            lambda k, a, b, t: LoadOp(b, None, TileType((128, 128), BF16, "other")),
            "'cuir.load' runs in worker @w but its result #0 belongs to worker @other",
        ),
        (
            lambda k, a, b, t: LoadOp(b, None, TileType((128, 128), BF16, "w")),
            "load source has 2 stages and needs one stage index, got 0",
        ),
        (
            lambda k, a, b, t: RowReduceOp("sum", t, RowVectorType(64, BF16, "w")),
            "cuir.row_reduce of a 128-row tile gives 128 values, not 64",
        ),
        (
            lambda k, a, b, t: ConvertOp(t, TileType((64, 128), f32, "w")),
            "cuir.convert keeps the tile shape",
        ),
        (
            lambda k, a, b, t: StoreOp(t, a, []),
            "store destination is a rank-4 global tensor and needs 4 coordinates, got 0",
        ),
    ],
)
def test_programmatic_verifier_messages(make_op, message):
    kernel = KernelOp("k", [("q", Q_TYPE)], threads=128, smem_bytes=B_SMEM.total_bytes, tile_m=64)
    b_smem = AllocOp(B_SMEM)
    worker = WorkerOp("w", (0, 128))
    kernel.body.block.add_ops([b_smem, worker])
    tile = FillOp(0.0, TileType((128, 128), BF16, "w"))
    worker.body.block.add_op(tile)
    op = make_op(kernel, kernel.argument("q"), b_smem.result, tile.result)
    worker.body.block.add_op(op)
    tile.verify()
    with pytest.raises(VerifyException) as info:
        op.verify()
    assert str(info.value) == message


def test_map_body_checks():
    kernel = KernelOp("k", [], threads=128, smem_bytes=0, tile_m=64)
    worker = WorkerOp("w", (0, 128))
    kernel.body.block.add_op(worker)
    rows = FillOp(1.0, RowVectorType(64, f32, "w"))
    cols = FillOp(2.0, ColVectorType(32, f32, "w"))
    worker.body.block.add_ops([rows, cols])
    tile_type = TileType((64, 32), f32, "w")

    body = Block(arg_types=[f32, f32, IndexType(), IndexType()])
    total = arith.AddfOp(body.args[0], body.args[1])
    body.add_ops([total, YieldOp(total.result)])
    good = MapOp([rows.result, cols.result], [], tile_type, Region(body))
    worker.body.block.add_op(good)
    good.verify()

    short = Block(arg_types=[f32, f32, IndexType()])
    short.add_op(YieldOp(short.args[0]))
    bad = MapOp([rows.result, cols.result], [], tile_type, Region(short))
    worker.body.block.add_op(bad)
    with pytest.raises(VerifyException) as info:
        bad.verify()
    assert str(info.value) == (
        "cuir.map body arguments must be one scalar per input followed by 2 index "
        "value(s): expected (f32, f32, index, index)"
    )

    half = Block(arg_types=[f32, f32, IndexType(), IndexType()])
    narrow = arith.TruncFOp(half.args[0], Float16Type())
    half.add_ops([narrow, YieldOp(narrow.result)])
    wrong_yield = MapOp([rows.result, cols.result], [], tile_type, Region(half))
    worker.body.block.add_op(wrong_yield)
    with pytest.raises(VerifyException) as info:
        wrong_yield.verify()
    assert str(info.value) == "cuir.map yields f16 but the result holds f32"


def test_for_each_tile_must_yield_carried_values():
    kernel = KernelOp("k", [], threads=128, smem_bytes=0, tile_m=64)
    worker = WorkerOp("w", (0, 128))
    kernel.body.block.add_op(worker)
    c0 = index_constant(worker.body.block, 0)
    loop = ForEachTileOp([c0.result])
    worker.body.block.add_op(loop)
    loop.body.block.add_op(YieldOp())
    with pytest.raises(VerifyException) as info:
        loop.verify()
    assert str(info.value) == "cuir.for_each_tile body must yield its carried values (index)"


def test_vector_types_compare_by_parameters():
    assert RowVectorType(64, f32, "w") == RowVectorType(64, f32, "w")
    assert RowVectorType(64, f32, "w") != RowVectorType(64, BF16, "w")
    assert RowVectorType(64, f32, "w") != RowVectorType(128, f32, "w")
    assert RowVectorType(64, f32, "w") != RowVectorType(64, f32, "v")
    assert ColVectorType(64, f32, "w") != ColVectorType(32, f32, "w")
    assert RowVectorType(64, f32, "w") != ColVectorType(64, f32, "w")
    assert hash(RowVectorType(64, f32, "w")) == hash(RowVectorType(64, f32, "w"))
    assert TokenType("w") != TokenType("v")
    assert MbarrierType(2) != MbarrierType(1)


def test_type_helpers():
    assert A_SMEM.dims == (64, 128)
    assert A_SMEM.stage_bytes == 16384 and A_SMEM.total_bytes == 32768
    assert TileType((64, 128), f32, "w").dims == (64, 128)
    with pytest.raises(VerifyException, match=r"^swizzle must be one of \(0, 32, 64, 128\) bytes, got 16$"):
        SharedBufferType((64, 64), BF16, swizzle=16)
    with pytest.raises(VerifyException, match="^register tile elements must be f32, bf16 or f16, got i32$"):
        TileType((64, 64), builtin.i32, "w")


def test_cuir_ops_are_all_registered_and_round_tripped():
    ctx = cuir_context()
    for op in CUIR_OPS:
        assert ctx.get_optional_op(op.name) is op
    # every op has an exact printed line checked by the lit round trip
    roundtrip = Path(__file__).parents[2] / "lit_tests" / "dialect" / "roundtrip.mlir"
    checked = "\n".join(
        line for line in roundtrip.read_text().splitlines() if line.startswith("// CHECK")
    )
    missing = [op.name for op in CUIR_OPS if f"{op.name} " not in checked and f"{op.name}\n" not in checked + "\n"]
    assert not missing, f"ops without a round-trip CHECK line: {missing}"


def test_argument_names_survive_printing():
    # names are bound at launch; `_N` suffixes must not be taken for SSA uniquing
    kernel = KernelOp("k", [("lse_2", LSE_TYPE), ("scale", f32)], threads=128, smem_bytes=0, tile_m=64)
    kernel.body.block.add_op(WorkerOp("w", (0, 128)))
    text = to_text(ModuleOp([kernel]))
    assert "cuir.kernel @k(%lse_2: !cuir.global<3 x f32, strided>, %scale: f32)" in text
    reparsed = parse_module(cuir_context(), text, "names.mlir")
    parsed = next(op for op in reparsed.walk() if isinstance(op, KernelOp))
    assert [n.data for n in parsed.arg_names.data] == ["lse_2", "scale"]
    assert parsed.argument("lse_2").type == LSE_TYPE
