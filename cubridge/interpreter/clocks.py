"""Vector clocks for happens-before between warp-group instances.

A clock maps a component (a warp-group instance, or an mbarrier stage whose
phases complete asynchronously) to a count. An event is an epoch
`(component, count)`; it happens before a clock that has seen that count.
"""

from __future__ import annotations

from collections.abc import Hashable

Clock = dict[Hashable, int]
Epoch = tuple[Hashable, int]


def join(into: Clock, other: Clock) -> None:
    """Make `into` the component-wise maximum of both clocks."""
    for component, count in other.items():
        if into.get(component, 0) < count:
            into[component] = count


def happens_before(epoch: Epoch, clock: Clock) -> bool:
    component, count = epoch
    return clock.get(component, 0) >= count
