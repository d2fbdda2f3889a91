"""Interfaces and value types of the store room.

Theory of operation
-------------------
A stream store is an ordered log of messages addressed by a 64-bit sequence
number.  Sequences are assigned by the owner's deterministic apply (DESIGN.md
rule 2) and are strictly increasing; the store never reorders or renumbers.
The visible state is derived from three facts only:

* ``last_seq`` / ``last_ts``: the highest sequence ever stored (or set by
  ``truncate``/``compact``/``purge``) and its timestamp,
* the set of *live* messages, all with ``seq <= last_seq``,
* nothing else: ``first_seq`` is the smallest live sequence, or
  ``last_seq + 1`` when the store is empty (nats-server's convention after a
  purge); ``num_deleted`` counts the gaps in ``[first_seq, last_seq]``.

Limits (``StreamLimits``, see ``store.limits``) are enforced inside ``append``
and ``update_limits`` exactly as nats-server does, so every replica applying
the same operations reaches the same state.  ``max_age`` and per-message TTLs
(``Nats-TTL``, ``store.ttl``) are the only limits that depend on time; the
owner asks ``next_expiry_ns()`` and calls ``expire(now_ns)`` with its own
clock (rule 7).

Durability contract: ``append`` and every mutation are *buffered*.  They are
durable only once ``sync()`` has returned.  Under ``SyncPolicy.ALWAYS`` the
owner calls ``sync()`` once per batch before it acknowledges (group commit);
under ``SyncPolicy.INTERVAL`` it calls ``sync()`` on a timer and accepts that
an acknowledged message may be lost in a crash, as nats-server's
``sync_interval`` does.  Stores are synchronous and single-writer: one owner
calls them, through ``trio.to_thread`` where they block.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import BinaryIO, NamedTuple, Protocol, runtime_checkable

from store.errors import (
    CorruptionError,
    InvariantViolation,
    LimitExceeded,
    MaxBytes,
    MaxMsgs,
    MaxMsgSize,
    MaxMsgsPerSubject,
    MsgNotFound,
    SequenceMismatch,
    SnapshotError,
    StoreClosed,
    StoreEOF,
    StoreError,
)
from store.limits import StreamLimits

__all__ = [
    "ConsumerState",
    "ConsumerStore",
    "CorruptionError",
    "DamagedRange",
    "InvariantViolation",
    "LimitExceeded",
    "MaxBytes",
    "MaxMsgSize",
    "MaxMsgs",
    "MaxMsgsPerSubject",
    "MsgNotFound",
    "Pending",
    "RawRun",
    "RecoveryReport",
    "SequenceMismatch",
    "SnapshotError",
    "StoreClosed",
    "StoreEOF",
    "StoreError",
    "StoredMsg",
    "StreamLimits",
    "StreamState",
    "StreamStore",
    "SubjectState",
    "SyncPolicy",
]


# --------------------------------------------------------------------------- values


class StoredMsg(NamedTuple):
    """One stored message (immutable; a NamedTuple because it is built once
    per message read, and a frozen dataclass costs five ``object.__setattr__``
    calls per instance: ~20% of a file store ``load``).

    Attributes:
        seq: Stream sequence (>= 1).
        subject: Literal subject the message was published to.
        headers: Raw NATS header block (``NATS/1.0\\r\\n...\\r\\n\\r\\n``) or ``b""``.
        payload: Message body.
        ts_ns: Timestamp taken by the proposer, nanoseconds since the epoch.
    """

    seq: int
    subject: str
    headers: bytes
    payload: bytes
    ts_ns: int


class RawRun:
    """Consecutive live messages as a delivery's frames want them, with no
    object per message: parallel lists of their sequences, subjects (the
    stored bytes, not decoded), timestamps, header block lengths and
    bodies (the header block and the payload as they lie in the record).
    Read by ``StreamStore.load_raw_run`` with every check ``load_run`` makes.
    """

    __slots__ = ("bodies", "hlens", "seqs", "subjects", "ts")

    def __init__(self) -> None:
        self.seqs: list[int] = []
        self.subjects: list[bytes] = []
        self.ts: list[int] = []
        self.hlens: list[int] = []
        self.bodies: list[bytes] = []

    def __len__(self) -> int:
        return len(self.seqs)

    @classmethod
    def of(cls, msgs: Sequence[StoredMsg]) -> RawRun:
        """The run of ``msgs`` (a store without a raw reader of its own)."""
        rr = cls()
        for m in msgs:
            rr.seqs.append(m.seq)
            rr.subjects.append(m.subject.encode())
            rr.ts.append(m.ts_ns)
            rr.hlens.append(len(m.headers))
            rr.bodies.append(m.headers + m.payload)
        return rr

    def stored(self) -> list[StoredMsg]:
        """The messages as ``load_run`` gives them."""
        return [
            StoredMsg(q, s.decode(), b[:h], b[h:], t)
            for q, s, t, h, b in zip(
                self.seqs, self.subjects, self.ts, self.hlens, self.bodies, strict=True
            )
        ]


@dataclass(frozen=True, slots=True)
class SubjectState:
    """Per-subject summary: live message count and first/last live sequence."""

    msgs: int
    first_seq: int
    last_seq: int


@dataclass(frozen=True, slots=True)
class StreamState:
    """What ``$JS.API.STREAM.INFO`` reports under ``state`` (minus consumer_count).

    Attributes:
        msgs: Live messages.
        bytes: Accounted bytes (see ``store.limits.msg_size``).
        first_seq: Smallest live sequence, or ``last_seq + 1`` when empty.
        first_ts: Timestamp of the first live message, 0 when empty.
        last_seq: Highest sequence stored (survives purges).
        last_ts: Timestamp of ``last_seq`` (survives purges).
        num_subjects: Subjects with at least one live message.
        num_deleted: Gaps in ``[first_seq, last_seq]``.
        deleted: The gap sequences, only when asked for (``deleted_details``).
        subjects: subject -> count, only when asked for (``subjects_filter``).
    """

    msgs: int = 0
    bytes: int = 0
    first_seq: int = 0
    first_ts: int = 0
    last_seq: int = 0
    last_ts: int = 0
    num_subjects: int = 0
    num_deleted: int = 0
    deleted: tuple[int, ...] | None = None
    subjects: dict[str, int] | None = None


class SyncPolicy(enum.Enum):
    """How the owner drives ``sync()``; the store only reports it.

    ``ALWAYS``: the owner calls ``sync()`` before acknowledging each batch.
    ``INTERVAL``: the owner calls ``sync()`` every ``sync_interval_s`` seconds.
    """

    ALWAYS = "always"
    INTERVAL = "interval"


@dataclass(frozen=True, slots=True)
class DamagedRange:
    """A region of a file that failed verification during recovery.

    Attributes:
        file: File name (relative to the store directory).
        byte_start: First damaged byte (file offset).
        byte_end: One past the last damaged byte.
        first_seq: First sequence that may have been lost (0 if unknown/none).
        last_seq: Last sequence that may have been lost (0 if unknown/none).
        reason: Short machine-friendly reason (``"crc"``, ``"header"``, ...).
    """

    file: str
    byte_start: int
    byte_end: int
    first_seq: int
    last_seq: int
    reason: str


@dataclass(slots=True)
class RecoveryReport:
    """What opening a durable store found.

    Attributes:
        torn_tail_bytes: Bytes cut from the end of the active segment (a write
            that never completed; not a loss of synced data).
        damaged: Interior damage: regions that failed checksums while valid
            data followed, or any damage in a sealed segment.  Sequences in
            these ranges are never served; they count as deleted.
        lost_seqs: Number of sequences known lost in ``damaged``.
        index_rebuilt: Segments whose index checkpoint was missing or stale
            and were rebuilt by scanning.
    """

    torn_tail_bytes: int = 0
    damaged: list[DamagedRange] = field(default_factory=list)
    lost_seqs: int = 0
    index_rebuilt: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        """True if nothing but a torn tail was found."""
        return not self.damaged


# --------------------------------------------------------------------------- protocols


Filters = str | Sequence[str]
"""One subject filter or several (a message matches if any matches)."""


def append_each(
    append: Callable[[str, bytes, bytes, int], object],
    msgs: Sequence[tuple[str, bytes, bytes, int]],
) -> tuple[int, LimitExceeded | None]:
    """``StreamStore.append_batch`` as one ``append`` per message: how many were stored,
    and the refusal that stopped the run (None: all were)."""
    for i, (subject, headers, payload, ts_ns) in enumerate(msgs):
        try:
            append(subject, headers, payload, ts_ns)
        except LimitExceeded as e:
            return i, e
    return len(msgs), None


@runtime_checkable
class StreamStore(Protocol):
    """Durable (or in-memory) storage of one stream's messages.

    Properties ``sync_policy``, ``sync_interval_s``, ``limits`` and
    ``recovery_report`` describe the store; the methods below are the whole
    mutating and reading surface.
    """

    raw_runs: bool
    """``load_raw_run`` costs less than ``load_run`` (the store reads records
    into a ``RawRun`` natively): pull rounds are then read raw."""

    @property
    def sync_policy(self) -> SyncPolicy: ...

    @property
    def sync_interval_s(self) -> float: ...

    @property
    def limits(self) -> StreamLimits: ...

    @property
    def recovery_report(self) -> RecoveryReport: ...

    def append(
        self,
        subject: str,
        headers: bytes,
        payload: bytes,
        ts_ns: int,
        *,
        seq: int | None = None,
    ) -> tuple[int, int]:
        """Store one message at ``last_seq + 1`` and enforce limits.

        Args:
            subject: Literal subject (non-empty).
            headers: Raw header block or ``b""``.
            payload: Body.
            ts_ns: Proposer's timestamp (ns); the store never reads a clock.
            seq: If given, must equal ``last_seq + 1`` (replicated apply
                check).  Gaps (mirrors, ``first_seq``) are made with
                ``compact(seq)`` before appending.

        Returns:
            ``(seq, ts_ns)`` of the stored message.  Under ``discard: old`` the
            message may already have been removed again by the limits (as in
            nats-server when it alone exceeds ``max_bytes``).

        Raises:
            MaxMsgSize: headers + payload exceed ``max_msg_size``.
            MaxMsgs, MaxBytes, MaxMsgsPerSubject: ``discard: new`` rejections.
            SequenceMismatch: ``seq`` is not ``last_seq + 1``.
            StoreClosed: the store is closed.
        """
        ...

    def append_batch(
        self, msgs: Sequence[tuple[str, bytes, bytes, int]]
    ) -> tuple[int, LimitExceeded | None]:
        """Store ``(subject, headers, payload, ts_ns)`` messages at ``last_seq + 1``,
        ``+ 2`` … in order: the same state as one ``append`` per message.

        Stops at the first message ``append`` would refuse (a limit): returns
        how many were stored and that refusal (the store is as the appends
        before it left it), else ``(len(msgs), None)``.  A store writes an
        unlimited run in one pass (one write, one index update per run).

        Raises:
            StoreClosed, OSError: as ``append`` (the run may be partly stored).
        """
        ...

    def load(self, seq: int) -> StoredMsg:
        """Load the live message at ``seq``.

        Raises:
            StoreEOF: ``seq > last_seq``.
            MsgNotFound: no live message at ``seq`` (deleted, purged, lost).
            CorruptionError: the stored record fails its checksum.
            StoreClosed: the store is closed.
        """
        ...

    def load_run(self, start_seq: int, max_msgs: int) -> list[StoredMsg]:
        """The live messages with ``seq >= start_seq``, in order, at most
        ``max_msgs`` of them (fewer at the end of the stream; ``[]`` past it
        or if ``max_msgs <= 0``).  Equivalent to ``load_next(">", ...)`` in a
        loop, but meant to cost less per message (a consumer's forward read).

        Raises:
            CorruptionError: a stored record fails its checksum.
            StoreClosed: the store is closed.
        """
        ...

    def load_raw_run(self, start_seq: int, max_msgs: int) -> RawRun:
        """``load_run`` as a ``RawRun`` (a pull delivery's frames built from
        the records' bytes, no ``StoredMsg`` per message); same checks.

        Raises:
            CorruptionError: a stored record fails its checksum.
            StoreClosed: the store is closed.
        """
        ...

    def load_next_run(self, filters: Filters, start_seq: int, max_msgs: int) -> list[StoredMsg]:
        """The live messages with ``seq >= start_seq`` matching any filter, in
        order, at most ``max_msgs`` of them.  Equivalent to ``load_next`` in a
        loop, but one call: the filters are resolved once, each subject's next
        position is found from its own index (cost in the messages returned
        and skipped over, never in the stream's length), and a filter that
        matches every subject the stream holds reads like ``load_run``.

        Raises:
            CorruptionError: a stored record fails its checksum.
            StoreClosed: the store is closed.
        """
        ...

    def count_in_range(self, filters: Filters, lo: int, hi: int) -> int:
        """Live messages with ``lo <= seq <= hi`` matching any filter, counted
        from the index (no message is read).

        Raises:
            StoreClosed: the store is closed.
        """
        ...

    def load_next(self, filters: Filters, start_seq: int) -> StoredMsg | None:
        """First live message with ``seq >= start_seq`` matching any filter.

        Args:
            filters: One filter or several; ``""`` and ``">"`` match all.
                NATS wildcards ``*`` (one token) and ``>`` (tail) are allowed.
            start_seq: Where to start (inclusive).

        Returns:
            The message, or ``None`` if no such message exists.

        Raises:
            CorruptionError, StoreClosed.
        """
        ...

    def load_last(self, filters: Filters) -> StoredMsg:
        """Newest live message matching the filter(s) (literal or wildcard).

        Raises:
            MsgNotFound: nothing matches.
            CorruptionError, StoreClosed.
        """
        ...

    def remove(self, seq: int, *, erase: bool = False) -> None:
        """Delete one message (``$JS.API.STREAM.MSG.DELETE``).

        Args:
            seq: Sequence to delete.
            erase: Also overwrite the stored bytes (the default in NATS unless
                ``no_erase``); a plain remove only marks the message deleted.

        Raises:
            StoreEOF: ``seq > last_seq`` ("stream store EOF").
            MsgNotFound: not live ("no message found").
            StoreClosed.
        """
        ...

    def purge(
        self, *, filter: str | None = None, seq: int | None = None, keep: int | None = None
    ) -> int:
        """Purge messages like ``$JS.API.STREAM.PURGE``.

        Forms (as nats-server's ``PurgeEx``): nothing = all; ``filter`` = all
        matching; ``seq`` = everything *below* ``seq`` (with ``filter``: the
        matching ones below); ``keep`` = all but the newest ``keep`` (with
        ``filter``: of the matching ones).  ``seq`` and ``keep`` together are
        rejected by the API layer (10003), not here; if both are given the
        store does what nats-server's ``PurgeEx`` does: without a filter
        ``seq`` wins (a compact), with a filter both bounds apply.  A ``seq``
        beyond ``last_seq + 1`` moves the stream forward like ``compact``.

        Returns:
            Number of messages purged.

        Raises:
            StoreClosed.
        """
        ...

    def compact(self, seq: int) -> int:
        """Remove every message below ``seq``.

        If ``seq > last_seq + 1`` the store becomes empty with
        ``first_seq = seq`` and ``last_seq = seq - 1`` (so the next append
        gets ``seq``): this is how ``first_seq`` and mirror gaps are made.

        Returns:
            Number of messages removed.

        Raises:
            StoreClosed.
        """
        ...

    def skip(self, seq: int) -> None:
        """Advance ``last_seq`` to ``seq`` without storing a message.

        nats-server's ``SkipMsgs``: a mirror keeps its origin's sequence
        numbers, so sequences the origin no longer has (deleted, expired,
        filtered out) are skipped.  Live messages stay and the skipped
        sequences count as deleted (``num_deleted``, ``deleted``); an empty
        store simply moves on (``first_seq = seq + 1``).
        ``last_ts`` is unchanged.  ``seq <= last_seq`` is a no-op.  Durable
        after ``sync()`` like every mutation; a skip followed by an append
        costs nothing extra.

        Raises:
            StoreClosed.
        """
        ...

    def truncate(self, seq: int) -> None:
        """Drop every message above ``seq`` (Raft rollback).

        Afterwards ``last_seq == seq`` and ``last_ts`` is the timestamp of the
        newest live message ``<= seq`` (0 if none).  ``seq >= last_seq`` is a
        no-op.  Deletions at or below ``seq`` are kept.

        Raises:
            StoreClosed.
        """
        ...

    def stored_bytes(self) -> int:
        """``state().bytes`` without building the state (read after every
        applied op by the storage accounting).

        Raises:
            StoreClosed.
        """
        ...

    def state(
        self, *, deleted_details: bool = False, subjects_filter: str | None = None
    ) -> StreamState:
        """Current state.

        Args:
            deleted_details: Fill ``deleted`` with the gap sequences.
            subjects_filter: Fill ``subjects`` with counts of matching subjects.

        Raises:
            StoreClosed.
        """
        ...

    def subject_state(self, filter: str = ">") -> dict[str, SubjectState]:
        """Per-subject count and first/last live sequence for matching subjects.

        Raises:
            StoreClosed.
        """
        ...

    def msg_ids_since(self, ts_floor_ns: int) -> list[tuple[str, int, int]]:
        """``(Nats-Msg-Id, seq, ts_ns)`` of every live message carrying the
        header with a timestamp at or after ``ts_floor_ns``, in sequence order.

        What a state machine needs to rebuild its duplicate window after a
        restart.  Its cost follows the messages that carry an id inside the
        window, not the stream's length: the file store keeps the ids with each
        segment's index.

        Raises:
            StoreClosed.
        """
        ...

    def update_limits(self, limits: StreamLimits) -> int:
        """Replace the limits and enforce them at once (not ``max_age``).

        Returns:
            Number of messages removed by the new limits.

        Raises:
            StoreClosed.
        """
        ...

    def next_expiry_ns(self) -> int | None:
        """When the next live message expires (None if none ever will).

        The earlier of: the oldest message not marked ``Nats-TTL: never``
        reaching ``max_age``, and the earliest per-message TTL deadline
        (``store.ttl``; only with ``limits.msg_ttl``).

        Raises:
            StoreClosed.
        """
        ...

    def expiring(self, now_ns: int) -> list[int]:
        """The live sequences ``expire(now_ns)`` would remove, ascending.

        A read: nothing changes (the stream state machine uses it to place
        subject delete markers before removing).

        Raises:
            StoreClosed.
        """
        ...

    def expire(self, now_ns: int) -> int:
        """Remove the messages expired at ``now_ns``: those older than
        ``max_age`` (from the front, skipping ``Nats-TTL: never``) and those
        whose per-message TTL deadline is ``<= now_ns``.

        Returns:
            Number of messages removed.

        Raises:
            StoreClosed.
        """
        ...

    def snapshot(self, out: BinaryIO) -> None:
        """Write a portable, checksummed snapshot of all live messages and the
        sequence bounds to ``out`` (readable by any store's ``restore``).

        Raises:
            CorruptionError, StoreClosed.
        """
        ...

    def restore(self, src: BinaryIO) -> None:
        """Replace the whole contents with a snapshot read from ``src``.

        The snapshot is verified completely before the old contents are
        dropped.

        Raises:
            SnapshotError: malformed or failing checksums (store unchanged).
            StoreClosed.
        """
        ...

    def sync(self) -> None:
        """Make every earlier mutation durable (fsync).  No-op in memory.

        Raises:
            StoreClosed, OSError.
        """
        ...

    def close(self) -> None:
        """Sync, write index checkpoints and release files.  Idempotent."""
        ...


class Pending(NamedTuple):
    """An unacknowledged delivery: original consumer sequence and delivery time
    (a tuple: a consumer's state holds one per pending message and is rebuilt
    at every flush)."""

    consumer_seq: int
    ts_ns: int


@dataclass(frozen=True, slots=True)
class ConsumerState:
    """Everything a consumer must remember across restarts.

    Attributes:
        delivered_consumer_seq: Last consumer sequence delivered.
        delivered_stream_seq: Stream sequence of that delivery.
        ack_floor_consumer_seq: All consumer sequences <= this are acked.
        ack_floor_stream_seq: Stream sequence of the ack floor.
        pending: stream seq -> ``Pending`` for delivered, unacked messages.
        redelivered: stream seq -> redelivery count (deliveries - 1).
        started: the consumer's start position was chosen (it is
            ``delivered_stream_seq + 1``): a restart goes on from there
            instead of choosing again from the config, even when nothing was
            delivered and ``delivered_stream_seq`` is 0 (as nats-server, whose
            consumer keeps its stored position once it has one).
    """

    delivered_consumer_seq: int = 0
    delivered_stream_seq: int = 0
    ack_floor_consumer_seq: int = 0
    ack_floor_stream_seq: int = 0
    pending: dict[int, Pending] = field(default_factory=dict)
    redelivered: dict[int, int] = field(default_factory=dict)
    started: bool = False


@runtime_checkable
class ConsumerStore(Protocol):
    """Persistent position of one consumer.

    The consumer state machine decides; this only keeps its latest state.
    ``save`` is buffered; the state is durable once ``sync`` returns.
    """

    def load(self) -> ConsumerState:
        """The last saved state (an empty state if none was ever saved).

        Raises:
            CorruptionError: the persisted state fails its checksum.
            StoreClosed.
        """
        ...

    def save(self, state: ConsumerState) -> None:
        """Replace the state (durable after ``sync``).

        Raises:
            StoreClosed.
        """
        ...

    def sync(self) -> None:
        """Persist the latest saved state crash-safely (temp, fsync, rename,
        fsync dir).  No-op if nothing changed.

        Raises:
            StoreClosed, OSError.
        """
        ...

    def delete(self) -> None:
        """Remove the persisted state and close."""
        ...

    def close(self) -> None:
        """Sync and release.  Idempotent."""
        ...
