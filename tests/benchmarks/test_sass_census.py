"""benchmarks/sass_census.py: the kv-step loops found in a SASS listing, instructions classed, exposed loads found."""

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("sass_census", ROOT / "benchmarks" / "sass_census.py")
census = sys.modules["sass_census"] = importlib.util.module_from_spec(spec)  # dataclasses look their module up
spec.loader.exec_module(census)

# A kernel with a prologue GEMM outside any loop, then a loop of two GEMM chains (S into R88, P V into R24) whose
# body gathers one value and reads it at once, then an epilogue loop with one chain only.
LISTING = """
        /*0000*/                   HGMMA.64x128x16.F32.BF16 R88, gdesc[UR4], RZ, !UPT ;   /* 0x0 */
        /*0010*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;                      /* 0x0 */
        /*0020*/                   HGMMA.64x128x16.F32.BF16 R88, gdesc[UR4], RZ, !UPT ;   /* 0x0 */
        /*0030*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR8], R24 ;        /* 0x0 */
        /*0040*/                   LDG.E R7, desc[UR30][R8.64] ;                         /* 0x0 */
        /*0050*/                   SEL R9, R7, RZ, !P0 ;                                 /* 0x0 */
        /*0060*/                   FFMA R10, R88, R2, -R3 ;                              /* 0x0 */
        /*0070*/                   MUFU.EX2 R10, R10 ;                                   /* 0x0 */
        /*0080*/              @!P1 BRA 0x20 ;                                            /* 0x0 */
        /*0090*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR8], R24 ;        /* 0x0 */
        /*00a0*/                   UIADD3 UR4, UR4, 0x1, URZ ;                           /* 0x0 */
        /*00b0*/               @P2 BRA 0x90 ;                                            /* 0x0 */
        /*00c0*/                   EXIT ;                                                /* 0x0 */
"""


def test_the_kv_step_loop_is_the_loop_with_both_gemm_chains():
    (body,) = census.kv_step_loops(census.parse_sass(LISTING))
    assert [instruction.address for instruction in (body[0], body[-1])] == [0x20, 0x80]
    counts = census.census(body)
    assert counts["tensor core"] == 2 and counts["global memory"] == 1 and counts["MUFU"] == 1
    assert counts["FP32"] == 1 and counts["integer and logic"] == 1 and counts["control"] == 1


def test_a_load_read_by_the_next_instruction_is_exposed():
    (body,) = census.kv_step_loops(census.parse_sass(LISTING))
    assert census.load_use_distances(body) == [1]


def test_no_loop_with_two_gemm_chains_is_an_error():
    listing = "\n".join(line for line in LISTING.splitlines() if "R24" not in line)
    try:
        census.kv_step_loops(census.parse_sass(listing))
    except ValueError as error:
        assert "two HGMMA chains" in str(error)
    else:
        raise AssertionError("a kernel without a two-GEMM loop must be refused")


# Unswitched steps: a masked loop and a mask-free loop, both inside the loop over work tiles; a wait's retry
# placed after the exit branches back into the second.
UNSWITCHED = """
        /*0000*/                   HGMMA.64x128x16.F32.BF16 R88, gdesc[UR4], RZ, !UPT ;   /* 0x0 */
        /*0010*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR8], R24 ;        /* 0x0 */
        /*0020*/                   FSEL R88, R88, -INF , !P3 ;                            /* 0x0 */
        /*0030*/              @!P1 BRA 0x0 ;                                             /* 0x0 */
        /*0040*/                   HGMMA.64x128x16.F32.BF16 R88, gdesc[UR4], RZ, !UPT ;   /* 0x0 */
        /*0050*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR8], R24 ;        /* 0x0 */
        /*0060*/              @!P2 BRA 0x40 ;                                            /* 0x0 */
        /*0070*/               @P4 BRA 0x0 ;                                             /* 0x0 */
        /*0080*/                   EXIT ;                                                /* 0x0 */
        /*0090*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P1, [UR4], R2 ;         /* 0x0 */
        /*00a0*/                   BRA 0x50 ;                                            /* 0x0 */
"""


def test_unswitched_steps_are_one_loop_each():
    loops = census.kv_step_loops(census.parse_sass(UNSWITCHED))
    assert [(body[0].address, body[-1].address) for body in loops] == [(0x0, 0x30), (0x40, 0x60)]


# A kv step whose score wait is followed by a mask select and a row max before its first exp2.
SOFTMAX = """
        /*0000*/                   HGMMA.64x128x16.F32.BF16 R88, gdesc[UR4], RZ, !UPT ;   /* 0x0 */
        /*0010*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR8], R24 ;        /* 0x0 */
        /*0020*/                   WARPGROUP.DEPBAR.LE gsb0, 0x1 ;                      /* 0x0 */
        /*0030*/                   FSEL R88, R88, -INF , !P3 ;                            /* 0x0 */
        /*0040*/                   FMNMX R4, R88, R89, !PT ;                              /* 0x0 */
        /*0050*/                   FFMA R10, R88, R2, -R3 ;                              /* 0x0 */
        /*0060*/                   MUFU.EX2 R10, R10 ;                                   /* 0x0 */
        /*0070*/                   MUFU.EX2 R11, R11 ;                                   /* 0x0 */
        /*0080*/              @!P1 BRA 0x0 ;                                             /* 0x0 */
"""


def test_the_path_from_the_score_wait_to_the_first_exp2_is_counted():
    (body,) = census.kv_step_loops(census.parse_sass(SOFTMAX))
    assert census.score_wait_to_mufu(body) == 3
    (plain,) = census.kv_step_loops(census.parse_sass(LISTING))  # its only wait is outside the loop
    assert census.score_wait_to_mufu(plain) is None


# A kv step whose mask block (two selects) is skipped by a predicated branch right after the score wait.
MASK_BRANCH = """
        /*0000*/                   HGMMA.64x128x16.F32.BF16 R88, gdesc[UR4], RZ, !UPT ;   /* 0x0 */
        /*0010*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR8], R24 ;        /* 0x0 */
        /*0020*/                   WARPGROUP.DEPBAR.LE gsb0, 0x1 ;                      /* 0x0 */
        /*0030*/               @P0 BRA 0x60 ;                                            /* 0x0 */
        /*0040*/                   FSEL R88, R88, -INF , !P3 ;                            /* 0x0 */
        /*0050*/                   FSEL R89, R89, -INF , !P4 ;                            /* 0x0 */
        /*0060*/                   MUFU.EX2 R10, R10 ;                                   /* 0x0 */
        /*0070*/              @!P1 BRA 0x0 ;                                             /* 0x0 */
"""


def test_a_mask_free_step_leaves_out_the_block_its_branch_skips():
    (body,) = census.kv_step_loops(census.parse_sass(MASK_BRANCH))
    assert len(body) == 8 and census.mask_free_step(body) == 6
    (softmax,) = census.kv_step_loops(census.parse_sass(SOFTMAX))  # no branch after its wait but the loop's own
    assert census.mask_free_step(softmax) == len(softmax)
    unpredicated = MASK_BRANCH.replace("@P0 BRA 0x60", "    BRA 0x60")  # not a mask test: nothing to leave out
    (body,) = census.kv_step_loops(census.parse_sass(unpredicated))
    assert census.mask_free_step(body) == len(body)
