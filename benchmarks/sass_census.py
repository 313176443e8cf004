"""Instruction census of the Hopper kernel's consumer kv-step loops, by class, from its SASS (no GPU needed: nvcc
and cuobjdump only).

A kv-step loop is a loop of the entry point (a backward branch and the instructions from its target to it) that
holds both GEMMs of a kv step, S = Q K^T and O += P V (at least two HGMMA chains), and no smaller such loop. The
reference kernels have one; a variant whose steps are unswitched (kUnswitchedMask) has a masked and a mask-free
one, each a row. The counts are static: every instruction of the loop body once, whichever path a step takes
through it (a loop's masked and mask-free paths both count), so they price the code a kv step can run, not what
one step issues. "Mask-free step" leaves out the block that the branch after the score wait skips on a tile that
needs no mask (the reference's masked block): what a mask-free step can issue. "Score wait to first MUFU" counts
the instructions between the wait for S (its first in the loop, in address order) and the first MUFU op after it:
the path from the score GEMM to the softmax's exps, which the other consumer group's GEMMs have to cover. The
last column counts the loop's global loads whose result is read within a few instructions: each of those stalls
its warp for the load's latency.

  python3 benchmarks/sass_census.py                                   # the reference kernel, bf16 D=128
  python3 benchmarks/sass_census.py --spec examples/specs/document_mask.py --spec examples/specs/softcap.py
  python3 benchmarks/sass_census.py --dtype fp16 --head-dim 64
  python3 benchmarks/sass_census.py --source edited.cu              # a whole (lowered, hand-edited) source

cuobjdump comes from PATH, $CUDA_HOME/bin or the `nvidia-cuda-cuobjdump` wheel (`pip install
nvidia-cuda-cuobjdump`).
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

HOPPER = (9, 0)
# SASS opcode (its first dot-separated part) -> class. Uniform-datapath opcodes (U*, R2UR) are one class.
EXPOSED_LOAD_DISTANCE = 3  # a load read this few instructions later waits out its latency
CLASSES = {
    "tensor core": {"HGMMA", "WARPGROUP"},
    "MUFU": {"MUFU"},
    "FP32": {"FFMA", "FMUL", "FADD", "FMNMX", "FSEL", "FSETP", "FCHK"},
    "conversion": {"F2FP", "F2F", "I2F", "F2I", "I2FP", "F2IP", "FRND"},
    "integer and logic": {"IMAD", "IADD3", "VIADD", "IADD", "ISETP", "LOP3", "SEL", "SHF", "LEA", "IABS", "IMNMX",
                          "VIMNMX", "PLOP3", "P2R", "R2P", "PRMT", "MOV", "CS2R", "S2R", "FLO", "POPC", "BREV"},
    "global memory": {"LDG", "STG", "RED", "ATOM", "ATOMG"},
    "shared memory": {"LDS", "STS", "LDSM", "STSM", "ATOMS"},
    "constant": {"LDC"},
    "shuffle": {"SHFL"},
    "barrier and async": {"BAR", "SYNCS", "DEPBAR", "MEMBAR", "FENCE", "UTMALDG", "UTMASTG", "UBLKCP", "ERRBAR"},
    "control": {"BRA", "BSSY", "BSYNC", "EXIT", "RET", "CALL", "WARPSYNC", "NOP", "YIELD", "JMP", "BMOV"},
}
INSTRUCTION = re.compile(r"^\s+/\*([0-9a-f]{4,})\*/\s+(@!?U?P[T0-9]+\s+)?([A-Z0-9_]+)([^;]*);")
BRANCH_TARGET = re.compile(r"0x([0-9a-f]+)\s*$")


@dataclass(frozen=True)
class Instruction:
    address: int
    opcode: str  # the first dot-separated part: HGMMA, LDG, ...
    operands: str
    predicated: bool = False  # issued under a predicate (@P0, @!UP1, ...)

    @property
    def kind(self) -> str:
        if self.opcode.startswith("U") and self.opcode not in ("UTMALDG", "UTMASTG", "UBLKCP"):
            return "uniform datapath"
        if self.opcode == "R2UR":
            return "uniform datapath"
        return next((name for name, opcodes in CLASSES.items() if self.opcode in opcodes), "other")


def parse_sass(text: str) -> list[Instruction]:
    """The instructions of one function's cuobjdump -sass listing, in address order."""
    instructions = []
    for line in text.splitlines():
        match = INSTRUCTION.match(line)
        if match:
            address, predicate, mnemonic, operands = match.groups()
            instructions.append(Instruction(int(address, 16), mnemonic.split(".")[0], operands.strip(),
                                            predicate is not None))
    return instructions


