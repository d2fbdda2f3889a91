"""A replicated stream's group: its ops through a Raft group of two or three servers.

Theory of operation
-------------------
``ReplicatedGroup`` stands where ``LocalGroup`` stands for an R1 stream and
offers the same ``propose`` (and ``start``, which does not wait and calls
back, so the stream keeps several entries in flight): the op is encoded (``cluster.ops``), replicated
by a ``raft.RaftGroup`` among the stream's peers (named by server name, the
group by its meta assignment, ``S-R3F-…``) and applied on every replica to its
own store by ``ReplicatedStreamFSM``.  ``propose`` returns once the entry is
committed — durable in the journals of a majority — and applied on this
server, so a PubAck sent after it means "on a majority".  Only the leader
proposes publishes (the node captures a replicated stream's subjects on its
leader only); a proposal made on a follower is forwarded by the group.

The store is a durable state machine of its own: replaying the journal into
it after a restart would append twice.  ``ReplicatedStreamFSM.apply_at``
learns each entry's Raft index; the *applied mark* ``(index, last_seq, msgs)`` is
written (write-fsync-rename, ``raft/applied.json`` in the stream's directory)
after the store has been synced up to that point, at most every
``MARK_INTERVAL_S``; the store is synced in the trio thread, where the
Raft driver applies (one owner: a sync racing an append in a worker thread
would lose the record).  At start the store is cut back to the mark's
``last_seq`` (the tail the crash left beyond the mark is applied again from
the journal, never twice) and entries up to the mark's index are skipped.
A store that holds less than the mark says, or reports damage, or lost a
message past the mark that a cut cannot bring back (``restore_to_mark``),
and a mark that cannot be read, are rebuilt: the store is emptied and every
entry applies again (from the journal, then from the leader).
The journal keeps every entry (no compaction yet: a state snapshot would need
catch-up by streaming the store, which is not built), so an entry past the
mark is always there to apply again.

Consumer entries (``cluster.consumer_table``) ride in the same log and are
applied to the stream's ``ConsumerTable`` on every replica, *always*: the
table is memory only and is rebuilt at start from the whole journal, so the
applied mark does not skip them.

Leadership: ``leader_listeners`` hear ``True``/``False`` as this replica gains
or loses the lead (capture, expiry and answers follow it).

Cancellation: a cancelled ``propose`` may still commit and apply on every
replica; its result is dropped (retries use ``Nats-Msg-Id``).
"""

from __future__ import annotations

import json
import logging
import os
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import cbor2
import trio

from cluster.consumer_table import ConsumerTable
from cluster.ops import CONSUMER_ENTRY_TYPES, decode_any, encode_op
from cluster.stream_fsm import StreamStateMachine
from raft.core import Proposal, RaftConfig
from raft.errors import ApplyFailed, InvariantViolation, RaftError
from raft.group import RaftGroup
from raft.links import PeerLinks
from raft.storage import OsDisk
from store.api import StreamStore

log = logging.getLogger(__name__)

#: how often the applied mark moves (store synced, then the mark written)
MARK_INTERVAL_S = 0.2
MARK_FILE = "applied.json"
#: a stream group's Raft entries: one batch of publishes (its bytes bounded by the stream)
ENTRY_BYTES_MAX = 4 * 1024 * 1024
#: followers learn a commit index with the next entries, or this much later
#: (one message, wake-up and cycle less per follower and entry)
COMMIT_NOTIFY_S_MAX = 0.02
#: journal compaction is off for stream groups (see the module doc)
NO_COMPACTION = 2**62


class ReplicatedStreamFSM:
    """The stream state machine as a Raft state machine over a durable store.

    Args:
        fsm: the stream's state machine (over its store).
        skip_through: entries up to this Raft index are already in the store.
    """

    def __init__(self, fsm: StreamStateMachine, skip_through: int) -> None:
        self.fsm = fsm
        self.skip_through = skip_through
        self.applied = skip_through
        #: the stream's consumers (memory only: rebuilt from the journal)
        self.consumers = ConsumerTable()

    def apply_at(self, entry: bytes, index: int) -> object:
        op = decode_any(entry)
        if isinstance(op, CONSUMER_ENTRY_TYPES):  # never skipped (see the module doc)
            return self.consumers.apply(op)  # type: ignore[arg-type]
        if index <= self.skip_through:
            return None  # already in the store (re-applied from the journal at start)
        outcome = self.fsm.apply_op(op)  # type: ignore[arg-type]
        self.applied = index
        return outcome

    def apply(self, entry: bytes) -> object:
        raise InvariantViolation("a stream group applies through apply_at")

    def snapshot(self) -> bytes:
        return cbor2.dumps({"applied": self.applied})

    def restore(self, reader: BinaryIO) -> None:
        doc = cbor2.loads(reader.read())
        applied = doc.get("applied", 0) if isinstance(doc, dict) else 0
        if applied > self.applied:
            # a snapshot from a leader whose journal was compacted past us: the
            # messages are not in it; installing it would leave a hole
            raise InvariantViolation(
                f"stream snapshot at {applied} but this replica holds only {self.applied}"
            )


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


