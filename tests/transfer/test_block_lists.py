"""A kernel transferred with block lists visits exactly the non-empty kv tiles of each
work tile, each once, with mask code on partial tiles and without it on full tiles.

The executor's steps for `cuir.map` and `scf.if` are wrapped to record, for every executed
score map, its (query row, kv row) origin and whether it still holds mask code, and for every
mask branch around a score map (the lifted Hopper program's), the same origin and whether
the branch runs the mask.
"""

import numpy as np
import pytest
from xdsl.dialects import scf

from cubridge.dialect.cuir import GatherOp, GemmAsyncOp, GemmOp, MapOp
from cubridge.frontends.spec import load_spec
from cubridge.interpreter import ProblemShape, verify
from cubridge.interpreter.executor import find_kernel, execute, KernelPlan
from cubridge.interpreter.inputs import kernel_inputs
from cubridge.interpreter.compiler import HANDLERS, Step
from cubridge.runtime.kernel_inputs import classify_kv_tiles

from transfer_helpers import PROGRAMS, spec_path, transferred

KV_TILE = {"sm80": 64, "sm90": 128}
Q_TILE = 128
# the 128-row work tile is one score map on sm80, two consumer groups of 64 rows on sm90
MAPS_PER_TILE = {"sm80": 1, "sm90": 2}


def is_score_map(op) -> bool:
    return (
        isinstance(op, MapOp)
        and len(op.inputs) == 1
        and isinstance(op.inputs[0].owner, GemmOp | GemmAsyncOp)
        and op.inputs[0].owner.layout.data == "abt"
    )


def masked_score_map(op) -> MapOp | None:
    """The score map an scf.if runs on the tiles that need a mask (the lifted Hopper program's branch)."""
    if not isinstance(op, scf.IfOp):
        return None
    return next((inner for inner in op.true_region.block.ops if is_score_map(inner)), None)


