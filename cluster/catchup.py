"""Catch-up by streaming a peer's store: bounded batches over the peer links.

Theory of operation
-------------------
A stream group's snapshots hold no messages (``cluster.replica_state``), so
a replica that installs one while its store holds less (a follower behind
the leader's compacted journal, a brand-new empty replica, a restart whose
store was lost) fetches the missing messages from a peer's store: from the
leader if one is known, else from any other member.

The exchange rides the node's ``PeerLinks`` under its own id (the group's
name + ``CATCHUP_SUFFIX``), one request and one answer per batch:

    request  [0, rid, from_seq, to_seq, msgs_max, bytes_max]
    answer   [1, rid, status, [[seq, subject, headers, payload, ts], ...], next_seq]

``status`` is ``OK``, ``BUSY`` (one batch is served per group at a time: the
memory a catch-up costs is one batch per side) or ``REFUSED`` (the peer has
a hole of its own).  ``next_seq`` is where the next request starts;
``next_seq > to_seq`` ends the range.  A batch holds at least one message
and stops at ``msgs_max`` messages or once ``bytes_max`` bytes are reached,
so a 1 GB stream crosses in as many batches, never whole.  The source reads
its store in a worker thread when the store is on disk (as a consumer's
start selection does); the fetcher stores each batch in the owner's thread,
between the group's applies (which are held while the hole lasts).  A lost
frame is a request that times out and is sent again: every request is
idempotent (a range).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field

import cbor2
import trio

from raft.links import PeerLinks
from store.api import StoredMsg, StreamStore

log = logging.getLogger(__name__)

__all__ = [
    "BATCH_BYTES_MAX",
    "BATCH_MSGS_MAX",
    "CATCHUP_SUFFIX",
    "CatchupLink",
    "CatchupUnavailable",
    "read_batch",
]

CATCHUP_SUFFIX = "#catchup"
#: one batch: at most this many messages ...
BATCH_MSGS_MAX = 2048
#: ... and about this many bytes (at least one message, whatever its size)
BATCH_BYTES_MAX = 1024 * 1024
#: an unanswered request is sent again after this long
REQUEST_TIMEOUT_S = 2.0
#: messages read from the store at a time while a batch is made (fewer when
#: they are large: a run never holds much more than the batch's bytes)
READ_RUN_MSGS = 256

OK, BUSY, REFUSED = 0, 1, 2
_REQ, _ANS = 0, 1
#: bytes a message costs in a batch besides its subject, headers and payload
MSG_OVERHEAD_BYTES = 32


class CatchupUnavailable(Exception):
    """The peer did not answer in time, is busy, or refused (a hole of its own)."""


def read_batch(
    store: StreamStore, start: int, end: int, msgs_max: int, bytes_max: int
) -> tuple[list[StoredMsg], int]:
    """The live messages of ``[start, end]`` from ``start`` on, bounded; and
    where the next batch starts (``end + 1``: the range is done)."""
    out: list[StoredMsg] = []
    size = 0
    seq = start
    run_n = 8
    while len(out) < msgs_max:
        run = store.load_run(seq, min(run_n, msgs_max - len(out)))
        if not run:
            return out, end + 1
        for m in run:
            if m.seq > end:
                return out, end + 1
            n = len(m.subject) + len(m.headers) + len(m.payload) + MSG_OVERHEAD_BYTES
            if out and size + n > bytes_max:
                return out, m.seq
            out.append(m)
            size += n
            seq = m.seq + 1
            if size >= bytes_max or len(out) >= msgs_max:
                return out, seq
        # grow the run while the messages are small against what is left
        left = bytes_max - size
        avg = max(1, size // len(out))
        run_n = max(1, min(READ_RUN_MSGS, left // avg))
    return out, seq


def _encode_msgs(msgs: list[StoredMsg]) -> list[list[object]]:
    return [[m.seq, m.subject, m.headers, m.payload, m.ts_ns] for m in msgs]


def _decode_msgs(items: object) -> list[StoredMsg]:
    if type(items) is not list:
        raise ValueError("messages must be an array")
    out = []
    prev = 0
    try:
        for seq, subj, hdr, payload, ts in items:
            if seq <= prev or not subj:
                raise ValueError("sequences must ascend, subjects be non-empty")
            out.append(StoredMsg(seq, subj, hdr, payload, ts))
            prev = seq
    except TypeError as e:
        raise ValueError(f"a message must be [seq, subject, headers, payload, ts]: {e}") from e
    if not all(
        type(m.seq) is int
        and type(m.subject) is str
        and type(m.headers) is bytes
        and type(m.payload) is bytes
        and type(m.ts_ns) is int
        for m in out
    ):
        raise ValueError("bad message fields")
    return out


@dataclass
class CatchupStats:
    """What this replica fetched and served (``/jsz``-style detail, tests)."""

    catchups: int = 0
    fetched_msgs: int = 0
    fetched_bytes: int = 0
    batches: int = 0
    served_batches: int = 0
    served_msgs: int = 0
    retries: int = 0
    last_s: float = 0.0
    sources: dict[str, int] = field(default_factory=dict)


class CatchupLink:
    """One replica's side of catch-up: serves its store, fetches from peers.

    Args:
        group_id: the stream's group name.
        links: the node's peer links.
        store: the replica's store.
        read_in_thread: read batches in a worker thread (stores on disk).
        can_serve: False while this replica's own store has a hole.
        rng: seeds request ids.
    """

    def __init__(
        self,
        group_id: str,
        links: PeerLinks,
        store: StreamStore,
        *,
        read_in_thread: bool,
        can_serve: Callable[[], bool],
        rng: random.Random,
    ) -> None:
        self.link_id = group_id + CATCHUP_SUFFIX
        self.links = links
        self.store = store
        self.read_in_thread = read_in_thread
        self.can_serve = can_serve
        self._rng = rng
        self._nursery: trio.Nursery | None = None
        self._serving = False
        self._waiting: dict[int, tuple[trio.Event, list[object]]] = {}
        self.stats = CatchupStats()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve requests until cancelled.

        Cancellation: a batch being read is dropped (the fetcher asks again).
        """
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self.links.register(self.link_id, self._on_frame)
            try:
                task_status.started()
                await trio.sleep_forever()
            finally:
                self.links.unregister(self.link_id)
                self._nursery = None

    # -- frames

    def _on_frame(self, peer: str, payload: bytes) -> None:
        try:
            doc = cbor2.loads(payload)
            kind = doc[0]
        except Exception:
            log.warning("event=catchup_bad_frame link=%s peer=%s", self.link_id, peer)
            return
        if kind == _REQ and type(doc) is list and len(doc) == 6:
            self._on_request(peer, doc)
        elif kind == _ANS and type(doc) is list and len(doc) == 5:
            w = self._waiting.pop(doc[1], None) if type(doc[1]) is int else None
            if w is not None:
                w[1].append(doc)
                w[0].set()

    def _answer(self, peer: str, rid: int, status: int, msgs: list[StoredMsg], nxt: int) -> None:
        body = cbor2.dumps([_ANS, rid, status, _encode_msgs(msgs), nxt])
        self.links.send(peer, self.link_id, body)

    def _on_request(self, peer: str, doc: list[object]) -> None:
        _, rid, start, end, n_max, b_max = doc
        if not all(type(v) is int for v in (rid, start, end, n_max, b_max)):
            return
        assert isinstance(rid, int) and isinstance(start, int) and isinstance(end, int)
        assert isinstance(n_max, int) and isinstance(b_max, int)
        if not self.can_serve():
            self._answer(peer, rid, REFUSED, [], start)
            return
        if self._serving or self._nursery is None:
            self._answer(peer, rid, BUSY, [], start)
            return
        self._serving = True
        n_max = max(1, min(n_max, BATCH_MSGS_MAX))
        b_max = max(1, min(b_max, BATCH_BYTES_MAX))
        self._nursery.start_soon(self._serve, peer, rid, start, end, n_max, b_max)

    async def _serve(self, peer: str, rid: int, start: int, end: int, n: int, b: int) -> None:
        try:
            if self.read_in_thread:
                msgs, nxt = await trio.to_thread.run_sync(read_batch, self.store, start, end, n, b)
            else:
                msgs, nxt = read_batch(self.store, start, end, n, b)
            self._answer(peer, rid, OK, msgs, nxt)
            self.stats.served_batches += 1
            self.stats.served_msgs += len(msgs)
        except Exception:
            log.exception(
                "event=catchup_serve_failed link=%s peer=%s from=%d", self.link_id, peer, start
            )
            self._answer(peer, rid, REFUSED, [], start)
        finally:
            self._serving = False

    # -- fetching

    async def fetch(
        self,
        peer: str,
        start: int,
        end: int,
        *,
        msgs_max: int = BATCH_MSGS_MAX,
        bytes_max: int = BATCH_BYTES_MAX,
        timeout_s: float = REQUEST_TIMEOUT_S,
    ) -> tuple[list[StoredMsg], int]:
        """One batch of ``[start, end]`` from ``peer``: its messages and where
        the next batch starts.

        Raises:
            CatchupUnavailable: no answer within ``timeout_s``, busy or refused.
            ValueError: a malformed answer.

        Cancellation: the request is forgotten (a late answer is dropped).
        """
        rid = self._rng.getrandbits(62)
        ev = trio.Event()
        box: list[object] = []
        self._waiting[rid] = (ev, box)
        try:
            body = cbor2.dumps([_REQ, rid, start, end, msgs_max, bytes_max])
            self.links.send(peer, self.link_id, body)
            with trio.move_on_after(timeout_s):
                await ev.wait()
        finally:
            self._waiting.pop(rid, None)
        if not box:
            raise CatchupUnavailable(f"{peer}: no answer in {timeout_s} s")
        doc = box[0]
        assert isinstance(doc, list)
        _, _, status, items, nxt = doc
        if status != OK:
            raise CatchupUnavailable(f"{peer}: {'busy' if status == BUSY else 'refused'}")
        msgs = _decode_msgs(items)
        if type(nxt) is not int or nxt <= start or (msgs and msgs[0].seq < start):
            raise ValueError("bad catch-up answer range")
        return msgs, nxt