def restore_to_mark(store: StreamStore, raft_dir: Path, group_id: str) -> int:
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
    The journal keeps every entry (and the leader sends what it lost).
    """
    index, last_seq, msgs = read_mark(raft_dir)
    st = store.state()
    why = None
    if st.last_seq < last_seq:
        why = "short"
    elif not store.recovery_report.clean:
        why = "damaged"
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


@dataclass(frozen=True)
class ReplicaSpec:
    """Where a replicated stream's group runs (from its meta assignment).

    Attributes:
        group_id: the Raft group name (``S-R3F-…``).
        node_id: this server's name.
        peers: every member's server name.
        links: the server's peer links.
        seed: seeds the group's election timeouts.
    """

    group_id: str
    node_id: str
    peers: tuple[str, ...]
    links: PeerLinks
    seed: int = 0


class ReplicatedGroup:
    """``LocalGroup``'s interface over a Raft group of the stream's peers.

    Args:
        group_id: the Raft group name (the meta assignment's).
        node_id: this server's name.
        peers: every member's server name (this one included).
        fsm: the stream's state machine.
        store: its store.
        links: the server's peer links.
        raft_dir: where the journal and the applied mark live.
        rng: seeds election timeouts.
        durable_store: False for a memory store (no mark: it starts empty).
    """

    sync_each_batch = True  # durability is the journal's (majority)
    idle = False  # no inline batches: every batch goes through the stream's task

    def __init__(
        self,
        group_id: str,
        node_id: str,
        peers: list[str],
        fsm: StreamStateMachine,
        store: StreamStore,
        links: PeerLinks,
        raft_dir: Path,
        rng: random.Random,
        *,
        durable_store: bool = True,
    ) -> None:
        self.group_id = group_id
        self.node_id = node_id
        self.store = store
        self.raft_dir = raft_dir
        #: a memory store starts empty: the whole journal applies again
        self.durable_store = durable_store
        # applied past the mark before a crash: those entries apply again (the
        # stream rebuilds its dedupe table from the store afterwards)
        index = restore_to_mark(store, raft_dir, group_id) if durable_store else 0
        self.rfsm = ReplicatedStreamFSM(fsm, index)
        self._marked = index
        config = RaftConfig(
            commit_notify_s_max=COMMIT_NOTIFY_S_MAX,
            entry_bytes_max=ENTRY_BYTES_MAX,
            log_compaction_entries_min=NO_COMPACTION,
            log_compaction_s_min=float(NO_COMPACTION),
        )
        self.raft = RaftGroup(
            group_id,
            node_id,
            [p for p in peers if p != node_id],
            self.rfsm,
            links,
            OsDisk(raft_dir),
            config,
            rng=rng,
        )
        self.leader_listeners: list[Callable[[bool], None]] = []
        self.leader_since_ns = 0
        self._was_leader = False
        #: set once ``leader_listeners`` heard this replica gain the lead
        self.lead_announced = trio.Event()

    @property
    def is_leader(self) -> bool:
        return self.raft.is_leader

    @property
    def leader_id(self) -> str | None:
        return self.raft.leader_id

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(self.raft.run)
            nursery.start_soon(self._watch_leadership)
            nursery.start_soon(self._mark_loop)
            task_status.started()

    async def propose(self, op: Any) -> Any:
        """Replicate ``op``; its ``ApplyOutcome`` once committed and applied here.

        Raises:
            RaftError: not committed (NotLeader, NoLeader, ProposalDropped …).
            ApplyFailed: the state machine raised.
        """
        result = await self.raft.propose(encode_op(op))
        if isinstance(result, ApplyFailed):
            raise result
        return result

    def start(self, op: Any, on_done: Callable[[Any, BaseException | None], None]) -> None:
        """Replicate ``op`` without waiting: ``on_done(outcome, error)`` is called
        from the group's driver once it is committed and applied here (the
        point where ``propose`` returns), or with the ``RaftError`` /
        ``ApplyFailed`` that ends it.  ``on_done`` must not block.

        Raises:
            RaftError: refused at once (QueueFull, NotLeader, NoLeader);
                ``on_done`` is then never called.
            ValueError: the encoded op is larger than an entry.
        """

        def done(p: Proposal) -> None:
            if p.error is not None:
                on_done(None, p.error)
            elif isinstance(p.result, ApplyFailed):
                on_done(None, p.result)
            else:
                on_done(p.result, None)

        self.raft.start(encode_op(op), done)

    @property
    def members(self) -> list[str]:
        """Every member's server name (this one included)."""
        return sorted(set(self.raft.members) | {self.node_id})

    async def step_down(self, target: str | None = None) -> None:
        """Hand the lead over (to ``target`` if given); failures are logged.

        Cancellation: a transfer already requested may still happen.
        """
        try:
            await self.raft.step_down(target=target)
        except RaftError as exc:
            log.warning("event=stepdown_failed group=%s reason=%r", self.group_id, exc)

    async def sync(self) -> None:
        """Nothing to do: the journal is synced every cycle."""

    async def _watch_leadership(self) -> None:
        import time

        channel = self.raft.subscribe_leadership()
        async with channel:
            async for state in channel:
                lead = state.is_leader
                if lead != self._was_leader:
                    self._was_leader = lead
                    if lead:
                        self.leader_since_ns = time.time_ns()
                    for listener in list(self.leader_listeners):
                        listener(lead)
                    if lead:
                        self.lead_announced.set()
                    elif self.lead_announced.is_set():
                        self.lead_announced = trio.Event()

    async def _mark_loop(self) -> None:
        """Sync the store, then move the applied mark (bounded, periodic).

        The store's sync runs on the trio thread, between two applies of the
        group's driver (never concurrently with one); only the mark file is
        written in a worker thread.
        """
        while True:
            await trio.sleep(MARK_INTERVAL_S)
            index = self.rfsm.applied
            if index == self._marked or not self.durable_store:
                continue
            st = self.store.state()
            # in the store's owner thread: the Raft driver appends to the store in
            # this one, and a sync in a worker thread racing an append loses that
            # record (the write buffer is swapped under it)
            self.store.sync()
            await trio.to_thread.run_sync(write_mark, self.raft_dir, index, st.last_seq, st.msgs)
            self._marked = index

    def status(self) -> dict[str, Any]:
        return self.raft.status()
