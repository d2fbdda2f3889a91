"""A replicated stream's state machine over its durable store, and its applied mark.

Theory of operation
-------------------
``ReplicatedStreamFSM`` is the ``raft.fsm.StateMachine`` of a stream group
(``cluster.replicated`` runs the group): it applies committed entries to the
stream's own store through ``StreamStateMachine`` and the consumers' ops to
the memory-only ``ConsumerTable``, skips the entries the store already holds
after a restart (``skip_through``: the applied mark's index), takes and
installs the group's state snapshots (``cluster.stream_snapshot``) and keeps
the gates of a replica whose store has a hole (``can_apply``/``can_lead``).

A run of committed entries (``apply_run``) is applied in one pass: the
publishes of consecutive ``StreamMsg`` ops are stored by one
``StreamStore.append_batch`` (one write, one index pass), bounded by
``RUN_BYTES_MAX`` of entries; ``applied`` moves to the run's last index once
it is stored, so the mark (written between two applies) stays exact.

The applied mark (``raft/applied.json``: ``(index, last_seq, msgs)``) and
``restore_to_mark``, which brings a store back to it at start, are here too;
when they are written and why is told in ``cluster.replicated``.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from cluster import catchup
from cluster.consumer_table import ConsumerTable
from cluster.ops import CONSUMER_ENTRY_TYPES, StreamMsg, decode_any
from cluster.stream_fsm import StreamStateMachine
from cluster.stream_snapshot import (
    ConsumerSnap,
    GroupSnapshot,
    decode_group_snapshot,
    encode_group_snapshot,
    ranges,
)
from raft.errors import ApplyFailed, InvariantViolation
from raft.snapshot import decode_snapshot
from raft.storage import safe_file_stem
from store.api import StreamStore

__all__ = [
    "MARK_FILE",
    "RUN_BYTES_MAX",
    "ReplicatedStreamFSM",
    "read_mark",
    "restore_to_mark",
    "snapshot_mark",
    "write_mark",
]

log = logging.getLogger("cluster.replicated")  # the group's events, one logger

MARK_FILE = "applied.json"
#: publish entries applied together (one store write) up to this many bytes
RUN_BYTES_MAX = 8 * 1024 * 1024


class ReplicatedStreamFSM:
    """The stream state machine as a Raft state machine over a durable store.

    Args:
        fsm: the stream's state machine (over its store).
        skip_through: entries up to this Raft index are already in the store.
    """

    def __init__(self, fsm: StreamStateMachine, skip_through: int) -> None:
        self.fsm = fsm
        self.skip_through = skip_through
        #: the Raft index the store's state is at (the applied mark's)
        self.applied = skip_through
        #: the last entry index handed to apply_at (any kind)
        self.last_index = 0
        #: the stream's consumers (memory only: rebuilt from snapshot + journal)
        self.consumers = ConsumerTable()
        #: an installed snapshot whose messages the store still lacks (a hole)
        self.target: GroupSnapshot | None = None
        self._target_doc = b""
        #: called (synchronously) when a hole appears
        self.on_hole: Callable[[], None] | None = None
        #: called before a snapshot is taken (the group syncs the store)
        self.before_snapshot: Callable[[], None] | None = None
        self.installs = 0
        #: the store failed under an apply (see ``apply_at``)
        self.damaged = False
        #: called (synchronously) when the store fails under an apply
        self.on_damaged: Callable[[], None] | None = None

    # -- gates read by raft.core every cycle

    def can_apply(self) -> bool:
        """False while the store has a hole: entries after the snapshot wait."""
        return self.target is None

    def can_lead(self) -> bool:
        """A replica with a hole (or a damaged store) never leads."""
        return self.target is None and not self.damaged

    @property
    def current(self) -> bool:
        """The store holds everything this replica has applied or installed."""
        return self.target is None and not self.damaged

    def apply_at(self, entry: bytes, index: int) -> object:
        if index > self.last_index:
            self.last_index = index
        op = decode_any(entry)
        if isinstance(op, CONSUMER_ENTRY_TYPES):  # never skipped (see the module doc)
            return self.consumers.apply(op)  # type: ignore[arg-type]
        if index <= self.skip_through:
            return None  # already in the store (re-applied from the journal at start)
        try:
            outcome = self.fsm.apply_op(op)  # type: ignore[arg-type]
        except OSError as exc:
            self._store_failed(index, exc)
            raise
        self.applied = index
        return outcome

    def _store_failed(self, index: int, exc: OSError) -> None:
        """The store failed under an apply (a full disk while a segment rolls):
        it no longer holds the state of an index.  The replica stops leading,
        serving reads and catch-up, marking and snapshotting, so nothing
        trusts it; a restart rebuilds it from its mark, the journal and its
        peers."""
        if not self.damaged:
            log.error("event=stream_store_failed index=%d error=%r", index, exc)
            self.damaged = True
            if self.on_damaged is not None:
                self.on_damaged()

    def apply_run(self, entries: list[tuple[list[bytes], int]]) -> list[list[object]]:
        """Apply a run of committed entries ``(items, index)`` (``raft.fsm``):
        the results ``apply_at`` gives each item, in log order.

        Consecutive publish ops (``StreamMsg``) are applied together
        (``StreamStateMachine.apply_stream_msgs``: one store write per run,
        up to ``RUN_BYTES_MAX`` of entries); any other op applies on its own,
        after them.  ``applied`` moves to a run's last index once it is
        stored.  A store failure fails every op of the run with it
        (``ApplyFailed``; the replica is damaged, as under ``apply_at``).
        """
        out: list[list[object]] = []
        pending: list[tuple[list[object], int, StreamMsg, int]] = []
        size = 0
        for items, index in entries:
            res: list[object] = [None] * len(items)
            out.append(res)
            if index > self.last_index:
                self.last_index = index
            for k, item in enumerate(items):
                try:
                    op = decode_any(item)
                except Exception as exc:  # a bad entry: its proposer learns, the rest applies
                    log.exception("event=apply_raised index=%d", index)
                    res[k] = ApplyFailed(exc)
                    continue
                if index <= self.skip_through and not isinstance(op, CONSUMER_ENTRY_TYPES):
                    continue  # already in the store (re-applied from the journal at start)
                if type(op) is StreamMsg:
                    pending.append((res, k, op, index))
                    size += len(item)
                    if size >= RUN_BYTES_MAX:
                        self._apply_pending(pending)
                        pending, size = [], 0
                    continue
                if pending:
                    self._apply_pending(pending)
                    pending, size = [], 0
                try:
                    res[k] = self.apply_at(item, index)
                except Exception as exc:
                    log.exception("event=apply_raised index=%d", index)
                    res[k] = ApplyFailed(exc)
        if pending:
            self._apply_pending(pending)
        return out

    def _apply_pending(self, pending: list[tuple[list[object], int, StreamMsg, int]]) -> None:
        index = pending[-1][3]
        try:
            outcomes = self.fsm.apply_stream_msgs([p[2] for p in pending])
        except Exception as exc:
            if isinstance(exc, OSError):
                self._store_failed(index, exc)
            log.exception("event=apply_raised index=%d", index)
            for res, k, _, _ in pending:
                res[k] = ApplyFailed(exc)
            return
        for (res, k, _, _), outcome in zip(pending, outcomes, strict=True):
            res[k] = outcome
        self.applied = index

    def apply(self, entry: bytes) -> object:
        raise InvariantViolation("a stream group applies through apply_at")

    def snapshot(self) -> bytes:
        """The stream's state at the last applied entry (``cluster.stream_snapshot``).

        The store is synced first (``before_snapshot``), so the snapshot's
        ``(index, last_seq, msgs)`` is a valid applied mark.

        Raises:
            InvariantViolation: the journal is still being replayed into a
                store that is ahead of it (a snapshot now would describe a
                later state than its index); pysyncobj retries later.
        """
        if self.target is not None:
            return self._target_doc  # nothing applied since it was installed
        if self.damaged:
            raise InvariantViolation("no snapshot of a damaged store")
        if self.last_index < self.skip_through:
            raise InvariantViolation(
                f"snapshot while replaying ({self.last_index} < {self.skip_through})"
            )
        if self.before_snapshot is not None:
            self.before_snapshot()
        st = self.fsm.store.state(deleted_details=True)
        snap = GroupSnapshot(
            index=max(self.last_index, self.applied),
            first_seq=st.first_seq,
            last_seq=st.last_seq,
            last_ts=st.last_ts,
            msgs=st.msgs,
            bytes=st.bytes,
            deleted=ranges(st.deleted or ()),
            last_msg_id=self.fsm.last_msg_id,
            dedupe=tuple(self.fsm.dedupe_entries()),
            consumers=tuple(ConsumerSnap(*c) for c in self.consumers.snapshot()),
            interest=self.fsm.interest,
        )
        return encode_group_snapshot(snap)

    def restore(self, reader: BinaryIO) -> None:
        """Install a snapshot (this replica's own at start, or the leader's).

        The consumer table always comes from it.  A store that already holds
        the snapshot's state (its mark is at or past it) keeps its own; one
        that is behind is reconciled with it (``cluster.catchup.reconcile``),
        takes its dedupe window, and if messages are missing gets a hole.

        Raises:
            StreamSnapshotError: malformed (nothing changed).
        """
        doc = reader.read()
        snap = decode_group_snapshot(doc)
        self.consumers.install(
            [(c.name, c.config, c.created_ns, c.group, c.state) for c in snap.consumers]
        )
        store = self.fsm.store
        self.last_index = max(self.last_index, snap.index)
        if snap.index <= self.skip_through and store.state().last_seq >= snap.last_seq:
            return  # the store is at or past the snapshot (a restart)
        catchup.reconcile(store, snap)
        self.fsm.install_dedupe(snap.last_msg_id, iter(snap.dedupe))
        self.fsm.install_interest(snap.interest)
        self.skip_through = max(self.skip_through, snap.index)
        self.installs += 1
        if store.state().last_seq < snap.last_seq:
            self.target, self._target_doc = snap, doc
            log.warning(
                "event=stream_snapshot_hole index=%d have=%d need=%d",
                snap.index,
                store.state().last_seq,
                snap.last_seq,
            )
            if self.on_hole is not None:
                self.on_hole()
        else:
            self.applied = snap.index

    def filled(self) -> None:
        """The hole is filled: entries after the snapshot may apply."""
        if self.target is not None:
            self.applied = self.target.index
            self.target = None
            self._target_doc = b""


def snapshot_mark(raft_dir: Path, group_id: str) -> tuple[int, int, int]:
    """The applied mark a group's snapshot file carries (``(0, 0, 0)`` if none)."""
    path = raft_dir / (safe_file_stem(group_id) + ".snap")
    try:
        snap = decode_snapshot(path.read_bytes())
        g = decode_group_snapshot(snap.fsm_bytes)
    except FileNotFoundError:
        return 0, 0, 0
    except Exception as exc:  # unreadable: the raft layer will say so too
        log.error("event=snapshot_mark_unreadable path=%s reason=%r", path, exc)
        return 0, 0, 0
    return g.index, g.last_seq, g.msgs


