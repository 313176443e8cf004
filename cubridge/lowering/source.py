"""Reference-guided reconstruction: the reference kernel's CUDA source, patched at its seams.

A reference source (cubridge/runtime/kernels/attention_sm*.cu) computes what
all variants share and asks a policy type for the rest; the .mlir program
mirrors its `FullAttention` instance. A variant's source is the reference
text with two patches and no other change:

1. after the line `// [variant policy] ...`, a policy derived from
   `FullAttention` that overrides exactly the members whose CuIR changed;
2. after the line `// [entry points] ...`, the variant's instances in place of
   the reference's.

A variant that changes nothing gives the reference text back, byte for byte.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation

from cubridge.dialect.cuir import DimOp, KernelOp
from cubridge.diagnostics import CuBridgeError, describe_location, location_of
from cubridge.lowering.cxx import uses_mufu
from cubridge.lowering.seams import SeamFinder, VariantSeams
from cubridge.runtime.compiler import KERNELS_DIR
from cubridge.runtime.kernel_inputs import MASK_BITS, MASK_BITS_RANK

POLICY_MARKER = "// [variant policy]"
ENTRIES_MARKER = "// [entry points]"
BASE_POLICY = "FullAttention"
PAIRS_SUFFIX = "InPairs"  # the policy of a variant's K/V pairs' entry points: the variant's, kSharesKvInPair set
DTYPES = {"bf16": "__nv_bfloat16", "fp16": "__half"}


@dataclass(frozen=True)
class ReferenceSource:
    """What the lowering needs to know of one reference source beyond its text."""

    file: str
    arch: str  # the architecture its kernels need, as in sm_90a
    entry_macro: str
    entry_prefix: str
    kv_tiles: dict[int, int]  # keys per kv tile by head dim (kBlockN)
    dims: dict[tuple[str, int], str]  # (kernel argument, dimension) of a cuir.dim -> C++
    extra_entry_args: bool  # the entry macro takes the kv tile size after the head dim
    skips_empty_tiles: bool  # its policies' kSkipsEmptyTiles: the claiming role skips tiles that visit no kv tile
    mask_bits: bool  # its policies' kMaskBits: a masked tile's keep() bits come from the runtime (MASK_BITS)
    # K/V pairs (kSharesKvInPair): the macro of entry points launched in clusters of two CTAs that share their K and
    # V loads, and the head dims it serves; None where the source has none
    pair_entry_macro: str | None = None
    pair_head_dims: tuple[int, ...] = ()

    @property
    def path(self) -> Path:
        return KERNELS_DIR / self.file

    def text(self) -> str:
        return self.path.read_text()


_SHARED_DIMS = {
    ("q", 1): "p.num_heads_q",
    ("q", 2): "p.seqlen_q",
    ("k", 1): "p.num_heads_kv",
    ("k", 2): "p.seqlen_k",
    ("v", 1): "p.num_heads_kv",
    ("v", 2): "p.seqlen_k",
    ("o", 1): "p.num_heads_q",
    ("o", 2): "p.seqlen_q",
}

REFERENCES = {
    "attention_sm90.cu": ReferenceSource(
        file="attention_sm90.cu",
        arch="sm_90a",
        entry_macro="CUBRIDGE_ATTENTION_SM90_ENTRY",
        entry_prefix="attention_sm90",
        kv_tiles={64: 192, 128: 128, 256: 80},
        dims=_SHARED_DIMS | {("q", 0): "p.batch", ("k", 0): "p.batch", ("v", 0): "p.batch", ("o", 0): "p.batch"},
        extra_entry_args=True,
        skips_empty_tiles=True,
        mask_bits=True,
        pair_entry_macro="CUBRIDGE_ATTENTION_SM90_PAIR_ENTRY",
        pair_head_dims=(128,),
    ),
    "attention_sm80.cu": ReferenceSource(
        file="attention_sm80.cu",
        arch="sm_80",
        entry_macro="CUBRIDGE_ATTENTION_ENTRY",
        entry_prefix="attention_sm80",
        kv_tiles={64: 64, 128: 64},
        dims=_SHARED_DIMS | {(name, 0): "static_cast<int>(gridDim.z)" for name in "qkvo"},
        extra_entry_args=True,
        skips_empty_tiles=False,
        mask_bits=False,
    ),
}


@dataclass(frozen=True)
class Instance:
    """One entry point of a lowered source, and its K/V pairs' entry point where it has one: the same instance
    launched in clusters of two CTAs that run consecutive query tiles of one head and share their K and V loads."""

    name: str
    dtype: str  # bf16 or fp16
    head_dim: int
    pair_name: str | None = None


@dataclass(frozen=True)
class LoweredKernel:
    """A variant's CUDA source and what its launch needs."""

    reference: ReferenceSource
    variant: str
    source: str
    instances: tuple[Instance, ...]
    args: tuple[tuple[str, str], ...]  # (name, C++ table type), in the Args struct's order (MASK_BITS last, if any)
    schedule: str
    tile_m: int
    block_n: int
    threads: int
    modifies_scores: bool
    softmax: bool
    takes_tile_order: bool = False  # kHostTileOrder: the launch passes the work tiles' order (p.tile_order)

    @property
    def changed(self) -> bool:
        return self.source != self.reference.text()

    def diff(self) -> str:
        """The patch against the reference source, as a unified diff."""
        name = f"cubridge/runtime/kernels/{self.reference.file}"
        return "".join(
            difflib.unified_diff(
                self.reference.text().splitlines(keepends=True),
                self.source.splitlines(keepends=True),
                fromfile=f"a/{name}",
                tofile=f"b/{name}",
            )
        )


