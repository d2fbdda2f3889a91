"""A replicated stream's real state machine under the deterministic Raft simulator.

Theory of operation
-------------------
:class:`StreamSimulation` is :class:`chaos.sim.Simulation` with the toy state
machine swapped for what a stream group runs: ``cluster.replicated.ReplicatedStreamFSM``
over ``StreamStateMachine`` over a ``MemoryStreamStore`` per member that
outlives the member's crashes, like a file store synced at its applied mark
(the member restarts skipping through the index its store holds, as
``restore_to_mark`` makes it); a crash with the others all up and whole
sometimes also *wipes* the store (a replaced disk, a brand-new replica): that
member comes back from the latest state snapshot plus the journal, and fills
the snapshot's messages from a peer's store.  The simulator's faults are unchanged -- crashes (also mid-cycle, with
torn journals), restarts, partitions, drops, duplicates, reordering,
leadership transfers, forced compaction (every ``compaction_entries``) -- so
snapshots are taken, sent and installed, and replicas with holes catch up.

Catch-up runs the same pure steps the trio shell runs (``cluster.replica_state``:
``reconcile``, ``install_batch``, ``finish``; ``cluster.catchup.read_batch``):
one bounded batch per step from the leader's store, only while the network
lets the two talk; meanwhile the member holds its applies and never campaigns
(``raft.core``).

Workload (proposed at the leader, as the node captures on the leader only):
publishes of one to four messages with a unique ``Nats-Msg-Id`` (a share are
retries of an acknowledged id: they must come back as duplicates of the same
sequence), message deletes, a consumer's deliveries and acks.

Checks, besides the simulator's Raft safety checks:

* **state machine safety** -- members at the same applied index (and without
  a hole) have the same store (a hash chain over sequence, subject and
  payload of every live message, plus first/last sequence) and the same
  consumer table;
* **no sequence assigned twice** -- an acknowledged publish and its retries
  share one sequence; two values are never acknowledged at one sequence;
* **no acknowledged message lost** -- after settling, every acknowledged
  publish is at its sequence on every member that applied as far (unless the
  workload deleted that sequence);
* **convergence** -- members that applied the same index agree; lagging
  members are liveness, as in the simulator.

CLI: ``python -m chaos.sim --workload stream --seeds 200``.
"""

from __future__ import annotations

import hashlib
from typing import Any

from chaos.sim import SimConfig, Simulation
from cluster.catchup import read_batch
from cluster.consumer_model import ConsumerConfig
from cluster.consumer_table import config_bytes
from cluster.ops import (
    ConsumerAcked,
    ConsumerAssign,
    ConsumerDelivered,
    DeleteMsg,
    Publish,
    StreamMsg,
    StreamPolicy,
    encode_op,
)
from cluster.replica_state import ReplicaState, finish, install_batch, reconcile
from cluster.replicated import ReplicatedStreamFSM
from cluster.stream_fsm import StreamStateMachine
from cluster.stream_fsm.results import ApplyOutcome, PubResult
from raft.core import Proposal, RaftCore
from raft.errors import RaftError
from raft.fsm import StateMachine
from store.limits import StreamLimits
from store.memory import MemoryStreamStore

__all__ = ["StreamSimulation"]

T0 = 1_700_000_000 * 1_000_000_000
POLICY = StreamPolicy(name="SIM", duplicate_window_ns=3600 * 10**9)
CONSUMER = ConsumerConfig.from_dict({"durable_name": "D", "ack_policy": "explicit"})
#: catch-up batches in the simulation (small, so a catch-up takes several)
BATCH_MSGS = 16
BATCH_BYTES = 2048


