"""Global tensors and shared-memory stages, with the access history the race
checks need."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.ir import Operation

from cubridge.interpreter.clocks import Epoch, happens_before
from cubridge.interpreter.numerics import rounding_for
from cubridge.interpreter.report import DiagnosticLog, where


def _window(shape: tuple[int, ...], indices: list[int], extents: tuple[int, ...]):
    """Index tuples (into the tensor, into the tile) of the part of a tile at
    `indices` that lies inside a tensor of `shape`; None if nothing does.

    The tile covers the last len(extents) dimensions; leading indices pick one element each.
    """
    leading = len(shape) - len(extents)
    tensor_index: list = []
    for index, size in zip(indices[:leading], shape[:leading]):
        if not 0 <= index < size:
            return None
        tensor_index.append(index)
    tile_index: list = []
    for start, extent, size in zip(indices[leading:], extents, shape[leading:]):
        low, high = max(start, 0), min(start + extent, size)
        if low >= high:
            return None
        tensor_index.append(slice(low, high))
        tile_index.append(slice(low - start, high - start))
    return tuple(tensor_index), tuple(tile_index)


class GlobalTensor:
    """A kernel argument in global memory. Outputs remember which program wrote each element."""

    def __init__(self, array: np.ndarray, element_type, is_output: bool):
        self.array = array
        self.round = rounding_for(element_type)
        self.writer = np.full(array.shape, -1, dtype=np.int32) if is_output else None
        self.double_write: tuple[Operation, int, int] | None = None

    def read_tile(self, indices: list[int], extents: tuple[int, ...]) -> np.ndarray:
        """The tile at `indices`; elements outside the tensor read as zero."""
        tile = np.zeros(extents, dtype=np.float32)
        window = _window(self.array.shape, indices, extents)
        if window is not None:
            tensor_index, tile_index = window
            tile[tile_index] = self.array[tensor_index]
        return tile

    def write_tile(self, op: Operation, program: int, indices: list[int], tile: np.ndarray):
        """Store the part of `tile` inside the tensor, rounded to the element type."""
        window = _window(self.array.shape, indices, tile.shape)
        if window is None:
            return
        tensor_index, tile_index = window
        self.array[tensor_index] = self.round(tile[tile_index])
        if self.writer is None:
            return
        writers = self.writer[tensor_index]
        if self.double_write is None:
            others = writers[(writers >= 0) & (writers != program)]
            if others.size:
                self.double_write = (op, int(others[0]), program)
        writers[...] = program


@dataclass(eq=False)
class InFlight:
    """An asynchronous access of a shared stage, until its completion (`until`): the whole stage, or the columns
    [first, end) of a panel copy."""

    op: Operation
    thread: object
    until: str
    columns: tuple[int, int] | None = None

    def overlaps(self, columns: tuple[int, int] | None) -> bool:
        if self.columns is None or columns is None:
            return True
        return self.columns[0] < columns[1] and columns[0] < self.columns[1]


class SharedStage:
    """One stage of a shared buffer: its data and who accessed it, with which epoch."""

    def __init__(self, label: str, data: np.ndarray):
        self.label = label
        self.data = data
        self.writes_in_flight: list[InFlight] = []
        self.reads_in_flight: list[InFlight] = []
        self.last_write: tuple[Operation, object, Epoch] | None = None
        self.reads: list[tuple[Operation, object, Epoch]] = []
        self.unfenced_write: tuple[Operation, object] | None = None
        # Within an instance, an access is spread over its threads (register stores and loads, synchronous
        # copies, cp.async: each thread its part) or made by one thread (a TMA store, which that thread alone
        # waits for). Its four warps run apart, so two such accesses of a stage, one a write, need a barrier of
        # the warp group between them: the last of each kind, with the instance's barrier count then.
        self.spread_write: tuple[Operation, object, int] | None = None
        self.spread_read: tuple[Operation, object, int] | None = None
        self.issuer_read: tuple[Operation, object, int] | None = None

    def check_read(self, op: Operation, thread, log: DiagnosticLog) -> None:
        """A read by `thread` must follow completed, visible writes."""
        for write in self.writes_in_flight:
            log.race(
                "race",
                op,
                f"{where(op)} reads {self.label} while {where(write.op)} is still "
                f"writing it (before {write.until})",
            )
        if self.last_write is None:
            return
        writer_op, writer, epoch = self.last_write
        if writer is not thread and not happens_before(epoch, thread.clock):
            log.race(
                "unsynchronized read",
                op,
                f"{where(op)} in {thread.label} reads {self.label} written by "
                f"{where(writer_op)} in {writer.label}, but no mbarrier wait, "
                "wait_group or barrier makes the write visible to it",
            )

    @staticmethod
    def _unordered(access: tuple[Operation, object, int] | None, thread) -> Operation | None:
        """The op of `access` where `thread` made it with no barrier of its warp group since."""
        if access is None:
            return None
        op, accessor, syncs = access
        return op if accessor is thread and syncs == thread.warp_syncs else None

    def check_spread_read(self, op: Operation, thread, log: DiagnosticLog) -> None:
        """A read spread over `thread`'s warps follows its spread write across a barrier of the warp group."""
        writer = self._unordered(self.spread_write, thread)
        if writer is not None:
            log.race("race", op, f"{where(op)} reads {self.label} from every warp of {thread.label}, which "
                                 f"{where(writer)} wrote from every warp with no barrier of the warp group since: a "
                                 "warp may read a part another has not written yet")

    def check_spread_write(self, op: Operation, thread, log: DiagnosticLog) -> None:
        """A write spread over `thread`'s warps follows its spread read, and the wait of a read issued by one of
        its threads (a TMA store), across a barrier of the warp group."""
        reader = self._unordered(self.spread_read, thread)
        if reader is not None:
            log.race("race", op, f"{where(op)} writes {self.label} from every warp of {thread.label}, which "
                                 f"{where(reader)} read from every warp with no barrier of the warp group since: a "
                                 "warp may overwrite a part another still reads")
        issuer = self._unordered(self.issuer_read, thread)
        if issuer is not None:
            log.race("race", op, f"{where(op)} writes {self.label} from every warp of {thread.label}, but only the "
                                 f"thread that issued {where(issuer)} waited for its read to finish, with no barrier "
                                 "of the warp group since")

    def check_issuer_read(self, op: Operation, thread, log: DiagnosticLog) -> None:
        """A read issued by one thread of `thread` (a TMA store) follows its spread write across a barrier of
        the warp group: the issuing thread runs ahead of the other warps otherwise."""
        writer = self._unordered(self.spread_write, thread)
        if writer is not None:
            log.race("race", op, f"{where(op)} reads {self.label}, which {where(writer)} wrote from every warp of "
                                 f"{thread.label}, with no barrier of the warp group since: its issuing thread may "
                                 "run ahead of the other warps' writes")

    def record_spread_read(self, op: Operation, thread) -> None:
        self.spread_read = (op, thread, thread.warp_syncs)

    def record_spread_write(self, op: Operation, thread) -> None:
        self.spread_write = (op, thread, thread.warp_syncs)
        self.issuer_read = None

    def check_async_proxy_read(self, op: Operation, log: DiagnosticLog) -> None:
        """wgmma and TMA reads see ordinary (generic-proxy) writes only after a proxy fence."""
        if self.unfenced_write is None:
            return
        writer_op, writer = self.unfenced_write
        log.race(
            "missing fence",
            op,
            f"{where(op)} reads {self.label} through the async proxy, but {where(writer_op)} "
            f"in {writer.label} wrote it with no cuir.fence_async_shared since",
        )

    def record_read(self, op: Operation, thread) -> None:
        self.reads.append((op, thread, thread.epoch()))

    def check_write(self, op: Operation, thread, log: DiagnosticLog,
                    columns: tuple[int, int] | None = None) -> None:
        """A write (of `columns`, or the whole stage) must not meet in-flight accesses of those columns nor reads
        the writer has not seen released."""
        for read in self.reads_in_flight:
            log.race(
                "race",
                op,
                f"{where(op)} writes {self.label} while {where(read.op)} still reads it "
                f"(before {read.until})",
            )
        for write in self.writes_in_flight:
            if not write.overlaps(columns):
                continue
            log.race(
                "race",
                op,
                f"{where(op)} writes {self.label} while {where(write.op)} is still "
                f"writing it (before {write.until})",
            )
        for reader_op, reader, epoch in self.reads:
            if reader is not thread and not happens_before(epoch, thread.clock):
                log.race(
                    "stage overwrite",
                    op,
                    f"{where(op)} in {thread.label} overwrites {self.label}, which "
                    f"{where(reader_op)} in {reader.label} read and has not released "
                    "to it (no mbarrier arrive/wait or barrier orders the read first)",
                )
        self.reads = []

    def write(self, op: Operation, thread, tile: np.ndarray) -> None:
        """A write that completes on return (a register store or synchronous copy)."""
        self.data[...] = tile
        self.last_write = (op, thread, thread.epoch())
        self.record_spread_write(op, thread)
        self.write_through_generic_proxy(op, thread)

    def write_through_generic_proxy(self, op: Operation, thread) -> None:
        """Record a completed ordinary write, pending the writer's proxy fence."""
        self.unfenced_write = (op, thread)
        thread.unfenced_stages.add(self)

    def fence(self, thread) -> None:
        """`thread`'s proxy fence: its ordinary writes become visible to the async proxy."""
        if self.unfenced_write is not None and self.unfenced_write[1] is thread:
            self.unfenced_write = None

    def start_write(self, op: Operation, thread, until: str, columns: tuple[int, int] | None = None) -> InFlight:
        access = InFlight(op, thread, until, columns)
        self.writes_in_flight.append(access)
        return access

    def finish_write(self, access: InFlight, epoch: Epoch) -> None:
        self.writes_in_flight.remove(access)
        self.last_write = (access.op, access.thread, epoch)
        self.unfenced_write = None
        self.spread_write = None

    def start_read(self, op: Operation, thread, until: str) -> InFlight:
        access = InFlight(op, thread, until)
        self.reads_in_flight.append(access)
        return access

    def finish_read(self, access: InFlight) -> None:
        self.reads_in_flight.remove(access)
        self.reads.append((access.op, access.thread, access.thread.epoch()))

    def finish_issuer_read(self, access: InFlight) -> None:
        """A read issued by one thread of its instance finishes, at that thread's wait."""
        self.finish_read(access)
        self.issuer_read = (access.op, access.thread, access.thread.warp_syncs)


class SharedBuffer:
    """A `cuir.alloc`ed shared buffer: `stages` tiles, uninitialized (NaN) until written."""

    def __init__(self, name: str, stages: int, dims: tuple[int, int]):
        data = np.full((stages, *dims), np.nan, dtype=np.float32)
        label = f"%{name}"
        self.stages = [
            SharedStage(f"{label}[{s}]" if stages > 1 else label, data[s]) for s in range(stages)
        ]