def _single_kernel(module: ModuleOp, what: str) -> KernelOp:
    kernels = [op for op in module.walk() if isinstance(op, KernelOp)]
    if len(kernels) != 1:
        raise CuBridgeError(f"lower: the {what} module has {len(kernels)} cuir.kernel ops; lowering takes one")
    return kernels[0]


def reference_of(kernel: KernelOp) -> ReferenceSource:
    """The reference source a kernel names with `source "..."`."""
    if kernel.source is None:
        raise CuBridgeError(
            "lower: the kernel names no reference source (source \"attention_sm90.cu\" in its header)",
            describe_location(kernel),
        )
    reference = REFERENCES.get(kernel.source.data)
    if reference is None:
        known = ", ".join(sorted(REFERENCES))
        raise CuBridgeError(f"lower: unknown reference source '{kernel.source.data}' (known: {known})",
                            describe_location(kernel))
    return reference


def cloned_pairs(module: ModuleOp, clone: ModuleOp) -> dict[Operation, Operation]:
    """Each op of `module` -> its copy in `clone` (`clone = module.clone()`, before any pass ran)."""
    return dict(zip(module.walk(), clone.walk(), strict=True))


def identifier(name: str) -> str:
    """`name` as a C++ identifier fragment (spec file stems may hold dashes or dots)."""
    cleaned = re.sub(r"\W", "_", name)
    return cleaned if cleaned and not cleaned[0].isdigit() else f"v_{cleaned}"


def lower_module(reference: ModuleOp, variant: ModuleOp, name: str = "variant",
                 instances: tuple[tuple[str, int], ...] | None = None,
                 pairs: dict[Operation, Operation] | None = None) -> LoweredKernel:
    """Lower the one kernel of `variant` by patching the source its counterpart in `reference` mirrors.

    `instances` picks (dtype, head dim) entry points (default: every one the
    reference has whose kv tile matches the IR's); `pairs` maps ops of `variant`
    to the ops of `reference` they were cloned from (`cloned_pairs`), where
    locations do not tell ops apart (a lifted kernel).
    """
    reference_kernel = _single_kernel(reference, "reference")
    kernel = _single_kernel(variant, "variant")
    source = reference_of(reference_kernel)
    where = location_of(reference_kernel)

    def dims(op: DimOp) -> str:
        names = [n.data for n in kernel.arg_names.data]
        argument = names[kernel.body.block.args.index(op.tensor)]
        expression = source.dims.get((argument, op.dim.value.data))
        if expression is None:
            raise CuBridgeError(f"lower: no kernel parameter holds dimension {op.dim.value.data} of '{argument}'",
                                describe_location(op))
        return expression

    seams = SeamFinder(reference_kernel, kernel, dims, where.filename if where else None, pairs).find()
    if seams.skip_empty and not source.skips_empty_tiles:
        raise CuBridgeError(f"lower: the kernel skips empty work tiles (skip_empty), which {source.file} has no "
                            "seam for", describe_location(kernel))
    mask_bits = source.mask_bits and seams.kv_tile is not None and seams.keep is not None
    if any(name == MASK_BITS for name, _ in seams.args):
        raise CuBridgeError(f"lower: kernel input '{MASK_BITS}' has the name of the runtime's mask bits; rename the "
                            "captured tensor", describe_location(kernel))
    args = (*seams.args, (MASK_BITS, f"Table<uint32_t, {MASK_BITS_RANK}>")) if mask_bits else tuple(seams.args)
    text = source.text()
    chosen = _instances(source, seams, instances)
    variant_name = identifier(name)
    shares_kv = _shares_kv_in_pairs(source, seams)
    entries = []
    for dtype, head_dim in chosen:
        entry = f"{source.entry_prefix}_{dtype}_d{head_dim}_{variant_name}"
        in_pairs = shares_kv and head_dim in source.pair_head_dims
        entries.append(Instance(entry, dtype, head_dim, f"{entry}_pairs" if in_pairs else None))
    entries = tuple(entries)
    if seams.changed:
        policy = f"{_pascal(variant_name)}Variant"
        text = _insert_after_marker(text, POLICY_MARKER, render_policy(seams, policy, name, args, mask_bits,
                                                                       shares_kv))
        text = _replace_entries(text, source, entries, policy)
    else:
        entries = ()
    return LoweredKernel(
        reference=source,
        variant=variant_name,
        source=text,
        instances=entries,
        args=args,
        schedule=kernel.schedule.data.value,
        tile_m=kernel.tile_m.value.data,
        block_n=seams.block_n,
        threads=kernel.threads.value.data,
        modifies_scores=seams.modify_score is not None,
        softmax=seams.activate is None,
        takes_tile_order=seams.skip_empty,
    )


