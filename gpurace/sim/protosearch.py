"""The bounded search over the orders of protocol operations (docs/protocols.md).

A kernel with mbarriers or cluster barriers runs its protocol operations one group
(a warp's lanes at one instruction) at a time; where several groups are ready the
scheduler asks `Choices.pick`. The default choice (0) runs the groups that do not
arrive (waits, inits) before those that arrive, so every waiter is waiting when a
phase completes: the delay-free order of a GPU, in which a producer that never waits
for its consumer is not caught. `search` re-runs the launch under every order that
deviates from that default at up to `DELAYS` choice points (a deviation runs one of
the ready arrivals first and keeps the waits that were ready delayed until nothing
else can run: a consumer that falls behind, so a producer runs ahead), at most
`ORDERS` orders, breadth-first by the number of deviations, and returns the first
protocol error one of them found.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from gpurace.model import ProtocolError

DELAYS = 2  # deviations from the default order per order searched
ORDERS = 64  # orders run at most (the default one included)
DEPTH = 64  # choice points per order where a deviation may be placed


class Choices:
    """The choices of one order: `prefix`, then the default (0) at every later point;
    `options` records how many groups each point offered."""

    def __init__(self, prefix: list[int] | None = None) -> None:
        self.prefix = prefix or []
        self.options: list[int] = []
        self.delayed: set[tuple[int, int]] = set()  # (pc, warp) of the waits delayed

    def pick(self, n: int) -> int:
        k = len(self.options)
        self.options.append(n)
        return min(self.prefix[k], n - 1) if k < len(self.prefix) else 0


class SearchStopped(Exception):
    """An order that could not finish (it hung): the search ends there."""


@dataclass
class Searched:
    """What the search did: the orders run, whether that was every order within the
    bound, and the first protocol error found (None: none)."""

    orders: int
    exhausted: bool
    error: ProtocolError | None
    stopped: str = ""  # why an order could not finish (the search ended there)

    def statement(self) -> str:
        if self.stopped:
            how = f"stopped: {self.stopped}"
        elif self.error is not None:
            how = "stopped at the first protocol error"
        elif self.exhausted:
            how = f"every order with up to {DELAYS} delayed operations"
        else:
            how = f"not every order with up to {DELAYS} delayed operations (cap {ORDERS})"
        orders = "1 order" if self.orders == 1 else f"{self.orders} orders"
        return f"mbarrier protocol: {orders} of its operations searched, {how}"


def search(run: Callable[[Choices], ProtocolError | None]) -> Searched:
    """Run `run` (one launch in the order its Choices pick) over the bounded orders."""
    queue: deque[tuple[list[int], int]] = deque([([], 0)])
    orders = 0
    while queue and orders < ORDERS:
        prefix, delays = queue.popleft()
        choices = Choices(prefix)
        try:
            error = run(choices)
        except SearchStopped as exc:
            return Searched(orders + 1, False, None, str(exc))
        orders += 1
        if error is not None:
            return Searched(orders, False, error)
        if delays < DELAYS:
            for k in range(len(prefix), min(len(choices.options), DEPTH)):
                for j in range(1, choices.options[k]):
                    queue.append((prefix + [0] * (k - len(prefix)) + [j], delays + 1))
    return Searched(orders, not queue, None)
