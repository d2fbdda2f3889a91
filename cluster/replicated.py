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

Compaction.  The journal is bounded (``JOURNAL_ENTRIES_MAX`` entries,
``JOURNAL_BYTES_MAX`` bytes of commands, or ``JOURNAL_AGE_S_MAX``): past a
bound the group takes a *state snapshot* (``cluster.replica_state``: the
store's shape, the stream machine's state, the whole consumer table -- never
the messages) and cuts the journal there.  The store is synced before the
snapshot's state is taken, so a snapshot is also an applied mark: at start
the newer of the mark file and the snapshot is the mark.  The snapshot's
encoding and write run in a thread (``raft.snapshot``).

Holes and catch-up.  A replica that installs a snapshot (from the leader,
which compacted past what this replica has, or at start) while its store
holds less than the snapshot's shape has a *hole*: it holds its applies
(the committed entries wait), never campaigns (``may_lead``, so it never
leads, never captures and never answers reads), writes no mark, and fetches
the missing messages from a peer's store in bounded batches
(``cluster.catchup``); then the entries after the snapshot apply.  A
brand-new empty replica in a group whose journal was compacted takes the same
path: a new peer catches up by itself.

Consumer entries (``cluster.consumer_table``) ride in the same log and are
applied to the stream's ``ConsumerTable`` on every replica, *always*: the
table is memory only; it is rebuilt at start from the latest snapshot plus
the journal after it, so the applied mark does not skip them.

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

import trio

from cluster.catchup import CatchupLink, CatchupUnavailable
from cluster.consumer_table import ConsumerTable
from cluster.ops import CONSUMER_ENTRY_TYPES, decode_any, encode_op
from cluster.replica_state import (
    ReplicaState,
    ReplicaStateError,
    decode_replica_state,
    encode_replica_state,
    finish,
    install_batch,
    reconcile,
    shape_of,
)
from cluster.stream_fsm import StreamStateMachine
from raft.core import Proposal, RaftConfig, safe_file_stem
from raft.errors import ApplyFailed, InvariantViolation, RaftError
from raft.group import RaftGroup
from raft.links import PeerLinks
from raft.snapshot import SnapshotStore
from raft.storage import OsDisk
from store.api import StoredMsg, StreamStore

log = logging.getLogger(__name__)