def _shares_kv_in_pairs(source: ReferenceSource, seams: VariantSeams) -> bool:
    """Whether the variant's instances may run in K/V pairs: the source has pair entry points and every work tile of
    a head visits the same kv tiles in the same order (no block lists, and a kv range that reads neither the work
    tile's query rows nor a value the lowering cannot follow), so that the two CTAs of a pair (consecutive query tiles
    of one head) load the same K and V rows."""
    return (source.pair_entry_macro is not None and seams.kv_tile is None and not seams.skip_empty
            and not seams.kv_range_reads_rows)


def _instances(source: ReferenceSource, seams: VariantSeams, wanted) -> list[tuple[str, int]]:
    available = [(dtype, d) for dtype in DTYPES for d, n in source.kv_tiles.items() if n == seams.block_n]
    if wanted is None:
        return available
    for dtype, head_dim in wanted:
        if (dtype, head_dim) in available:
            continue
        if head_dim in source.kv_tiles and dtype in DTYPES:
            raise CuBridgeError(
                f"lower: {source.file} takes {source.kv_tiles[head_dim]}-key kv tiles at head dim {head_dim}, but "
                f"the transferred CuIR has {seams.block_n}-key tiles; variants at head dim {head_dim} need a "
                "reference program of that instance"
            )
        raise CuBridgeError(f"lower: {source.file} has no {dtype} instance at head dim {head_dim}")
    return list(wanted)