def read_mark(raft_dir: Path) -> tuple[int, int, int]:
    """``(index, last_seq, msgs)`` of the applied mark, ``(0, 0, 0)`` if none or
    damaged (then the store is rebuilt from the journal: nothing is skipped);
    ``msgs`` is -1 in a mark written before it was recorded."""
    path = raft_dir / MARK_FILE
    try:
        doc = json.loads(path.read_text())
        return int(doc["index"]), int(doc["last_seq"]), int(doc.get("msgs", -1))
    except FileNotFoundError:
        return 0, 0, 0
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        log.error("event=applied_mark_unreadable path=%s reason=%r rebuild=journal", path, exc)
        return 0, 0, 0


def write_mark(raft_dir: Path, index: int, last_seq: int, msgs: int) -> None:
    raft_dir.mkdir(parents=True, exist_ok=True)
    tmp = raft_dir / (MARK_FILE + ".tmp")
    with open(tmp, "w") as fh:
        json.dump({"index": index, "last_seq": last_seq, "msgs": msgs}, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, raft_dir / MARK_FILE)


def restore_to_mark(
    store: StreamStore,
    raft_dir: Path,
    group_id: str,
    floor: tuple[int, int, int] = (0, 0, 0),
) -> int:
    """Bring a durable store back to its applied mark; the Raft index to skip
    through (0: rebuild, every entry applies again).

    The store is exactly at the mark when, cut back to the mark's
    ``last_seq``, it holds the mark's number of messages: only appends were
    made durable past the mark, and a cut undoes them.  A removal past the mark
    (limits, deletes, purges, a work queue's acks) cannot be undone by a cut:
    applying the entries after the mark again over it would decide them on a
    different state (an expected-last-subject-sequence, a per-subject limit)
    than the other replicas did, so the store is rebuilt instead.  So is one
    that holds less than the mark says (a damaged or cut file), or reports
    damage: skipping to the mark would leave a hole that is never repaired.
    The journal keeps every entry after the newest snapshot (and the leader
    sends what it lost); ``floor`` is that snapshot's own mark, used when it
    is newer than the mark file (a crash right after a compaction).
    """
    index, last_seq, msgs = read_mark(raft_dir)
    if floor[0] > index:
        index, last_seq, msgs = floor
    st = store.state()
    why = None
    if not store.recovery_report.clean:
        why = "damaged"
    elif st.last_seq < last_seq:
        why = "short"
        if floor[0] > 0 and st.last_seq <= floor[1]:
            # behind the snapshot itself (a crash during catch-up): the store is
            # some state before the snapshot's; installing it reconciles the
            # store and fetches the rest from the leader (nothing to throw away)
            log.warning(
                "event=stream_store_behind_snapshot group=%s last_seq=%d snapshot=%d/%d",
                group_id,
                st.last_seq,
                floor[0],
                floor[1],
            )
            return 0
    else:
        if st.last_seq > last_seq:
            store.truncate(last_seq)
        if msgs >= 0 and store.state().msgs != msgs:
            why = "removed_past_mark"
    if why is None:
        return index
    log.warning(
        "event=stream_store_rebuild group=%s reason=%s last_seq=%d msgs=%d mark=%d/%d/%d",
        group_id,
        why,
        st.last_seq,
        st.msgs,
        index,
        last_seq,
        msgs,
    )
    store.truncate(0)
    return 0