#: how often the applied mark moves (store synced, then the mark written)
MARK_INTERVAL_S = 0.2
MARK_FILE = "applied.json"
#: a stream group's Raft entries: one batch of publishes (its bytes bounded by the stream)
ENTRY_BYTES_MAX = 4 * 1024 * 1024
#: followers learn a commit index with the next entries, or this much later
#: (one message, wake-up and cycle less per follower and entry)
COMMIT_NOTIFY_S_MAX = 0.02
#: the journal's bounds: a state snapshot cuts it past any of them
JOURNAL_ENTRIES_MAX = int(os.environ.get("TRIJET_STREAM_JOURNAL_ENTRIES_MAX", 8192))
JOURNAL_BYTES_MAX = int(os.environ.get("TRIJET_STREAM_JOURNAL_BYTES_MAX", 8 * 1024 * 1024))
JOURNAL_AGE_S_MAX = 600.0
#: a catch-up that found no peer to answer tries again after this long (and more, jittered)
CATCHUP_RETRY_S = 0.05


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
        #: the stream's consumers (memory only: snapshot + journal)
        self.consumers = ConsumerTable()
        #: the snapshot installed while the store holds less than its shape
        self.hole: ReplicaState | None = None
        self._hole_doc = b""
        #: told (synchronously) when a hole opens
        self.on_hole: Callable[[], None] | None = None
        #: the store failed under an apply (see ``apply_at``)
        self.damaged = False
        #: told (synchronously) when the store fails under an apply
        self.on_damaged: Callable[[], None] | None = None

    @property
    def apply_held(self) -> bool:
        """Committed entries wait while the store has a hole (``raft.syncobj``)."""
        return self.hole is not None

    @property
    def may_lead(self) -> bool:
        """A replica with a hole (or a damaged store) never campaigns (``raft.core``)."""
        return self.hole is None and not self.damaged

    def apply_at(self, entry: bytes, index: int) -> object:
        op = decode_any(entry)
        if isinstance(op, CONSUMER_ENTRY_TYPES):  # never skipped (see the module doc)
            self.applied = max(self.applied, index)
            return self.consumers.apply(op)  # type: ignore[arg-type]
        if index <= self.skip_through:
            return None  # already in the store (re-applied from the journal at start)
        try:
            outcome = self.fsm.apply_op(op)  # type: ignore[arg-type]
        except OSError as e:
            # the store failed under an apply (a full disk while a segment rolls):
            # what it holds is no longer the state of an index; the replica stops
            # leading, serving, marking and snapshotting, so nothing trusts it and
            # a restart rebuilds it from its mark, the journal and its peers
            if not self.damaged:
                log.error("event=stream_store_failed index=%d error=%r", index, e)
                self.damaged = True
                if self.on_damaged is not None:
                    self.on_damaged()
            raise
        self.applied = index
        return outcome

    def apply(self, entry: bytes) -> object:
        raise InvariantViolation("a stream group applies through apply_at")

    def snapshot(self) -> bytes:
        """The state after the last applied entry, without the messages.

        The store is synced first: the snapshot is an applied mark too.  A
        replica with a hole gives the snapshot it installed (its state is that
        one's; its store is being filled).
        """
        if self.hole is not None:
            return self._hole_doc
        if self.damaged:
            raise InvariantViolation("no snapshot of a damaged store")
        store = self.fsm.store
        store.sync()
        rs = ReplicaState(
            self.applied,
            shape_of(store),
            self.fsm.replica_state(),
            self.consumers.snapshot_doc(),
        )
        return encode_replica_state(rs)

    def restore(self, reader: BinaryIO) -> None:
        """Install a state snapshot (at start, or sent by the leader).

        The consumer table is replaced.  A store already at or past the
        snapshot (the mark is not older) keeps its stream state; otherwise
        the stream's state is the snapshot's and entries after its index apply
        again; a store that holds less than its shape opens a hole.

        Raises:
            ReplicaStateError, OpError, StreamSnapshotError: malformed.
        """
        data = reader.read()
        rs = decode_replica_state(data)
        self.consumers.restore_doc(rs.consumers)
        store = self.fsm.store
        st = store.state()
        if self.hole is None and self.skip_through >= rs.index and st.last_seq >= rs.shape.last_seq:
            # a restart whose store is at or past the snapshot: the policy is the
            # stream's config (newer), the dedupe ids recovered from the store
            # join the snapshot's, the interest filters are the snapshot's
            self.fsm.install_replica_state(_merged(self.fsm.replica_state(), rs.stream))
            self.applied = max(self.applied, rs.index)
            return
        self.fsm.install_replica_state(rs.stream)
        self.skip_through = rs.index
        self.applied = rs.index
        sh = rs.shape
        if (st.first_seq, st.last_seq, st.msgs) == (sh.first_seq, sh.last_seq, sh.msgs):
            self.hole = None
            return
        log.info(
            "event=stream_hole index=%d have=%d..%d/%d want=%d..%d/%d",
            rs.index,
            st.first_seq,
            st.last_seq,
            st.msgs,
            sh.first_seq,
            sh.last_seq,
            sh.msgs,
        )
        self.hole, self._hole_doc = rs, data
        if self.on_hole is not None:
            self.on_hole()

    def hole_filled(self, rs: ReplicaState) -> bool:
        """The store now holds ``rs``'s shape; False if another snapshot was
        installed meanwhile (its hole stays)."""
        if self.hole is not rs:
            return False
        self.hole, self._hole_doc = None, b""
        return True


def _merged(cur: dict[str, Any], snap: object) -> dict[str, Any]:
    """The stream state of a store past its snapshot: ``cur`` (rebuilt from the
    store and the config) over the snapshot's ``snap``."""
    if not isinstance(snap, dict):
        return cur
    dedupe = {bytes(d[0]): d for d in snap.get("dedupe", []) if isinstance(d, list) and d}
    dedupe.update({d[0]: d for d in cur["dedupe"]})
    return {
        "policy": cur["policy"],
        "last_msg_id": cur["last_msg_id"] or snap.get("last_msg_id", b""),
        "dedupe": sorted(dedupe.values(), key=lambda d: (d[1], d[0])),
        "interest": cur["interest"] if cur["interest"] is not None else snap.get("interest"),
    }


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