def kv_step_loops(instructions: list[Instruction]) -> list[list[Instruction]]:
    """The loop bodies (backward-branch target to the branch) with both GEMM chains of a kv step and no smaller
    such loop inside, in address order; a ValueError when no loop holds two."""
    loops = []
    for index, instruction in enumerate(instructions):
        if instruction.opcode != "BRA":
            continue
        target = BRANCH_TARGET.search(instruction.operands)
        if target is None or int(target.group(1), 16) > instruction.address:
            continue
        start = int(target.group(1), 16)
        body = [i for i in instructions[:index + 1] if i.address >= start]
        if gemm_chains(body) >= 2:
            loops.append(body)
    if not loops:
        raise ValueError("no loop holds both GEMMs of a kv step (two HGMMA chains)")

    def holds(outer, inner):
        return outer is not inner and outer[0].address <= inner[0].address and inner[-1].address <= outer[-1].address

    def enters(jump, loop):  # a branch back into a loop's middle from past its end: a wait's out-of-line retry
        return loop[0].address < jump[0].address <= loop[-1].address < jump[-1].address

    loops = [loop for loop in loops if not any(enters(loop, other) for other in loops)]
    innermost = [loop for loop in loops if not any(holds(loop, other) for other in loops)]
    return sorted(innermost, key=lambda body: body[0].address)


def gemm_chains(body: list[Instruction]) -> int:
    """HGMMA chains in `body`: runs of HGMMA accumulating into one register (a chain's first operand)."""
    accumulators = {i.operands.split(",")[0] for i in body if i.opcode == "HGMMA"}
    return len(accumulators)


def census(body: list[Instruction]) -> collections.Counter:
    return collections.Counter(instruction.kind for instruction in body)


def load_use_distances(body: list[Instruction]) -> list[int]:
    """For each global load of `body` whose result is read later in it: how many instructions later. A load
    read within a few instructions stalls its warp for the load's whole latency (nothing independent was
    scheduled between them)."""
    distances = []
    for index, instruction in enumerate(body):
        if instruction.opcode != "LDG":
            continue
        destination = re.compile(rf"\b{instruction.operands.split(',')[0].split()[-1]}\b")
        distances += [later - index for later in range(index + 1, len(body))
                      if destination.search(body[later].operands.partition(",")[2])][:1]
    return distances


def score_wait(body: list[Instruction]) -> int | None:
    """The index of a kv step's score wait (`WARPGROUP.DEPBAR.LE gsb0, 0x1`: S done, P V in flight), its first in
    the loop; None where the loop has none."""
    return next((index for index, instruction in enumerate(body)
                 if instruction.opcode == "WARPGROUP" and instruction.operands.endswith("gsb0, 0x1")), None)


def score_wait_to_mufu(body: list[Instruction]) -> int | None:
    """Instructions between a kv step's score wait and the first MUFU op after it: the path the softmax's first
    exp2 waits on (mask selects, row max), where the other consumer group's GEMMs have to cover it. None where the
    loop has no such wait or no MUFU after it."""
    wait = score_wait(body)
    if wait is None:
        return None
    return next((index - wait - 1 for index in range(wait + 1, len(body)) if body[index].opcode == "MUFU"), None)


def mask_free_step(body: list[Instruction]) -> int:
    """Instructions of the loop that a step with no mask can issue: all but the block that the first predicated
    forward branch after the score wait skips, where that branch lands inside the loop (a masked step's mask,
    which the reference kernels branch around on mask-free tiles). The whole loop where there is no such branch
    (an unswitched loop's mask-free body has no mask to skip)."""
    wait = score_wait(body)
    if wait is None:
        return len(body)
    for instruction in body[wait + 1:]:
        target = BRANCH_TARGET.search(instruction.operands) if instruction.opcode == "BRA" else None
        if target is None or not instruction.predicated:
            continue
        landing = int(target.group(1), 16)
        if instruction.address < landing <= body[-1].address:
            return len(body) - sum(instruction.address < i.address < landing for i in body)
        break
    return len(body)