def _pascal(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_") if part) or "Variant"


def _insert_after_marker(text: str, marker: str, insertion: str) -> str:
    lines = text.splitlines(keepends=True)
    index = next((i for i, line in enumerate(lines) if line.lstrip().startswith(marker)), None)
    if index is None:
        raise CuBridgeError(f"lower: the reference source has no '{marker}' line to patch at")
    return "".join(lines[: index + 1]) + insertion + "".join(lines[index + 1 :])


def _replace_entries(text: str, source: ReferenceSource, entries: tuple[Instance, ...], policy: str) -> str:
    lines = text.splitlines(keepends=True)
    index = next((i for i, line in enumerate(lines) if line.lstrip().startswith(ENTRIES_MARKER)), None)
    if index is None:
        raise CuBridgeError(f"lower: the reference source has no '{ENTRIES_MARKER}' line to patch at")
    rows, pair_rows = [], []  # the instances, then their K/V pairs
    for entry in entries:
        tile = f", {source.kv_tiles[entry.head_dim]}" if source.extra_entry_args else ""
        shape = f"{DTYPES[entry.dtype]}, {entry.head_dim}{tile}"
        rows.append(f"{source.entry_macro}({entry.name}, {shape}, {policy})\n")
        if entry.pair_name is not None:
            pair_rows.append(f"{source.pair_entry_macro}({entry.pair_name}, {shape}, {policy}{PAIRS_SUFFIX})\n")
    return "".join(lines[: index + 1]) + "".join(rows + pair_rows)


def _function(signature: str, statements, result: str) -> list[str]:
    body = [f"    {statement}" for statement in statements]
    return [f"  {signature} {{", *body, f"    return {result};", "  }"]


def render_policy(seams: VariantSeams, policy: str, variant: str, args: tuple[tuple[str, str], ...],
                  mask_bits: bool, shares_kv_in_pairs: bool) -> str:
    """The variant's policy: FullAttention with the members whose CuIR changed overridden; `args` are its Args
    tables (the seams' and, with `mask_bits`, the runtime's mask bits). With `shares_kv_in_pairs`, also the policy
    of its K/V pairs' entry points: the same with kSharesKvInPair set."""
    lines = [
        "",
        f"// The variant '{variant}': {BASE_POLICY} with the members whose CuIR changed, written by cuir-opt --lower",
        "// from the transferred program (a trailing comment names the spec line an op came from).",
        f"struct {policy} : {BASE_POLICY} {{",
    ]
    if args:
        lines.append("  struct Args {")
        lines += [f"    {kind} {name};" for name, kind in args]
        lines.append("  };")
    if seams.modify_score is not None:
        lines.append("  static constexpr bool kModifiesScores = true;")
        if uses_mufu(seams.modify_score.statements):  # its MUFU work comes before the softmax's (run 157)
            lines.append("  static constexpr bool kRetireAtStepTop = true;")
    if seams.position_slope is not None:
        lines.append("  static constexpr bool kPositionBias = true;")
    if seams.activate is not None:
        lines.append("  static constexpr bool kSoftmax = false;")
    if seams.keep is not None and seams.keep.reads_tables:
        lines.append("  static constexpr bool kMaskLoads = true;")
    if seams.kv_tile is not None:  # block lists: partial tiles first, then the mask-free full tiles
        lines.append("  static constexpr bool kUnswitchedMask = true;")
    if seams.skip_empty:
        lines.append("  static constexpr bool kSkipsEmptyTiles = true;")
        lines.append("  static constexpr bool kHostTileOrder = true;")
    if seams.mask_columns is not None:
        lines.append("  static constexpr bool kMaskColumns = true;")
        lines.append("  struct Columns {")
        lines += [f"    {kind} {name};" for kind, name in seams.mask_columns.fields]
        lines.append("  };")
    if mask_bits:
        lines.append("  static constexpr bool kMaskBits = true;")
    if seams.kv_range is not None:
        code, begin, end, full_begin, full_end = seams.kv_range
        lines += [
            "  template <int kBlockN, typename VariantArgs>",
            "  __device__ static KvRange kv_range(const AttentionParams& p, const VariantArgs& args, "
            "const WorkTile& tile, int, int) {",
            f"    static_assert(kBlockN == {seams.block_n}, \"the transferred CuIR has {seams.block_n}-key kv tiles\");",
            *[f"    {statement}" for statement in code.statements],
            f"    return KvRange{{{begin}, {end}, {full_begin}, {full_end}}};",
            "  }",
        ]
    if seams.kv_tile is not None:
        lines += _function(
            "__device__ static int kv_tile(const AttentionParams& p, const Args& args, const WorkTile& tile, "
            "int position)",
            seams.kv_tile.statements,
            seams.kv_tile.result,
        )
    if seams.modify_score is not None:
        lines += _function(
            "__device__ static float modify_score(float score, int b, int h, int q_idx, int kv_idx, "
            "const Args& args)",
            seams.modify_score.statements,
            seams.modify_score.result,
        )
    if seams.position_slope is not None:
        lines += _function("__device__ static float position_slope(int b, int h, const Args& args)",
                           seams.position_slope.statements, seams.position_slope.result)
    if seams.mask_columns is not None:
        fields = ", ".join(name for _, name in seams.mask_columns.fields)
        lines += _function("__device__ static Columns columns(int b, int h, int kv_idx, const Args& args)",
                           seams.mask_columns.statements, f"Columns{{{fields}}}")
        lines += _function(
            "__device__ static bool keep(int b, int h, int q_idx, int kv_idx, const Columns& columns, "
            "const Args& args)",
            seams.keep.statements,
            seams.keep.result,
        )
        lines += _function("__device__ static bool keep(int b, int h, int q_idx, int kv_idx, const Args& args)", (),
                           "keep(b, h, q_idx, kv_idx, columns(b, h, kv_idx, args), args)")
    elif seams.keep is not None:
        lines += _function(
            "__device__ static bool keep(int b, int h, int q_idx, int kv_idx, const Args& args)",
            seams.keep.statements,
            seams.keep.result,
        )
    if seams.activate is not None:
        lines += _function("__device__ static float activate(float score)", seams.activate.statements,
                           seams.activate.result)
    lines.append("};")
    if shares_kv_in_pairs:
        lines += [
            f"// '{variant}' in K/V pairs: the work tiles of a head visit the same kv tiles (its kv range does not",
            "// read the query rows), so the two CTAs of a pair read the same K and V rows in the same order.",
            f"struct {policy}{PAIRS_SUFFIX} : {policy} {{",
            "  static constexpr bool kSharesKvInPair = true;",
            "};",
        ]
    return "\n".join(lines) + "\n"
