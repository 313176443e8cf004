"""mbarrier, named-barrier and vector-clock semantics."""

import numpy as np
from xdsl.dialects.builtin import UNKNOWN_LOC
from xdsl.dialects import test as test_dialect

from cubridge.interpreter.clocks import happens_before, join
from cubridge.interpreter.memory import SharedStage
from cubridge.interpreter.report import DiagnosticLog
from cubridge.interpreter.sync import MbarrierStage, NamedBarrier, TmaCopy, WarpGroup


def _op():
    op = test_dialect.TestOp()
    op.location = UNKNOWN_LOC
    return op


def _copy(barrier, stage, tx_bytes, thread):
    op = _op()
    access = stage.start_write(op, thread, "its phase")
    return TmaCopy(op, stage, np.ones((2, 2), np.float32), barrier, access, tx_bytes, None)


def test_fresh_mbarrier_has_completed_the_phase_before_phase_zero():
    barrier = MbarrierStage("%b", 1)
    assert barrier.ready(1)
    assert not barrier.ready(0)


def test_phase_completes_when_arrivals_and_bytes_are_in():
    log = DiagnosticLog()
    producer, consumer = WarpGroup("@producer[0]", 0), WarpGroup("@consumer[0]", 1)
    barrier = MbarrierStage("%full", 1)
    stage = SharedStage("%buf", np.zeros((2, 2), np.float32))
    barrier.arrive(_op(), producer, 32, log)
    copy = _copy(barrier, stage, 16, producer)
    copy.land(log)
    assert barrier.phase == 0 and stage.writes_in_flight
    _copy(barrier, stage, 16, producer).land(log)
    assert barrier.phase == 1 and barrier.ready(0)
    assert not stage.writes_in_flight
    assert not log
    # the data is visible to whoever acquires the completed phase, not before
    op, writer, epoch = stage.last_write
    assert not happens_before(epoch, consumer.clock)
    join(consumer.clock, barrier.completed_clock)
    assert happens_before(epoch, consumer.clock)
    assert happens_before((0, 1), consumer.clock)


def test_extra_arrival_in_a_phase_is_reported():
    log = DiagnosticLog()
    thread = WarpGroup("@producer[0]", 0)
    barrier = MbarrierStage("%full", 1)
    barrier.arrive(_op(), thread, 64, log)
    barrier.arrive(_op(), thread, 0, log)
    (diagnostic,) = log.diagnostics
    assert diagnostic.category == "mbarrier arrivals"
    assert "is arrival 2 at %full in phase 0, which expects 1" in diagnostic.message


def test_more_bytes_than_expected_are_reported():
    log = DiagnosticLog()
    thread = WarpGroup("@producer[0]", 0)
    barrier = MbarrierStage("%full", 1)
    barrier.arrive(_op(), thread, 8, log)
    _copy(barrier, SharedStage("%buf", np.zeros((2, 2), np.float32)), 16, thread).land(log)
    (diagnostic,) = log.diagnostics
    assert diagnostic.category == "tx bytes"
    assert "delivered 16 bytes to %full in phase 0" in diagnostic.message
    assert diagnostic.message.endswith("expects 8")


def test_named_barrier_counts_threads_per_generation():
    log = DiagnosticLog()
    barrier = NamedBarrier("named barrier 1")
    first, second = WarpGroup("@a[0]", 0), WarpGroup("@a[1]", 1)
    assert barrier.arrive(_op(), first, 256, log) == 0
    assert barrier.generation == 0
    assert barrier.arrive(_op(), second, 256, log) == 0
    assert barrier.generation == 1
    assert happens_before(first.epoch(), second.clock) is False
    join(second.clock, barrier.completed_clocks[0])
    assert happens_before((0, 1), second.clock)
    assert not log


def test_named_barrier_count_mismatch_is_reported():
    log = DiagnosticLog()
    barrier = NamedBarrier("named barrier 3")
    barrier.arrive(_op(), WarpGroup("@a[0]", 0), 384, log)
    barrier.arrive(_op(), WarpGroup("@a[1]", 1), 256, log)
    (diagnostic,) = log.diagnostics
    assert diagnostic.category == "named barrier count"
    assert "expects 256 threads at named barrier 3" in diagnostic.message


def test_clock_release_starts_a_new_epoch():
    thread = WarpGroup("@w[0]", 4)
    before = thread.epoch()
    published = {}
    thread.release_into(published)
    assert happens_before(before, published)
    assert not happens_before(thread.epoch(), published)