def find_cuobjdump() -> str:
    """cuobjdump from PATH, $CUDA_HOME/bin or the nvidia-cuda-cuobjdump wheel; SystemExit naming the fix."""
    candidates = [shutil.which("cuobjdump"), os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin",
                                                          "cuobjdump")]
    try:
        import nvidia

        candidates += [os.path.join(path, "cu13", "bin", "cuobjdump") for path in nvidia.__path__]
        candidates += [os.path.join(path, "cuda_cuobjdump", "bin", "cuobjdump") for path in nvidia.__path__]
    except ImportError:
        pass
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise SystemExit("sass_census: cuobjdump not found (PATH, $CUDA_HOME/bin, or pip install nvidia-cuda-cuobjdump)")


def entry_sass(cubin: Path, entry: str) -> str:
    result = subprocess.run([find_cuobjdump(), "-sass", "-fun", entry, str(cubin)], capture_output=True, text=True)
    if result.returncode != 0 or "Function :" not in result.stdout:
        raise SystemExit(f"sass_census: cuobjdump found no function {entry} in {cubin.name}: "
                         f"{result.stderr.strip()[:200]}")
    return result.stdout


def kernels(args) -> list[tuple[str, Path, str]]:
    """(label, cubin, entry) of every kernel asked for."""
    from cubridge.runtime.attention_sm90 import SOURCE, kernel_name
    from cubridge.runtime.compiler import compile_cubin
    from cubridge.runtime.variant import build_variant, source_file

    import torch

    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[args.dtype]
    reference = compile_cubin(SOURCE, HOPPER).path
    rows = [(f"reference {'causal' if causal else 'full'}", reference, kernel_name(dtype, args.head_dim, causal))
            for causal in (False, True)]
    for spec in args.spec:
        variant = build_variant(spec, reference="sm90")
        lowered = variant.lowered(args.dtype, args.head_dim)
        cubin = compile_cubin(source_file(lowered), HOPPER).path
        entry = next(instance.name for instance in lowered.instances
                     if f"_{args.dtype}_d{args.head_dim}_" in instance.name)
        rows.append((Path(spec).stem, cubin, entry))
    for source in args.source:
        text = Path(source).read_text()
        entry = re.search(rf"ENTRY\((attention_sm90_{args.dtype}_d{args.head_dim}_\w+),", text)
        if entry is None:
            raise SystemExit(f"sass_census: {source} has no {args.dtype} D={args.head_dim} sm90 entry point")
        rows.append((Path(source).stem, compile_cubin(Path(source), HOPPER).path, entry.group(1)))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spec", action="append", default=[], help="a spec whose lowered variant to count")
    parser.add_argument("--source", action="append", default=[], help="a whole kernel source to count")
    parser.add_argument("--dtype", choices=("bf16", "fp16"), default="bf16")
    parser.add_argument("--head-dim", type=int, choices=(64, 128, 256), default=128)
    args = parser.parse_args()
    rows = []
    for label, cubin, entry in kernels(args):
        instructions = parse_sass(entry_sass(cubin, entry))
        loops = kv_step_loops(instructions)
        for number, body in enumerate(loops, 1):
            distances = load_use_distances(body)
            exposed = sum(distance <= EXPOSED_LOAD_DISTANCE for distance in distances)
            name = label if len(loops) == 1 else f"{label} (loop {number} of {len(loops)})"
            to_mufu = score_wait_to_mufu(body)
            rows.append((name, len(instructions), census(body), len(body), mask_free_step(body),
                         "-" if to_mufu is None else str(to_mufu), f"{exposed} of {len(distances)}"))
    classes = [name for name in [*CLASSES, "uniform datapath", "other"] if any(row[2][name] for row in rows)]
    print(f"| kernel ({args.dtype}, D={args.head_dim}) | whole entry | kv-step loop | mask-free step | "
          + " | ".join(classes)
          + f" | score wait to first MUFU | global loads read within {EXPOSED_LOAD_DISTANCE} instructions |")
    print("|---" * (len(classes) + 6) + "|")
    for label, total, counts, loop, mask_free, to_mufu, exposed in rows:
        print(f"| {label} | {total} | {loop} | {mask_free} | " + " | ".join(str(counts[name]) for name in classes)
              + f" | {to_mufu} | {exposed} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
