"""The state snapshot of a replicated stream's group: its state, never its messages.

Theory of operation
-------------------
A stream group compacts its Raft journal by a snapshot of the *state* the
applied entries made, not of the data: the store already holds the messages
durably, and a replica that lacks some fetches them from the leader's store
(``cluster.catchup``).  So the journal is never a second copy of the stream.

``GroupSnapshot`` holds, as of Raft index ``index``:

* the store's bounds and counts (``first_seq``, ``last_seq``, ``last_ts``,
  ``msgs``, ``bytes``) and its interior deletes as inclusive ranges
  (``deleted``): a replica whose store holds a message the stream had
  removed by then removes it when it installs the snapshot;
* the stream state machine's dedupe window, last message id and interest
  retention's filters (decided in log order: publishes after the snapshot
  are stored or skipped by them);
* every consumer of the table: name, config (as ``ConsumerAssign`` carries
  it), creation time, group name and its state machine's own snapshot
  (delivered, ack floor, pending with delivery times, redelivery counts …).

Since the store was synced before the snapshot was taken,
``(index, last_seq, msgs)`` is also a valid applied mark
(``cluster.replicated``): a restart after compaction cuts the store back to
it, never to an older mark whose entries are gone from the journal.

Encoding: cbor2, a map with a version; ``decode`` checks everything before
anything is used and raises ``StreamSnapshotError``.  Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import cbor2

from cluster.stream_fsm import StreamSnapshotError

__all__ = [
    "GROUP_SNAPSHOT_VERSION",
    "ConsumerSnap",
    "GroupSnapshot",
    "decode_group_snapshot",
    "encode_group_snapshot",
    "ranges",
]

GROUP_SNAPSHOT_VERSION = 1


@dataclass(frozen=True)
class ConsumerSnap:
    """One consumer of the table at the snapshot."""

    name: str
    config: bytes
    created_ns: int
    group: str
    state: bytes


@dataclass(frozen=True)
class GroupSnapshot:
    """A stream group's state at Raft index ``index`` (see the module doc)."""

    index: int
    first_seq: int
    last_seq: int
    last_ts: int
    msgs: int
    bytes: int
    deleted: tuple[tuple[int, int], ...]
    last_msg_id: str
    dedupe: tuple[tuple[str, int, int], ...]
    consumers: tuple[ConsumerSnap, ...]
    interest: tuple[str, ...] | None = None


def ranges(seqs: Iterable[int]) -> tuple[tuple[int, int], ...]:
    """Ascending sequences as inclusive ``(first, last)`` runs."""
    out: list[tuple[int, int]] = []
    for s in sorted(seqs):
        if out and s == out[-1][1] + 1:
            out[-1] = (out[-1][0], s)
        elif not out or s > out[-1][1]:
            out.append((s, s))
    return tuple(out)


def _b(s: str) -> bytes:
    return s.encode("utf-8", "surrogateescape")


def encode_group_snapshot(s: GroupSnapshot) -> bytes:
    """``s`` as cbor2 bytes."""
    return cbor2.dumps(
        {
            "v": GROUP_SNAPSHOT_VERSION,
            "index": s.index,
            "state": [s.first_seq, s.last_seq, s.last_ts, s.msgs, s.bytes],
            "deleted": [list(r) for r in s.deleted],
            "last_msg_id": _b(s.last_msg_id),
            "dedupe": [[_b(k), seq, ts] for k, seq, ts in s.dedupe],
            "consumers": [[c.name, c.config, c.created_ns, c.group, c.state] for c in s.consumers],
            "interest": None if s.interest is None else list(s.interest),
        }
    )


def _int(v: object, what: str, lo: int = 0) -> int:
    if type(v) is not int or v < lo:
        raise StreamSnapshotError(f"bad {what}: {v!r}")
    return v


def _str(v: object, what: str) -> str:
    if type(v) is bytes:
        return v.decode("utf-8", "surrogateescape")
    if type(v) is str:
        return v
    raise StreamSnapshotError(f"bad {what}")


def decode_group_snapshot(data: bytes) -> GroupSnapshot:
    """Inverse of ``encode_group_snapshot``.

    Raises:
        StreamSnapshotError: malformed, or a version this code does not know.
    """
    try:
        doc = cbor2.loads(data)
    except Exception as e:  # cbor2 raises many types; all mean "malformed"
        raise StreamSnapshotError(f"not a cbor document: {e}") from e
    keys = {"v", "index", "state", "deleted", "last_msg_id", "dedupe", "consumers", "interest"}
    if type(doc) is not dict or set(doc) != keys:
        raise StreamSnapshotError("group snapshot must be a map with keys " + ", ".join(keys))
    if doc["v"] != GROUP_SNAPSHOT_VERSION:
        raise StreamSnapshotError(f"unknown group snapshot version {doc['v']!r}")
    st = doc["state"]
    if type(st) is not list or len(st) != 5:
        raise StreamSnapshotError("state must be [first, last, last_ts, msgs, bytes]")
    first, last, last_ts, msgs, nbytes = (_int(v, "state") for v in st)
    if first > last + 1:
        raise StreamSnapshotError(f"first_seq {first} past last_seq {last} + 1")
    deleted: list[tuple[int, int]] = []
    for r in _list(doc["deleted"], "deleted"):
        if type(r) is not list or len(r) != 2:
            raise StreamSnapshotError("a deleted range is [first, last]")
        a, b = _int(r[0], "range", 1), _int(r[1], "range", 1)
        if b < a or b > last or (deleted and a <= deleted[-1][1]):
            raise StreamSnapshotError(f"bad deleted range {a}..{b}")
        deleted.append((a, b))
    dedupe: list[tuple[str, int, int]] = []
    for item in _list(doc["dedupe"], "dedupe"):
        if type(item) is not list or len(item) != 3:
            raise StreamSnapshotError("dedupe entry must be [id, seq, ts]")
        dedupe.append((_str(item[0], "msg id"), _int(item[1], "seq", 1), _int(item[2], "ts")))
    consumers: list[ConsumerSnap] = []
    for c in _list(doc["consumers"], "consumers"):
        if type(c) is not list or len(c) != 5:
            raise StreamSnapshotError("consumer must be [name, config, created, group, state]")
        name, cfg, created, group, state = c
        if type(name) is not str or type(cfg) is not bytes or type(group) is not str:
            raise StreamSnapshotError("bad consumer fields")
        if type(state) is not bytes:
            raise StreamSnapshotError("bad consumer state")
        consumers.append(ConsumerSnap(name, cfg, _int(created, "created"), group, state))
    interest = doc["interest"]
    if interest is not None and not (
        type(interest) is list and all(type(f) is str for f in interest)
    ):
        raise StreamSnapshotError("interest must be null or an array of filters")
    return GroupSnapshot(
        interest=None if interest is None else tuple(interest),
        index=_int(doc["index"], "index"),
        first_seq=first,
        last_seq=last,
        last_ts=last_ts,
        msgs=msgs,
        bytes=nbytes,
        deleted=tuple(deleted),
        last_msg_id=_str(doc["last_msg_id"], "last msg id"),
        dedupe=tuple(dedupe),
        consumers=tuple(consumers),
    )


def _list(v: object, what: str) -> list[object]:
    if type(v) is not list:
        raise StreamSnapshotError(f"{what} must be an array")
    return v
