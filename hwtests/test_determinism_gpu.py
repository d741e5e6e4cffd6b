"""On a GPU, the ticket-counter kernel (atomicAdd order across work-groups) is really
nondeterministic, and the repeat mode says so with exact, self-consistent statistics."""

import numpy as np

from gpurace.determinism import repeat_kernel
from tests.test_determinism import TICKET, launch_of


def test_ticket_counter_differs_between_replays_on_a_gpu():
    n = 1024 * 64
    spec = launch_of(
        [1024],
        {"binding": 0, "type": "u32", "count": 1},
        {"binding": 1, "type": "u32", "count": n},
        {"binding": 2, "type": "u32", "count": n},
    )
    result = repeat_kernel(TICKET, spec, runs=20, path="ticket.wgsl")
    assert result.distinct > 1
    counter, order, work = result.outputs
    assert counter.identical and work.identical and not order.identical
    for rep in result.representatives:
        assert np.array_equal(np.sort(rep["order"]), np.arange(n, dtype=np.uint32))
