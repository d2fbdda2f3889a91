"""A replicated stream's state snapshot: everything but the messages.

Theory of operation
-------------------
A stream group compacts its Raft journal by snapshots that hold the stream's
*state*, never its messages (the store keeps those, durably, on every
replica): the Raft index it describes, the store's shape (first and last
sequence, last timestamp, message and byte counts, the interior deletes as
ranges), the stream state machine's own state (policy, dedupe window, last
msg id, interest filters: ``StreamStateMachine.replica_state``) and the whole
consumer table (``ConsumerTable.snapshot_doc``).  One cbor document,
``SNAPSHOT_VERSION``ed; ``decode_replica_state`` checks it completely.

A replica that installs such a snapshot but whose store holds less than its
shape has a *hole*: ``reconcile`` brings what the store already holds in line
with the shape (cuts below ``first_seq`` and above ``last_seq``, removes the
interior deletes), and says from which sequence messages must be fetched;
``install_batch`` stores fetched messages with their own sequences (gaps are
skipped); ``finish`` moves ``last_seq`` to the shape's.  What decides is the
shape; a message the source no longer holds (deleted after the snapshot) is
skipped: the entries after the snapshot delete it on every replica anyway.

Pure and synchronous: the owner calls these between two applies.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import cbor2

from store.api import StoredMsg, StreamStore
from store.errors import MsgNotFound, StoreEOF, StoreError

log = logging.getLogger(__name__)

__all__ = [
    "ReplicaState",
    "ReplicaStateError",
    "StoreShape",
    "decode_replica_state",
    "encode_replica_state",
    "finish",
    "install_batch",
    "live_in",
    "reconcile",
    "shape_of",
]

SNAPSHOT_VERSION = 1


class ReplicaStateError(ValueError):
    """A replica state document is malformed."""


@dataclass(frozen=True)
class StoreShape:
    """What a store holds, without the messages.

    Attributes:
        first_seq, last_seq, last_ts: as ``StreamState``.
        msgs, bytes: live messages and their bytes.
        deleted: the interior deletes as inclusive ``(first, last)`` ranges,
            ascending, inside ``[first_seq, last_seq]``.
    """

    first_seq: int = 1
    last_seq: int = 0
    last_ts: int = 0
    msgs: int = 0
    bytes: int = 0
    deleted: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class ReplicaState:
    """A stream group's state snapshot.

    Attributes:
        index: the Raft index it is the state after.
        shape: the store's shape at that index.
        stream: ``StreamStateMachine.replica_state()``.
        consumers: ``ConsumerTable.snapshot_doc()``.
    """

    index: int
    shape: StoreShape
    stream: dict[str, Any]
    consumers: list[Any]


def ranges(seqs: Iterable[int]) -> tuple[tuple[int, int], ...]:
    """Ascending sequences as inclusive ranges."""
    out: list[tuple[int, int]] = []
    for s in seqs:
        if out and s == out[-1][1] + 1:
            out[-1] = (out[-1][0], s)
        else:
            out.append((s, s))
    return tuple(out)


def shape_of(store: StreamStore) -> StoreShape:
    """The store's shape now."""
    st = store.state(deleted_details=True)
    return StoreShape(
        st.first_seq,
        st.last_seq,
        st.last_ts,
        st.msgs,
        st.bytes,
        ranges(sorted(st.deleted or ())),
    )


def encode_replica_state(rs: ReplicaState) -> bytes:
    sh = rs.shape
    return cbor2.dumps(
        {
            "v": SNAPSHOT_VERSION,
            "index": rs.index,
            "shape": [
                sh.first_seq,
                sh.last_seq,
                sh.last_ts,
                sh.msgs,
                sh.bytes,
                [list(r) for r in sh.deleted],
            ],
            "stream": rs.stream,
            "consumers": rs.consumers,
        }
    )


def _int(v: object, what: str) -> int:
    if type(v) is not int or v < 0:
        raise ReplicaStateError(f"{what} must be a non-negative integer")
    return v


