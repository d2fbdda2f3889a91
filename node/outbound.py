"""A bounded outbound byte buffer with batched accounting (sessions and routes).

Theory of operation: the owner's writer task joins everything queued into one
write.  There are two ways in:

* ``_push(data)`` — one item, accounted at once (pending bytes, slow-consumer
  check, writer woken).  Used for protocol replies and the general delivery
  path.
* the router's hot path appends straight to ``_out`` (one item may carry a
  run of messages; the router counts ``out_msgs`` itself) and remembers the
  buffer in its batch; after the reader has acted on a whole received chunk it
  calls ``flush_batch()`` once per touched buffer, which accounts the new bytes
  in one ``sum`` and wakes the writer once (``_batch_wake``: a client session
  with an idle writer and a small batch writes it at once instead).  Between the append and the flush
  nothing awaits, so the writer never sees an unaccounted item.

``_counted`` is the number of items already accounted; ``_take()`` hands the
writer everything and resets the counters.  Over ``max_pending`` bytes the
owner's ``_overflow()`` runs (slow consumer).

Fast-producer stall (nats-server's stall gate): when a router batch leaves
more than 3/4 of ``max_pending`` queued, ``flush_batch`` closes the buffer's
*gate* (a ``trio.Event``); the owner's writer opens it once a write has sent
everything it took (or the owner closes).  A client's reader marks its routing
pass as a client producer's (``StallGates.producing``); a gated buffer it
delivers to is noted in ``StallGates.met``, and after the chunk the reader
waits for those gates (``ClientSession._stall``: 2 ms a wait, 5 ms at
``max_pending``, at most 10 ms a chunk), so a consumer's writer drains before
the producer adds more.  With ``no_fast_producer_stall`` the batch a client
producer routes to a gated buffer is dropped instead (the reference drops the
message, it does not wait).  Routes, leafnodes and internal producers never
mark their passes, so they are never stalled and never dropped for.  The
check costs one comparison per touched buffer per batch, where the bytes are
accounted anyway; nothing per message.

Held wake-ups: while the owner's own reader acts on a received chunk
(``_hold()``), whatever is queued for the owner (a PONG, a reply, a PubAck)
does not wake the writer; at the end of the chunk ``_release()`` says whether
a wake-up is due, and the reader either writes the bytes itself (one
non-blocking send, when the writer is idle) or wakes the writer then.  The
common request/response case so costs no task switch to the writer.  Nothing
awaits between ``_hold()`` and ``_release()``, so no other task can queue
meanwhile.
"""

from __future__ import annotations

from itertools import islice

import trio

from node.stall import StallGates, stall_threshold


class Outbound:
    """Mixin: ``_out`` list, ``pending_bytes``, ``out_msgs`` and the writer's wake-up."""

    _out: list[bytes]
    _counted: int
    pending_bytes: int
    out_msgs: int
    _max_pending: int
    _wake: trio.Event
    _wake_set: bool
    _holding: bool
    _flush_on_close: bool
    _gate: trio.Event | None
    _stall_at: int
    _gates: StallGates | None
    stalls: int
    closing: object

    def _init_outbound(self, max_pending: int, gates: StallGates | None = None) -> None:
        self._out = []
        self._counted = 0
        self.pending_bytes = 0
        self.out_msgs = 0
        self._max_pending = max_pending
        self._wake = trio.Event()
        self._wake_set = False
        self._holding = False
        # closing, but what was queued before the close is still written
        # (a protocol error's -ERR after the chunk's deliveries)
        self._flush_on_close = False
        # fast-producer stall: the gate (closed while over the threshold), the
        # server's shared state (None: never gated), stalls of producers on us
        self._gate = None
        self._stall_at = stall_threshold(max_pending)
        self._gates = gates
        self.stalls = 0

    def _overflow(self) -> None:
        """Called when pending bytes pass ``max_pending`` (owner closes)."""
        raise NotImplementedError

    def _account(self) -> None:
        out = self._out
        if len(out) > self._counted:
            self.pending_bytes += sum(map(len, islice(out, self._counted, None)))
            self._counted = len(out)

    def flush_batch(self) -> None:
        """Account items the router appended directly, check the bound, wake."""
        if self.closing is not None and not self._flush_on_close:  # nobody will write them
            self._drop_pending()
            return
        if self._gate is not None:
            self._gated_batch()
        self._account()
        if self.pending_bytes > self._max_pending:
            self._overflow()
            return
        if self.pending_bytes > self._stall_at:
            self._close_gate()
        if not self._wake_set:
            self._wake_set = True
            if not self._holding:
                self._batch_wake()

    def _gated_batch(self) -> None:
        """A batch for a gated buffer: when a client producer routed it, note
        the buffer for its stall, or drop the batch (``no_fast_producer_stall``)."""
        gates = self._gates
        if gates is None or not gates.producing:
            return
        if gates.no_stall:
            del self._out[self._counted :]  # the reference drops what meets the gate
        else:
            gates.met.append(self)

    def _close_gate(self) -> None:
        """Over the stall threshold: close the gate (producers meeting it wait)."""
        if self._gate is None and self._gates is not None:
            self._gate = trio.Event()
            if self._gates.producing and not self._gates.no_stall:
                self._gates.met.append(self)

    def _open_gate(self) -> None:
        """Release stalled producers (everything taken was written, or closing)."""
        gate = self._gate
        if gate is not None:
            self._gate = None
            gate.set()

    def _batch_wake(self) -> None:
        """Wake the writer for what a router batch appended (owners may write
        it themselves instead, see ``ClientSession``)."""
        self._wake.set()

    def _hold(self) -> None:
        """Hold writer wake-ups (the owner's reader starts acting on a chunk)."""
        self._holding = True

    def _release(self) -> bool:
        """End a hold; True when something was queued meanwhile and the
        writer has not been woken (the caller writes it or calls ``_wake_now``)."""
        self._holding = False
        return self._wake_set and not self._wake.is_set()

    def _wake_now(self) -> None:
        """Wake the writer for data queued during a hold."""
        self._wake_set = True
        self._wake.set()

    def _take_held(self) -> bytes:
        """Everything queued, for a write by the owner's reader after a hold
        (the writer's wake-up is left as it is: not set)."""
        data = self._take_data()
        self._wake_set = False
        return data

    def _push(self, data: bytes, *, msg: bool) -> bool:
        """Queue one item; False when that made the buffer overflow."""
        self._account()
        self._out.append(data)
        self._counted += 1
        self.pending_bytes += len(data)
        if msg:
            self.out_msgs += 1
        if self.pending_bytes > self._max_pending:
            self._overflow()
            return False
        if not self._wake_set:
            self._wake_set = True
            if not self._holding:
                self._wake.set()
        return True

    def _drop_pending(self) -> None:
        self._out.clear()
        self._counted = 0
        self.pending_bytes = 0
        self._open_gate()

    def _take(self) -> bytes:
        """Everything queued, joined (b"" if nothing); resets the wake-up."""
        self._wake = trio.Event()
        self._wake_set = False
        return self._take_data()

    def _take_data(self) -> bytes:
        out = self._out
        if not out:
            return b""
        self._account()
        data = out[0] if len(out) == 1 else b"".join(out)
        out.clear()
        self._counted = 0
        self.pending_bytes = 0
        return data
