"""Fast-producer stall (nats-server's stall gate): the shared state, the bounds
and the wait a client's reader does after a chunk; the gates themselves are
the buffers' (``node.outbound``), closed and opened where pending bytes are
accounted and written."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import trio

if TYPE_CHECKING:
    from node.outbound import Outbound

log = logging.getLogger("node.session")

STALL_S_MIN = 0.002
"""One stall of a producer on a gated buffer (nats-server's stallClientMinDuration)."""
STALL_S_MAX = 0.005
"""One stall when the buffer is at ``max_pending`` (stallClientMaxDuration)."""
STALL_S_TOTAL = 0.010
"""All stalls of one received chunk (stallTotalAllowed, per read-loop pass)."""


def stall_threshold(max_pending: int) -> int:
    """Pending bytes above which a buffer's gate closes (nats-server: ``mp/4*3``)."""
    return max_pending // 4 * 3


class StallGates:
    """One server's fast-producer stall state, shared by its buffers.

    Attributes:
        producing: a client's reader is routing a chunk (set and cleared by it
            with nothing awaited in between).
        met: the gated buffers that routing pass delivered to (the reader
            waits for them, then clears the list); only filled while
            ``producing``, so it stays bounded.
        no_stall: ``no_fast_producer_stall``: drop instead of waiting.
        warned_at: when "Producer was stalled" was last logged (rate limit).
    """

    __slots__ = ("met", "no_stall", "producing", "warned_at")

    def __init__(self, *, no_stall: bool = False) -> None:
        self.producing = False
        self.met: list[Outbound] = []
        self.no_stall = no_stall
        self.warned_at = float("-inf")


async def wait_for_gates(producer: Any, met: list[Outbound]) -> bool:
    """A client ``producer``'s reader, after a chunk: wait for the gated buffers it delivered to (``met``, then
    cleared): for each still gated, one wait of ``STALL_S_MIN`` (``STALL_S_MAX``
    when it is at ``max_pending``) after another until its writer drains it,
    all of them at most ``STALL_S_TOTAL`` for the chunk -- as nats-server
    stalls a fast producer per message, ``stallTotalAllowed`` per read.

    Returns:
        Whether it waited at all.

    Cancellation: nothing is left behind (the gates are the buffers').
    """
    targets = list(dict.fromkeys(met)) if len(met) > 1 else list(met)
    met.clear()
    clock = trio.current_time
    stats = producer.server.stats
    spent = 0.0
    waited = False
    for c in targets:
        if c is producer:
            continue
        while STALL_S_TOTAL - spent > 1e-6 and producer.closing is None:  # (float sums)
            gate = c._gate
            if gate is None:
                break
            ttl = STALL_S_MAX if c.pending_bytes >= c._max_pending else STALL_S_MIN
            ttl = min(ttl, STALL_S_TOTAL - spent)
            c.stalls += 1
            stats.stalled_clients += 1
            waited = True
            t0 = clock()
            with trio.move_on_after(ttl):
                await gate.wait()
            spent += clock() - t0
            if c._gate is gate:
                log.debug("cid=%d event=producer_stall_timeout ttl_ms=%g", producer.cid, ttl * 1e3)
    if spent >= STALL_S_MAX:
        now = clock()
        gates = producer.server.stall_gates
        if now - gates.warned_at >= 1.0:  # nats-server rate-limits it the same way
            gates.warned_at = now
            log.warning(
                "cid=%d event=producer_stalled msg=%r",
                producer.cid,
                f"Producer was stalled for a total of {round(spent * 1e3)}ms",
            )
    return waited