def decode_replica_state(data: bytes) -> ReplicaState:
    """Parse a document of ``encode_replica_state``.

    Raises:
        ReplicaStateError: malformed (the parts of the stream and the
            consumers are checked by their installers).
    """
    try:
        doc: Any = cbor2.loads(data)
    except Exception as e:  # cbor2 raises many types; all mean "malformed"
        raise ReplicaStateError(f"not a cbor document: {e}") from e
    keys = {"v", "index", "shape", "stream", "consumers"}
    if type(doc) is not dict or set(doc) != keys:
        raise ReplicaStateError("replica state must be a map with " + ", ".join(sorted(keys)))
    if doc["v"] != SNAPSHOT_VERSION:
        raise ReplicaStateError(f"unknown replica state version {doc['v']!r}")
    sh = doc["shape"]
    if type(sh) is not list or len(sh) != 6 or type(sh[5]) is not list:
        raise ReplicaStateError("shape must be [first, last, last_ts, msgs, bytes, deleted]")
    first, last, last_ts, msgs, nbytes = (_int(v, "shape field") for v in sh[:5])
    deleted: list[tuple[int, int]] = []
    prev = first - 1
    for r in sh[5]:
        if type(r) is not list or len(r) != 2:
            raise ReplicaStateError("a deleted range must be [first, last]")
        a, b = _int(r[0], "range"), _int(r[1], "range")
        if not prev < a <= b <= last:
            raise ReplicaStateError("deleted ranges must ascend inside the stream")
        deleted.append((a, b))
        prev = b
    if type(doc["consumers"]) is not list:
        raise ReplicaStateError("consumers must be an array")
    shape = StoreShape(first, last, last_ts, msgs, nbytes, tuple(deleted))
    return ReplicaState(_int(doc["index"], "index"), shape, doc["stream"], doc["consumers"])


def live_in(shape: StoreShape, lo: int, hi: int) -> int:
    """How many live messages the shape has in ``[lo, hi]``."""
    lo = max(lo, shape.first_seq)
    hi = min(hi, shape.last_seq)
    if hi < lo:
        return 0
    n = hi - lo + 1
    for a, b in shape.deleted:
        a, b = max(a, lo), min(b, hi)
        if a <= b:
            n -= b - a + 1
    return n


def reconcile(store: StreamStore, shape: StoreShape) -> int:
    """Bring what ``store`` holds in line with ``shape``; the first sequence
    still to fetch (``shape.last_seq + 1``: nothing).

    Cuts above ``last_seq``, compacts below ``first_seq``, removes the
    shape's interior deletes the store still holds.  A store whose count then
    differs from the shape's over the range it holds (it lost a message it
    should have) is cut back to ``first_seq - 1``: everything is fetched again.
    """
    st = store.state()
    if st.last_seq > shape.last_seq:
        store.truncate(shape.last_seq)
    if store.state().first_seq < shape.first_seq:
        store.compact(shape.first_seq)
    st = store.state()
    held = st.last_seq
    if st.msgs:
        for a, b in shape.deleted:
            if a > held:
                break
            for seq in range(max(a, st.first_seq), min(b, held) + 1):
                try:
                    store.remove(seq, erase=False)
                except (MsgNotFound, StoreEOF):
                    continue
    if store.state().msgs != live_in(shape, shape.first_seq, held):
        log.warning(
            "event=catchup_refetch reason=count_mismatch held=%d have=%d want=%d",
            held,
            store.state().msgs,
            live_in(shape, shape.first_seq, held),
        )
        store.truncate(max(shape.first_seq - 1, 0))
        if store.state().first_seq < shape.first_seq:
            store.compact(shape.first_seq)
        held = store.state().last_seq
    return held + 1


def install_batch(store: StreamStore, msgs: Sequence[StoredMsg], upto: int) -> int:
    """Store fetched messages (ascending, above the store's ``last_seq``, at
    most ``upto``) with their sequences; the number stored."""
    n = 0
    last = store.state().last_seq
    append, skip = store.append, store.skip
    for m in msgs:
        seq = m.seq
        if seq > upto:
            break
        if seq <= last:
            continue
        if seq > last + 1:
            skip(seq - 1)
        try:
            append(m.subject, m.headers, m.payload, m.ts_ns, seq=seq)
        except StoreError as e:  # refused by limits: the replica would diverge; say so
            log.error("event=catchup_store_refused seq=%d error=%r", seq, e)
            skip(seq)
        last = seq
        n += 1
    return n


def finish(store: StreamStore, shape: StoreShape) -> None:
    """Move the store's ``last_seq`` to the shape's once every message is in."""
    if store.state().last_seq < shape.last_seq:
        store.skip(shape.last_seq)