def read_snapshot_mark(raft_dir: Path, group_id: str) -> tuple[int, int, int] | None:
    """``(index, last_seq, msgs)`` of the group's state snapshot on disk (the
    store was synced at it), or None."""
    disk = OsDisk(raft_dir)
    try:
        snap = SnapshotStore(disk, safe_file_stem(group_id) + ".snap", None).load()  # type: ignore[arg-type]
    finally:
        disk.close()
    if snap is None:
        return None
    try:
        rs = decode_replica_state(snap.fsm_bytes)
    except ReplicaStateError as e:
        log.error("event=stream_snapshot_unreadable group=%s reason=%r", group_id, e)
        return None
    return rs.index, rs.shape.last_seq, rs.shape.msgs


def restore_to_mark(
    store: StreamStore,
    raft_dir: Path,
    group_id: str,
    snapshot_mark: tuple[int, int, int] | None = None,
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
    The journal keeps every entry after the latest snapshot (and the leader
    sends what it lost).

    A state snapshot newer than the mark file (``snapshot_mark``) is the mark;
    a store that holds less than it says is left as it is (0 is returned): the
    snapshot's install finds the hole and fills it from a peer, keeping what
    the store holds.
    """
    index, last_seq, msgs = read_mark(raft_dir)
    if snapshot_mark is not None and snapshot_mark[0] >= index:
        index, last_seq, msgs = snapshot_mark
        if store.state().last_seq < last_seq:
            return 0
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
        journal_entries_max, journal_bytes_max: the journal's bounds.
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
        journal_entries_max: int = JOURNAL_ENTRIES_MAX,
        journal_bytes_max: int = JOURNAL_BYTES_MAX,
    ) -> None:
        self.group_id = group_id
        self.node_id = node_id
        self.store = store
        self.raft_dir = raft_dir
        #: a memory store starts empty: the whole journal applies again
        self.durable_store = durable_store
        # applied past the mark before a crash: those entries apply again (the
        # stream rebuilds its dedupe table from the store afterwards)
        index = 0
        if durable_store:
            snap_mark = read_snapshot_mark(raft_dir, group_id)
            index = restore_to_mark(store, raft_dir, group_id, snap_mark)
        self.rfsm = ReplicatedStreamFSM(fsm, index)
        self._marked = index
        self._hole_event = trio.Event()
        self.rfsm.on_hole = self._hole_event.set
        self.rfsm.on_damaged = self._on_damaged
        self._nursery: trio.Nursery | None = None
        self._rng = random.Random(rng.random())
        self.catchup = CatchupLink(
            group_id,
            links,
            store,
            read_in_thread=durable_store,
            can_serve=lambda: self.rfsm.may_lead,
            rng=self._rng,
        )
        config = RaftConfig(
            commit_notify_s_max=COMMIT_NOTIFY_S_MAX,
            entry_bytes_max=ENTRY_BYTES_MAX,
            log_compaction_entries_min=journal_entries_max,
            log_compaction_bytes_min=journal_bytes_max,
            log_compaction_s_min=JOURNAL_AGE_S_MAX,
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

    @property
    def is_leader(self) -> bool:
        return self.raft.is_leader

    @property
    def leader_id(self) -> str | None:
        return self.raft.leader_id

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            await nursery.start(self.catchup.run)
            await nursery.start(self.raft.run)
            nursery.start_soon(self._watch_leadership)
            nursery.start_soon(self._mark_loop)
            nursery.start_soon(self._catchup_loop)
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

    async def _mark_loop(self) -> None:
        """Sync the store, then move the applied mark (bounded, periodic).

        The store's sync runs on the trio thread, between two applies of the
        group's driver (never concurrently with one); only the mark file is
        written in a worker thread.
        """
        while True:
            await trio.sleep(MARK_INTERVAL_S)
            index = self.rfsm.applied
            if index == self._marked or not self.durable_store or not self.rfsm.may_lead:
                continue  # a store with a hole (or damaged) is not at its applied index
            st = self.store.state()
            # in the store's owner thread: the Raft driver appends to the store in
            # this one, and a sync in a worker thread racing an append loses that
            # record (the write buffer is swapped under it)
            try:
                self.store.sync()
                await trio.to_thread.run_sync(
                    write_mark, self.raft_dir, index, st.last_seq, st.msgs
                )
            except OSError as e:  # a full disk: the mark stays behind, tried again
                log.error("event=applied_mark_failed group=%s error=%r", self.group_id, e)
                continue
            self._marked = index

    def _on_damaged(self) -> None:
        """The store failed under an apply: a leader hands the lead over."""
        if self._nursery is not None and self.is_leader:
            self._nursery.start_soon(self.step_down)

    async def _catchup_loop(self) -> None:
        """Fill the store's hole whenever one opens (see the module doc)."""
        while True:
            if self.rfsm.hole is None:
                await self._hole_event.wait()
            self._hole_event = trio.Event()
            self.rfsm.on_hole = self._hole_event.set
            rs = self.rfsm.hole
            if rs is not None:
                try:
                    await self._fill(rs)
                except OSError as e:  # a full disk: the hole stays, filled again later
                    log.error("event=catchup_failed group=%s error=%r", self.group_id, e)
                    self._hole_event.set()
                    await trio.sleep(1.0)

    async def _fetcher(
        self,
        rs: ReplicaState,
        nxt: int,
        end: int,
        send: trio.MemorySendChannel[tuple[list[StoredMsg], str]],
    ) -> None:
        """Fetch ``[nxt, end]`` batch by batch into ``send`` (retrying, backing
        off) while ``rs`` is the hole to fill."""
        stats = self.catchup.stats
        delay = CATCHUP_RETRY_S
        async with send:
            while nxt <= end and self.rfsm.hole is rs:
                src = self._source()
                if src is None:
                    await trio.sleep(delay)
                    continue
                try:
                    msgs, after = await self.catchup.fetch(src, nxt, end)
                except (CatchupUnavailable, ValueError) as e:
                    stats.retries += 1
                    log.info(
                        "event=catchup_retry group=%s source=%s reason=%r", self.group_id, src, e
                    )
                    await trio.sleep(delay * (1 + self._rng.random()))
                    delay = min(delay * 2, 1.0)
                    continue
                delay = CATCHUP_RETRY_S
                await send.send(([m for m in msgs if m.seq >= nxt], src))
                nxt = after

    def _source(self) -> str | None:
        """Whom to fetch from: the leader if known, else any other member."""
        lid = self.raft.leader_id
        if lid is not None and lid != self.node_id:
            return lid
        others = [p for p in self.members if p != self.node_id]
        return self._rng.choice(others) if others else None

    async def _fill(self, rs: ReplicaState) -> None:
        """Bring the store to ``rs``'s shape from peers' stores, batch by batch,
        then let the held entries apply.  Returns early if another snapshot
        is installed meanwhile (the loop starts over with it).  The next batch
        is fetched while one is stored (at most three batches in memory)."""
        store = self.store
        stats = self.catchup.stats
        t0 = trio.current_time()
        end = rs.shape.last_seq
        nxt = reconcile(store, rs.shape)
        fetched = 0
        send, recv = trio.open_memory_channel[tuple[list[StoredMsg], str]](1)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._fetcher, rs, nxt, end, send)
            async with recv:
                async for msgs, src in recv:
                    if self.rfsm.hole is not rs:
                        nursery.cancel_scope.cancel()
                        return
                    n = install_batch(store, msgs, end)
                    fetched += n
                    stats.batches += 1
                    stats.fetched_msgs += n
                    stats.fetched_bytes += sum(len(m.payload) + len(m.headers) for m in msgs)
                    stats.sources[src] = stats.sources.get(src, 0) + 1
                    await trio.lowlevel.checkpoint()
        if self.rfsm.hole is not rs:
            return
        finish(store, rs.shape)
        store.sync()
        if self.rfsm.hole_filled(rs):
            stats.catchups += 1
            stats.last_s = trio.current_time() - t0
            st = store.state()
            log.info(
                "event=catchup_done group=%s index=%d msgs_fetched=%d seconds=%.3f "
                "store=%d..%d/%d want=%d..%d/%d",
                self.group_id,
                rs.index,
                fetched,
                stats.last_s,
                st.first_seq,
                st.last_seq,
                st.msgs,
                rs.shape.first_seq,
                rs.shape.last_seq,
                rs.shape.msgs,
            )
            self.raft.kick()

    def status(self) -> dict[str, Any]:
        doc = self.raft.status()
        c = self.catchup.stats
        doc["catchup"] = {
            "hole": self.rfsm.hole is not None,
            "catchups": c.catchups,
            "fetched_msgs": c.fetched_msgs,
            "batches": c.batches,
            "served_batches": c.served_batches,
            "retries": c.retries,
            "last_s": round(c.last_s, 3),
        }
        return doc