class StreamSimulation(Simulation):
    """One seeded run of a stream group (see the module docstring)."""

    #: calibration of the checks: catch-up drops the first message of each batch
    lossy_catchup = False

    def __init__(self, seed: int, cfg: SimConfig | None = None) -> None:
        #: msg id -> acknowledged sequence
        self.acked_seq: dict[bytes, int] = {}
        #: sequence -> msg id acknowledged there
        self.seq_owner: dict[int, bytes] = {}
        self.deleted: set[int] = set()
        self.inflight: dict[int, tuple[bytes, ...]] = {}
        self.n_msgs = 0
        self.dseq = 0
        #: member -> (the hole being filled, the next sequence to fetch)
        self.filling: dict[str, tuple[ReplicaState, int]] = {}
        self.catchups = 0
        self.wipes = 0
        #: member -> its store (outlives crashes) and the index it holds
        self.stores: dict[str, MemoryStreamStore] = {}
        self.marks: dict[str, int] = {}
        self._starting = "?"
        #: member -> the applied index from which its state is exact again
        self.exact_from: dict[str, int] = {}
        #: (member's machine, applied index, last seq, msgs) -> its digest
        self._digests: dict[tuple[int, int, int, int], object] = {}
        super().__init__(seed, cfg)

    # ------------------------------------------------------------ hooks

    def new_fsm(self) -> StateMachine:
        nid = self._starting
        store = self.stores.setdefault(nid, MemoryStreamStore(StreamLimits()))
        fsm = StreamStateMachine(store, POLICY)
        fsm.recover_from_store()  # as cluster.streams.Stream does
        return ReplicatedStreamFSM(fsm, self.marks.get(nid, 0))

    def start(self, nid: str) -> None:
        self.filling.pop(nid, None)
        self.exact_from.pop(nid, None)
        self._starting = nid
        super().start(nid)

    def crash(self, nid: str, mid_cycle: bool) -> None:
        core = self.cores.get(nid)
        if core is None:
            return
        whole = len(self.up()) == len(self.ids) and all(
            self.rfsm(c).hole is None for _, c in self.up()
        )
        super().crash(nid, mid_cycle)
        rf = self.rfsm(core)
        # a store with a hole is kept, short: the snapshot's install at restart
        # finds the hole again (its mark is not moved while it lasts)
        self.marks[nid] = rf.applied if rf.hole is None else 0
        if whole and self.fault_rng.random() < 0.3:
            self.stores.pop(nid, None)
            self.marks.pop(nid, None)
            self.wipes += 1

    @staticmethod
    def rfsm(core: RaftCore) -> ReplicatedStreamFSM:
        fsm = core.fsm
        assert isinstance(fsm, ReplicatedStreamFSM)
        return fsm

    def fsm_state(self, core: RaftCore) -> object:
        rf = self.rfsm(core)
        if (
            rf.hole is not None
            or core.last_applied < rf.skip_through
            or core.last_applied < self.exact_from.get(core.node_id, 0)
        ):
            # filling a hole; replaying entries its store already holds; or
            # filled from a source that had applied further (a message deleted
            # there since the snapshot is skipped): the state is that of its
            # applied index once it applied as far
            return None
        st = rf.fsm.store.state()
        key = (id(rf), core.last_applied, st.last_seq, st.msgs)
        d = self._digests.get(key)
        if d is None:
            if len(self._digests) > 4096:
                self._digests.clear()
            d = self._digests[key] = self.digest(rf)
        return d

    def digest(self, rf: ReplicatedStreamFSM) -> object:
        store = rf.fsm.store
        st = store.state()
        h = hashlib.blake2b(digest_size=16)
        seq = st.first_seq
        while True:
            run = store.load_run(seq, 256)
            if not run:
                break
            for m in run:
                h.update(b"%d|%s|" % (m.seq, m.subject.encode()) + m.payload + b"\n")
            seq = run[-1].seq + 1
        cons = [(n, e.fsm.state()) for n, e in sorted(rf.consumers.entries.items())]
        return (st.first_seq, st.last_seq, st.msgs, h.hexdigest(), repr(cons))

    # ------------------------------------------------------------ catch-up

    def catch_up(self) -> None:
        """One bounded batch for every member with a hole, from the leader."""
        leader = self.leader()
        for nid, core in self.up():
            rf = self.rfsm(core)
            rs = rf.hole
            if rs is None:
                self.filling.pop(nid, None)
                continue
            if leader is None or leader is core or self.rfsm(leader).hole is not None:
                continue
            blocked = self.net.faults.blocked
            if (nid, leader.node_id) in blocked or (leader.node_id, nid) in blocked:
                continue
            store = rf.fsm.store
            cur = self.filling.get(nid)
            if cur is None or cur[0] is not rs:
                cur = (rs, reconcile(store, rs.shape))
            nxt = cur[1]
            end = rs.shape.last_seq
            if nxt <= end:
                src = self.rfsm(leader).fsm.store
                msgs, nxt = read_batch(src, nxt, end, BATCH_MSGS, BATCH_BYTES)
                if self.lossy_catchup and msgs:
                    msgs = msgs[1:]  # calibration: a catch-up that drops a message
                install_batch(store, msgs, end)
                self.exact_from[nid] = max(self.exact_from.get(nid, 0), leader.last_applied)
            if nxt > end:
                finish(store, rs.shape)
                rf.hole_filled(rs)
                self.filling.pop(nid, None)
                self.catchups += 1
            else:
                self.filling[nid] = (rs, nxt)

    def step(self, end: float) -> None:
        self.catch_up()
        super().step(end)

    # ------------------------------------------------------------ workload

    def client(self) -> None:
        leader = self.leader()
        if leader is None or self.rfsm(leader).hole is not None:
            return
        r = self.client_rng
        now = T0 + int(self.t * 1e9)
        k = r.random()
        live = [mid for mid, seq in self.acked_seq.items() if seq not in self.deleted]
        if k < 0.08 and live:
            # a retry of an acknowledged id (not of a deleted message: a replica that
            # restarts rebuilds its dedupe window from its store's messages, as
            # nats-server does, so the id of a deleted message is not known there)
            ids = (r.choice(sorted(live)),)
            op: Any = StreamMsg(tuple(self._pub(i, now) for i in ids))
        elif k < 0.14:
            st = self.rfsm(leader).fsm.store.state()
            if st.msgs == 0:
                return
            seq = r.randint(st.first_seq, st.last_seq)
            self.deleted.add(seq)
            op, ids = DeleteMsg(seq, erase=False), ()
        elif k < 0.22:
            self.dseq += 1
            if self.dseq == 1:
                op = ConsumerAssign("D", config_bytes(CONSUMER), now, "C-R3F-sim", 1)
            elif r.random() < 0.5:
                op = ConsumerDelivered("D", (self.dseq,), now)
            else:
                op = ConsumerAcked("D", (self.dseq - 1,), (self.dseq - 1,), now)
            ids = ()
        else:
            ids = []
            for _ in range(r.randint(1, 4)):
                self.n_msgs += 1
                ids.append(b"%d-%d" % (self.seed, self.n_msgs))
            ids = tuple(ids)
            op = StreamMsg(tuple(self._pub(i, now) for i in ids))
        try:
            p = leader.propose(encode_op(op))
        except (RaftError, ValueError):
            return
        self.inflight[id(p)] = ids
        p.on_done = self._on_done

    def _pub(self, mid: bytes, now: int) -> Publish:
        hdr = b"NATS/1.0\r\nNats-Msg-Id: " + mid + b"\r\n\r\n"
        n = int(mid.rsplit(b"-", 1)[1])
        return Publish(f"sim.{n % 5}", hdr, b"v" + mid + b"x" * (n % 7) * 20, now)

    def _on_done(self, p: Proposal) -> None:
        ids = self.inflight.pop(id(p), ())
        if p.error is not None or not isinstance(p.result, ApplyOutcome) or not ids:
            return
        for mid, res in zip(ids, p.result.results, strict=False):
            if not isinstance(res, PubResult):
                continue
            seq = int(res.seq)
            had = self.acked_seq.get(mid)
            if had is not None and had != seq:
                self.violation(f"msg id {mid!r} acknowledged at {had} and again at {seq}")
            owner = self.seq_owner.get(seq)
            if owner is not None and owner != mid:
                self.violation(f"sequence {seq} assigned to {owner!r} and to {mid!r}")
            self.acked_seq[mid] = seq
            self.seq_owner[seq] = mid

    # ------------------------------------------------------------ final checks

    def final_checks(self) -> None:
        up = self.up()
        best = max(up, key=lambda ic: ic[1].last_applied)[1]
        want = self.digest(self.rfsm(best))
        store = self.rfsm(best).fsm.store
        for mid, seq in sorted(self.acked_seq.items(), key=lambda kv: kv[1]):
            if seq in self.deleted:
                continue
            try:
                m = store.load(seq)
            except Exception:
                m = None
            if m is None or not m.payload.startswith(b"v" + mid):
                self.violation(f"acknowledged {mid!r} at {seq} lost on {best.node_id}")
                break
        for nid, core in up:
            rf = self.rfsm(core)
            if rf.hole is not None or core.last_applied != best.last_applied:
                self.result.liveness.append(
                    f"{nid} applied {core.last_applied} != {best.last_applied} "
                    f"(hole: {rf.hole is not None}) after settling"
                )
                continue
            if self.digest(rf) != want:
                self.violation(f"{nid} differs from {best.node_id} at applied {core.last_applied}")
        self.result.acked = len(self.acked_seq)
        self.result.snapshots = sum(c.snapshots.taken + c.snapshots.installed for _, c in up)
        self.result.catchups = self.catchups