@pytest.fixture
def visits(monkeypatch):
    """(q tile, kv tile, masked) of each executed score map, and of each mask branch (scf.if around a score
    map, masked when it runs the map)."""
    recorded = []
    build_map, build_if = HANDLERS[MapOp], HANDLERS[scf.IfOp]

    def recording(op, compiler):
        step = build_map(op, compiler)
        if not is_score_map(op) or isinstance(op.parent_op(), scf.IfOp):
            return step
        masked = any(isinstance(inner, GatherOp) for inner in op.body.walk())
        q_row, kv_row = op.origin

        def run(frame):
            recorded.append((int(frame.values[q_row]) // Q_TILE, int(frame.values[kv_row]), masked))
            return step.run(frame)

        return Step(run, step.suspends)

    def recording_branch(op, compiler):
        step = build_if(op, compiler)
        score_map = masked_score_map(op)
        if score_map is None:
            return step
        q_row, kv_row = score_map.origin

        def run(frame):
            masked = bool(frame.values[op.cond])
            recorded.append((int(frame.values[q_row]) // Q_TILE, int(frame.values[kv_row]), masked))
            return step.run(frame)

        return Step(run, step.suspends)

    monkeypatch.setitem(HANDLERS, MapOp, recording)
    monkeypatch.setitem(HANDLERS, scf.IfOp, recording_branch)
    return recorded


@pytest.mark.parametrize("program", PROGRAMS)
@pytest.mark.parametrize(
    "name, shape",
    [
        ("interleaved_documents", ProblemShape(1, 2, 1, 300, 300, 128)),
        ("document_mask", ProblemShape(1, 1, 1, 400, 450, 128)),
    ],
)
def test_visits_exactly_the_nonempty_tiles(program, name, shape, visits):
    spec = load_spec(spec_path(name))
    result = verify(transferred(program, spec_path(name)), spec, shapes=[shape], seeds=(0,), schedules=1)
    assert result.ok, result.summary()
    block_n = KV_TILE[program]
    partial, full = classify_kv_tiles(
        spec.mask_mod, (shape.batch, shape.heads_q, shape.seqlen_q, shape.seqlen_kv), Q_TILE, block_n
    )
    partial, full = partial[0, 0].cpu().numpy(), full[0, 0].cpu().numpy()
    assert (partial | full).any(axis=1).all(), "every query tile keeps some key in these shapes"
    expected = {
        (q_tile, kv_tile * block_n): full[q_tile, kv_tile]
        for q_tile, kv_tile in zip(*np.nonzero(partial | full))
    }
    counts: dict[tuple[int, int], int] = {}
    for q_tile, kv_row, masked in visits:
        assert kv_row % block_n == 0
        assert (q_tile, kv_row) in expected, f"visited empty kv tile {kv_row // block_n} of q tile {q_tile}"
        counts[(q_tile, kv_row)] = counts.get((q_tile, kv_row), 0) + 1
        if not masked:
            assert expected[(q_tile, kv_row)], "mask-free body on a partial tile"
    assert set(counts) == set(expected)
    assert set(counts.values()) == {shape.batch * shape.heads_q * MAPS_PER_TILE[program]}
    # mask code is dropped on full tiles
    assert any(not masked for *_, masked in visits)


def test_interleaved_documents_skip_a_tile_inside_the_range():
    """The allowed kv tiles of the first query tile are not contiguous, on both tile sizes."""
    spec = load_spec(spec_path("interleaved_documents"))
    for block_n in KV_TILE.values():
        partial, full = classify_kv_tiles(spec.mask_mod, (1, 1, 300, 300), Q_TILE, block_n)
        kept = (partial | full)[0, 0, 0].tolist()
        first, last = kept.index(True), len(kept) - 1 - kept[::-1].index(True)
        assert not all(kept[first : last + 1])


@pytest.mark.parametrize("program", PROGRAMS)
def test_masks_of_disjoint_bands_take_block_lists(program):
    """share_question keeps a question band and an answer band per row: the hull between them would visit
    empty tiles, so it gets block lists; PrefixLM's two bands merge into one and keep closed-form bounds."""

    def argument_names(spec):
        kernel = next(op for op in transferred(program, spec_path(spec)).walk() if op.name == "cuir.kernel")
        return [name.data for name in kernel.arg_names.data]

    assert "kv_num_blocks" in argument_names("share_question")
    assert "kv_num_blocks" not in argument_names("prefix_lm")


# Interleaved documents with one key: query tile 2 (row 256, document 1) keeps none, tiles 0 and 1 (document 0) do.
ONE_KEY = ProblemShape(2, 2, 1, 257, 1, 128)


@pytest.mark.parametrize("program", PROGRAMS)
def test_empty_work_tiles_are_skipped_under_the_dynamic_schedule(program, visits):
    """The Hopper program claims its tiles (dynamic schedule) and skips those whose lists are both empty: no
    worker visits them and their rows come out as a tile with no visible key (O 0, LSE -inf, checked against the
    reference). The Ampere program (a program per tile, no peeled kv step) runs them with an empty kv loop."""
    spec = load_spec(spec_path("interleaved_documents"))
    module = transferred(program, spec_path("interleaved_documents"))
    result = verify(module, spec, shapes=[ONE_KEY], seeds=(0,), schedules=2)
    assert result.ok, result.summary()
    skips = program == "sm90"
    assert (find_kernel(module).skip_empty is not None) == skips
    assert {q_tile for q_tile, *_ in visits} == {0, 1}


def test_skipped_tiles_are_written_by_the_launch_not_by_a_program():
    spec = load_spec(spec_path("interleaved_documents"))
    plan = KernelPlan(find_kernel(transferred("sm90", spec_path("interleaved_documents"))))
    shape = ONE_KEY
    rng = np.random.default_rng(0)
    inputs = {name: rng.standard_normal((shape.batch, heads, length, 128)).astype(np.float32)
              for name, heads, length in (("q", shape.heads_q, shape.seqlen_q), ("k", 1, 1), ("v", 1, 1))}
    tables = kernel_inputs(spec, plan.kernel, inputs["q"], inputs["k"], inputs["v"])
    assert plan.skipped_tiles(shape, tables) == [(2, h, b) for b in range(2) for h in range(2)]
    assert all(q_tile != 2 for tiles in plan.program_tiles(shape, 2, tables) for q_tile, _, _ in tiles)
    execution = execute(plan, shape, inputs, 0.1, num_sms=2, tables=tables)
    assert not execution.log
    assert (execution.outputs["o"][:, :, 256] == 0).all() and (execution.outputs["lse"][:, :, 256] == -np.inf).all()
    assert np.isfinite(execution.outputs["lse"][:, :, :140]).all()  # document 0 (rows 140-255 keep no key)


def test_bounds_left_unforced_without_skip_empty_fail_verification():
    """With skip_empty dropped, the tiles the transfer no longer forces to one kv tile reach the workers: the
    consumers' first step waits for a K tile the producer, which loads none, never sends."""
    spec = load_spec(spec_path("interleaved_documents"))
    module = transferred("sm90", spec_path("interleaved_documents"))
    del find_kernel(module).properties["skip_empty"]
    result = verify(module, spec, shapes=[ONE_KEY], seeds=(0,), schedules=1)
    assert not result.ok
    assert result.verdict == "deadlock", result.summary()
