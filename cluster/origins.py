"""Origins: the streams mirrors and sources read, behind one protocol.

Theory of operation
-------------------
A feed (``cluster.sourcing``) reads its origin through ``Origin``: ``start``
positions the reading the way a consumer's deliver policy would (``StartAt``:
an explicit sequence, a time, or everything; nats-server
``selectStartingSeqNo``) and returns the sequence before the first to be
delivered; ``read`` waits for and returns the next batch after a sequence;
``lag`` tells what is known to remain.  Failures are exceptions the feed
handles: ``OriginGone`` (deleted: look for it again), ``OriginRetry`` (lost
delivery or silence: start again from the next needed sequence),
``OriginRecreated`` (another incarnation: start over) and
``OriginUnavailable`` (unreachable or refused, with the API error to show).

``LocalOrigin`` serves a stream on this server straight from its store:
batches of at most ``max_msgs`` messages and ``BATCH_BYTES_MAX`` bytes
matching the source's filters, and when nothing is there it sleeps on the
origin's ``Stream.listeners`` (woken by ``NewMessages`` or by ``gone``; no
polling).  The remote counterpart is ``cluster.api_origin.ApiOrigin``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import trio

from cluster.source_headers import stream_identity
from cluster.stream_fsm import ApplyOutcome, NewMessages
from cluster.streams import Stream
from store.api import StoredMsg, StreamState

__all__ = [
    "BATCH_BYTES_MAX",
    "LocalOrigin",
    "Origin",
    "OriginGone",
    "OriginRecreated",
    "OriginRetry",
    "OriginUnavailable",
    "StartAt",
]

BATCH_BYTES_MAX = 1 << 20
"""Bytes of message data in one batch read from a local origin (at least one message)."""


class OriginGone(Exception):
    """The origin went away (deleted); the feed looks for it again."""


class OriginRetry(Exception):
    """The origin's consumer lost something or went silent: start again
    from the next needed sequence."""


class OriginRecreated(Exception):
    """The origin is not the stream the position belongs to (deleted and
    created again): start over from its beginning."""


class OriginUnavailable(Exception):
    """The origin could not be reached or refused to serve.

    Attributes:
        error: the API error it answered (``code``, ``err_code``,
            ``description``; shown in StreamInfo), or None when nothing
            answered.
    """

    def __init__(self, error: dict[str, Any] | None) -> None:
        super().__init__(error["description"] if error else "no answer")
        self.error = error


@dataclass(frozen=True, slots=True)
class StartAt:
    """Where to start reading an origin (a consumer's deliver policy).

    ``seq`` (> 0) is an explicit start sequence, not clamped to the origin's
    end; else ``time_ns`` (> 0) starts at the first message at or after it;
    else everything.
    """

    seq: int = 0
    time_ns: int = 0


class Origin(Protocol):
    """An origin stream as a feed reads it: ``LocalOrigin`` (this server's
    store) or ``cluster.api_origin.ApiOrigin`` (a consumer in another domain).

    ``identity`` is the origin's (known after ``start`` at the latest);
    ``last_contact_ns`` the wall clock of the last sign of life from a remote
    origin (0 for a local one).
    """

    identity: str
    last_contact_ns: int

    async def start(self, at: StartAt) -> int:
        """Position reading; returns the sequence *before* the first to be
        delivered (a consumer's ``delivered.stream_seq``).

        Raises:
            OriginGone, OriginUnavailable, OriginRecreated.
        """
        ...

    async def read(self, after: int, max_msgs: int) -> list[StoredMsg]:
        """The next messages after origin sequence ``after`` (at least one;
        waits for them).

        Raises:
            OriginGone, OriginRetry.
        """
        ...

    def lag(self, after: int) -> int:
        """Messages known to remain after ``after``."""
        ...

    def close(self) -> None:
        """Stop listening."""
        ...


class LocalOrigin:
    """An origin stream on this server, read from its store.

    Args:
        streams: the node's streams by name (to notice deletion).
        stream: the origin.
        filters: subject filters of the source (``">"`` for all).
    """

    def __init__(self, streams: Mapping[str, Stream], stream: Stream, filters: list[str]) -> None:
        self._streams = streams
        self._stream = stream
        self._filters = filters
        self.identity = stream_identity(stream.created_ns)
        self.last_contact_ns = 0
        self._wake = trio.Event()
        self._gone = trio.Event()
        self._remaining = 0
        stream.listeners.append(self._on_outcome)

    def _on_outcome(self, outcome: ApplyOutcome) -> None:
        if any(isinstance(e, NewMessages) for e in outcome.effects):
            self._wake.set()

    def gone(self) -> None:
        """The origin was deleted (or replaced): wake the reader."""
        self._gone.set()
        self._wake.set()

    def _alive(self) -> bool:
        return not self._gone.is_set() and self._streams.get(self._stream.cfg.name) is self._stream

    async def start(self, at: StartAt) -> int:
        """See ``Origin.start`` (nats-server ``selectStartingSeqNo``)."""
        if not self._alive():
            raise OriginGone(self._stream.cfg.name)
        st = self._stream.store.state()
        if at.seq:
            s = at.seq
        elif at.time_ns:
            s = self._seq_from_time(st, at.time_ns)
        else:
            s = st.first_seq
        if st.first_seq == 0 and not at.seq:
            s = 1
        elif s > st.last_seq and not at.seq:
            s = st.last_seq + 1
        elif s < st.first_seq:
            s = st.first_seq
        return s - 1

    def _seq_from_time(self, st: StreamState, t_ns: int) -> int:
        """First live sequence with a timestamp at or after ``t_ns``."""
        store = self._stream.store
        lo, hi = st.first_seq, st.last_seq + 1
        while lo < hi:
            mid = (lo + hi) // 2
            m = store.load_next(">", mid)
            if m is None or m.ts_ns >= t_ns:
                hi = mid
            else:
                lo = m.seq + 1
        return lo

    async def read(self, after: int, max_msgs: int) -> list[StoredMsg]:
        """See ``Origin.read``."""
        store = self._stream.store
        while True:
            if not self._alive():
                raise OriginGone(self._stream.cfg.name)
            self._wake = trio.Event()
            out: list[StoredMsg] = []
            size = 0
            pos = after
            while len(out) < max_msgs and size < BATCH_BYTES_MAX:
                m = store.load_next(self._filters, pos + 1)
                if m is None:
                    break
                out.append(m)
                size += len(m.headers) + len(m.payload)
                pos = m.seq
            if out:
                full = len(out) >= max_msgs or size >= BATCH_BYTES_MAX
                st = store.state()
                self._remaining = min(st.msgs, st.last_seq - pos) if full else 0
                return out
            self._remaining = 0
            await self._wake.wait()

    def lag(self, after: int) -> int:
        """An upper bound of what remained after the last batch read (0 when
        the batch reached the end)."""
        return self._remaining

    def close(self) -> None:
        """See ``Origin.close``."""
        try:
            self._stream.listeners.remove(self._on_outcome)
        except ValueError:
            pass
