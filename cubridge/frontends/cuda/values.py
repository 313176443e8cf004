"""The values the lifter computes with while it walks a kernel.

Compile-time values are Python ints, floats and bools and `TypeValue`s; run-time scalars are `Run` (an SSA
value); values that differ between the threads of the block are `PerThread` (one entry per thread of the
kernel), which is how role predicates, lanes and issuers are recognized.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from tree_sitter import Node
from xdsl.ir import Operation, SSAValue

from cubridge.frontends.cuda.source import CudaSource


NOT_BOUND = object()  # what a name that is neither in scope nor a file constant looks up to


@dataclass(frozen=True)
class TypeValue:
    """A C++ type as a template argument: `__nv_bfloat16`, `SharedLayout<128>`, `FullAttention`."""

    name: str
    arguments: tuple = ()

    def __str__(self) -> str:
        if not self.arguments:
            return self.name
        return f"{self.name}<{', '.join(str(a) for a in self.arguments)}>"


@dataclass(frozen=True)
class Run:
    """A run-time scalar: an SSA value of type index, f32 or i1."""

    value: SSAValue


@dataclass(frozen=True, eq=False)
class PerThread:
    """An integer or boolean that depends on the thread: one entry per thread of the block."""

    values: np.ndarray


@dataclass(eq=False)
class Cell:
    """A variable: its current value and the C++ name it was declared with."""

    name: str
    value: object
    mutable: bool = True


@dataclass(eq=False)
class StructValue:
    """An object of a struct: one cell per field."""

    struct: str
    fields: dict[str, Cell]
    arguments: tuple = ()

    def copy(self) -> StructValue:
        return StructValue(self.struct, {n: Cell(c.name, _copy(c.value), c.mutable) for n, c in self.fields.items()},
                           self.arguments)


@dataclass(eq=False)
class ArrayValue:
    """An array, element by element (row-major over `shape`). `kind`: "fragment" (the thread's share of a
    float tile, in `layout`), "packed" (of a 16-bit tile, two elements a register), "rows" (one value per
    row the thread holds: a row vector), "plain", or "view": `array[i]` of a multi-dimensional array, the
    cells of `parent` from `offset` on."""

    cells: list[Cell]
    kind: str = "plain"
    name: str = ""
    shape: tuple[int, ...] = ()
    layout: object = None  # elements.FragmentLayout of a fragment or row vector (None: wgmma)
    parent: ArrayValue | None = None
    offset: int = 0

    def copy(self) -> ArrayValue:
        return ArrayValue([Cell(c.name, _copy(c.value), c.mutable) for c in self.cells], self.kind, self.name,
                          self.shape, self.layout)

    def element(self, index: int):
        """`array[index]`: a cell, or the view of a sub-array."""
        if len(self.shape) <= 1:
            return self.cells[index]
        inner = len(self.cells) // self.shape[0]
        root = self.parent or self
        return ArrayValue(self.cells[index * inner:(index + 1) * inner], "view", self.name, self.shape[1:],
                          parent=root, offset=self.offset + index * inner)


def _copy(value):
    return value.copy() if isinstance(value, (StructValue, ArrayValue)) else value


@dataclass(frozen=True)
class Reference:
    """A C++ reference or pointer to a variable."""

    cell: Cell


@dataclass(frozen=True)
class SharedRef:
    """A tile or mbarrier of the shared storage, at stage `index` (None: a single buffer), `offset` bytes in."""

    name: str
    index: object = None
    offset: object = 0


@dataclass(frozen=True)
class SharedStorageValue:
    """The shared-storage object whose methods hand out tiles and mbarriers."""

    struct: str
    arguments: tuple


@dataclass(frozen=True)
class TensorArgument:
    """A kernel tensor (a tensor-map parameter or a pointer field), by its CuIR argument name."""

    name: str


@dataclass(frozen=True)
class ParamsValue:
    """The kernel's parameter struct; its fields are mapped by the profile."""

    struct: str


@dataclass(frozen=True)
class SchedulerValue:
    """The tile scheduler object."""

    struct: str


@dataclass(frozen=True)
class Cursor:
    """The scheduler's position: a linear tile index, only ever passed back to the scheduler."""


@dataclass(frozen=True)
class FunctionValue:
    """A function (or method, bound to `this`) not yet called, with explicit template arguments."""

    name: str
    template_arguments: tuple = ()
    this: object = None
    scope_struct: str | None = None


@dataclass(eq=False)
class LambdaValue:
    node: Node
    scope: object
    source: object


@dataclass(frozen=True, eq=False)
class Guard:
    """`issuer && condition`: a thread predicate (who issues) and a run-time condition (whether)."""

    threads: PerThread
    condition: object


@dataclass(frozen=True)
class SharedStore:
    """`*pointer` into a shared tile: the target of an element store."""

    ref: SharedRef


@dataclass(frozen=True)
class TensorStore:
    """`tensor[index]` of a kernel tensor: the target of an element store."""

    tensor: TensorArgument
    index: object


@dataclass(frozen=True)
class SharedPointer:
    """An element pointer into the `extern __shared__` block: `tile` (a profile `shared_tiles` allocation;
    None: the block's base) at stage `stage`, plus `offset` elements from the tile's first element."""

    tile: str | None
    stage: object = None
    offset: int = 0


@dataclass(frozen=True)
class Stride:
    """The element stride of dimension `dim` of kernel tensor `tensor` (a parameter field)."""

    tensor: str
    dim: int


@dataclass(frozen=True)
class StrideTerm:
    """`count * stride`: `count` steps along a tensor dimension."""

    stride: Stride
    count: object


@dataclass(frozen=True)
class GlobalPointer:
    """A pointer into kernel tensor `tensor`: coordinates by dimension (`dim -> value`, the others 0), or a
    linear element offset `linear` into a contiguous tensor."""

    tensor: str
    coordinates: tuple = ()
    linear: object = None


@dataclass(frozen=True)
class GridIndex:
    """`blockIdx.x` (`reversed`: `gridDim.x - 1 - blockIdx.x`) or, `extent`, `gridDim.x` (minus `minus`)
    before it becomes the work tile's query tile."""

    extent: bool = False
    minus: int = 0


class Scope:
    """Names visible at a point of the walk: variables (cells) and template arguments."""

    def __init__(self, parent: Scope | None = None, source: CudaSource | None = None, struct: str | None = None,
                 this=None):
        self.parent = parent
        self.names: dict[str, object] = {}
        self.source = source if source is not None else (parent.source if parent else None)
        self.struct = struct if struct is not None else (parent.struct if parent else None)
        self.this = this if this is not None else (parent.this if parent else None)

    def lookup(self, name: str):
        scope = self
        while scope is not None:
            if name in scope.names:
                return scope.names[name]
            scope = scope.parent
        raise KeyError(name)


def same_value(a: SSAValue, b: SSAValue) -> bool:
    """Whether two values are computed alike: the same value, or pure ops of one kind on alike operands (a
    panel's coordinates are recomputed for every panel, a score's slope for every element; CSE merges them once
    the lift is done). A captured table's read counts as pure: the tables are read-only in the kernel."""
    if a is b:
        return True
    if not (isinstance(a.owner, Operation) and isinstance(b.owner, Operation)):
        return False
    x, y = a.owner, b.owner
    return (x.name == y.name and x.name.startswith(("arith.", "math.", "cuir.dim", "cuir.gather"))
            and x.properties == y.properties
            and x.attributes == y.attributes and len(x.operands) == len(y.operands)
            and all(same_value(p, q) for p, q in zip(x.operands, y.operands)))
