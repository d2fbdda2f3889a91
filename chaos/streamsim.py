"""A replicated stream's real state machine under the deterministic Raft simulator.

Theory of operation
-------------------
:class:`StreamSimulation` is :class:`chaos.sim.Simulation` with the toy state
machine swapped for ``cluster.replicated.ReplicatedStreamFSM`` over a
``StreamStateMachine`` and a memory store, and the toy workload for
publishes (``StreamMsg`` batches proposed at any member).  The simulator's
faults stay: crashes (also mid-cycle, losing un-synced journal records, torn
at a random byte), restarts, partitions, drops, duplicates, reordering,
leadership transfers and log compaction, which for a stream group is the
*state* snapshot (``cluster.stream_snapshot``) -- so members that fall behind
the leader's snapshot install it and fill the hole by the catch-up protocol
(``cluster.catchup``), carried by the simulated network on the group's
catch-up channel (lost, duplicated, reordered like everything else).

Members run the trio driver's order: cycle, fsync, send, *then* apply.  The
store is durable: a member's store survives its crash, and its applied mark
is taken after every cycle (store synced, mark written), so a restart skips
what the store holds.  One more fault: a member's store may be *lost* (a
replaced disk; never on more than one member at a time): it restarts empty,
installs its own snapshot and fetches everything from the leader.

Checks, besides the simulator's Raft safety checks:

* **no acknowledged message lost** -- every publish whose proposal returned a
  sequence is at that sequence, with its payload, on the most advanced member
  after settling, and on every member that applied as far;
* **no sequence assigned twice** -- two different acknowledged publishes never
  share a sequence;
* **replicas equal at equal applied index** -- members that are current (no
  hole) and applied the same Raft index hold the same ``(last_seq, msgs)``
  and the same hash chain over ``(seq, subject, payload)`` of every message
  stored (kept incrementally by the store);
* **a replica with a hole never leads**;
* **no proposal forgotten** -- every publish batch proposed on a member that
  is still running after settling has been resolved (committed, or failed
  with an error its proposer can answer or retry): a proposal whose entry a
  snapshot install skipped, or that a leader change left waiting, would
  leave its publishers without any answer.

CLI: ``python -m chaos.sim --workload stream --seeds 200``.
"""

from __future__ import annotations

import hashlib
from typing import Any

from chaos.sim import SimConfig, Simulation
from cluster import catchup
from cluster.ops import Publish, StreamMsg, StreamPolicy, decode_any, encode_op
from cluster.replicated import ReplicatedStreamFSM
from cluster.stream_fsm import ApplyOutcome, PubResult, StreamStateMachine
from raft.core import RaftCore
from raft.errors import RaftError
from raft.fsm import StateMachine
from raft.proposal import Proposal
from raft.wire import encode_frame
from store.api import StoredMsg
from store.memory import MemoryStreamStore

__all__ = ["ChainStore", "StreamSimulation"]

T0 = 1_700_000_000 * 1_000_000_000
#: a catch-up request unanswered this long (sim time) is asked again
CATCHUP_TIMEOUT_S = 0.2
#: small batches, so a catch-up takes several round trips under faults
CATCHUP_BATCH_MSGS = 16


class ChainStore(MemoryStreamStore):
    """A memory store that keeps a hash chain over every append, in sequence order.

    Appends happen in sequence order whether they come from apply or from
    catch-up, so two stores that stored the same messages have equal chains.
    """

    def __init__(self) -> None:
        super().__init__()
        self.chain = b""

    def append(self, subject: str, headers: bytes, payload: bytes, ts_ns: int, **kw: Any) -> Any:
        seq, ts = super().append(subject, headers, payload, ts_ns, **kw)
        h = hashlib.blake2b(self.chain, digest_size=16)
        h.update(b"%d|%s|" % (seq, subject.encode()))
        h.update(payload)
        self.chain = h.digest()
        return seq, ts


class StreamSimulation(Simulation):
    """One seeded run of a replicated stream (see the module docstring)."""

    def __init__(self, seed: int, cfg: SimConfig | None = None) -> None:
        self.stores: dict[str, ChainStore] = {}
        self.marks: dict[str, int] = {}
        self.rfsms: dict[str, ReplicatedStreamFSM] = {}
        #: payload -> acknowledged sequence
        self.acked_seq: dict[bytes, int] = {}
        self.seq_owner: dict[int, bytes] = {}
        #: member -> (request id, sent at) of its outstanding catch-up request
        self.pending_req: dict[str, tuple[int, float]] = {}
        self.req_ids = 0
        self.catchups = 0
        self.store_losses = 0
        #: every publish proposal with the core (incarnation) it was made on
        self.proposals: list[tuple[RaftCore, Proposal]] = []
        super().__init__(seed, cfg)

    # ------------------------------------------------------------ hooks

    def start(self, nid: str) -> None:
        self._starting = nid
        if nid not in self.stores:
            self.stores[nid] = ChainStore()
            self.marks[nid] = 0
        super().start(nid)

    def new_fsm(self) -> StateMachine:
        nid = self._starting
        store = self.stores[nid]
        rfsm = ReplicatedStreamFSM(StreamStateMachine(store, StreamPolicy("S")), self.marks[nid])
        self.rfsms[nid] = rfsm
        return rfsm

    def fsm_state(self, core: RaftCore) -> object:
        rfsm = self.rfsms[core.node_id]
        if not rfsm.current or rfsm.last_index < rfsm.skip_through:
            # a hole, or replaying entries the store already holds (it is ahead
            # of the applied index): not comparable until done
            return None
        store = self.stores[core.node_id]
        st = store.state()
        return (st.last_seq, st.msgs, store.chain)

    def run_cycle(self, nid: str, core: RaftCore) -> None:
        """The trio driver's order: cycle, fsync, send, apply, release; then the
        store is synced and the applied mark written."""
        for _ in range(8):
            ready = core.cycle(defer_apply=True)
            self.send(nid, ready.early_outbox)
            ready.sync()
            self.send(nid, ready.outbox)
            ready.apply()
            ready.release()
            if ready.leadership is not None and ready.leadership.is_leader:
                self.result.elections += 1
                if not self.rfsms[nid].current:
                    self.violation(f"{nid} leads with a hole")
            self.count_quiet(nid, core)
            if not ready.more:
                break
        rfsm = self.rfsms[nid]
        if rfsm.current:
            self.marks[nid] = rfsm.applied

    def crash(self, nid: str, mid_cycle: bool) -> None:
        core = self.cores[nid]
        if core is None:
            return
        if mid_cycle:
            ready = core.cycle(defer_apply=True)  # never synced, never applied
            self.send(nid, ready.early_outbox)
        self.disks[nid].crash(self.fault_rng)
        self.cores[nid] = None
        self.pending_req.pop(nid, None)
        self.result.crashes += 1
        self.restart_at[nid] = self.t + self.fault_rng.uniform(0.05, 1.0)
        # a replaced disk: the store starts empty (only while every other
        # member is up and current, so the data lives on elsewhere)
        others_fine = all(
            self.cores[n] is not None and self.rfsms[n].current for n in self.ids if n != nid
        )
        if others_fine and self.fault_rng.random() < 0.15:
            self.stores[nid] = ChainStore()
            self.marks[nid] = 0
            self.store_losses += 1

    # ------------------------------------------------------------ workload

    def client(self) -> None:
        up = self.up()
        if not up:
            return
        r = self.client_rng
        _nid, core = up[r.randrange(len(up))]
        n = 1 if r.random() < 0.7 else r.randint(2, 8)
        pubs = []
        for _ in range(n):
            self.value_counter += 1
            v = f"{self.seed}-{self.value_counter}".encode()
            pubs.append(Publish(f"s.{self.value_counter % 5}", None, v, T0 + self.value_counter))
        try:
            p = core.propose(encode_op(StreamMsg(tuple(pubs))))
        except RaftError:
            return
        p.on_done = self._on_done
        self.proposals.append((core, p))

    def _on_done(self, p: Proposal) -> None:
        if p.error is not None or not isinstance(p.result, ApplyOutcome):
            return
        op: Any = decode_any(p.data)
        for pub, res in zip(op.msgs, p.result.results, strict=True):
            if not isinstance(res, PubResult) or res.duplicate:
                continue
            owner = self.seq_owner.setdefault(res.seq, pub.payload)
            if owner != pub.payload:
                self.violation(f"seq {res.seq} assigned twice: {owner!r} and {pub.payload!r}")
            self.acked_seq[pub.payload] = res.seq
            self.acked[pub.payload] = res.seq

    # ------------------------------------------------------------ catch-up over the network

    def step(self, end: float) -> None:
        super().step(end)
        for nid, core in self.up():
            rfsm = self.rfsms[nid]
            if rfsm.current or rfsm.target is None:
                continue
            if self.stores[nid].state().last_seq >= rfsm.target.last_seq:
                self._filled(nid, core)
                continue
            req = self.pending_req.get(nid)
            leader = core.leader_id
            if leader is None or leader == nid:
                continue
            if req is not None and self.t - req[1] < CATCHUP_TIMEOUT_S:
                continue
            self.req_ids += 1
            have = self.stores[nid].state().last_seq
            body = b"Q" + catchup.encode_request(self.req_ids, have + 1, rfsm.target.last_seq)
            self.net.send(nid, leader, encode_frame(catchup.channel("sim"), body), self.t)
            self.pending_req[nid] = (self.req_ids, self.t)

    def deliver(self, src: str, dst: str, gid: str, payload: bytes) -> bool:
        """Catch-up frames (True); Raft frames go to the member's core."""
        if gid != catchup.channel("sim"):
            return False
        core = self.cores.get(dst)
        if core is None:
            return True
        kind, body = payload[:1], payload[1:]
        if kind == b"Q":
            if not self.rfsms[dst].current:
                return True
            rid, a, b = catchup.decode_request(body)
            through, msgs = catchup.serve_batch(self.stores[dst], a, b, msgs_max=CATCHUP_BATCH_MSGS)
            reply = b"A" + catchup.encode_reply(rid, through, msgs)
            self.net.send(dst, src, encode_frame(gid, reply), self.t)
            return True
        rid, through, got = catchup.decode_reply(body)
        req = self.pending_req.get(dst)
        rfsm = self.rfsms[dst]
        if req is None or req[0] != rid or rfsm.target is None:
            return True  # stale or duplicated
        del self.pending_req[dst]
        self._install(dst, through, got)
        return True

    def _install(self, nid: str, through: int, msgs: list[StoredMsg]) -> None:
        catchup.install_batch(self.stores[nid], through, msgs)

    def _filled(self, nid: str, core: RaftCore) -> None:
        rfsm = self.rfsms[nid]
        rfsm.filled()
        self.marks[nid] = rfsm.applied
        self.pending_req.pop(nid, None)
        self.catchups += 1

    # ------------------------------------------------------------ final checks

    def final_checks(self) -> None:
        up = [(n, c) for n, c in self.up() if self.rfsms[n].current]
        if not up:
            self.result.liveness.append("no current member after settling")
            return
        best_nid, best = max(up, key=lambda ic: ic[1].last_applied)
        store = self.stores[best_nid]
        for v, seq in sorted(self.acked_seq.items(), key=lambda kv: kv[1]):
            try:
                m = store.load(seq)
            except Exception as e:
                self.violation(f"acknowledged {v!r} at {seq} lost on {best_nid}: {e!r}")
                break
            if m.payload != v:
                self.violation(f"acknowledged {v!r} at {seq}: {best_nid} holds {m.payload!r}")
                break
        ref = [(m.seq, m.subject, m.payload) for m in store.load_run(1, 10**9)]
        for nid, core in self.up():
            if not self.rfsms[nid].current:
                self.result.liveness.append(f"{nid} still has a hole after settling")
                continue
            mine = [(m.seq, m.subject, m.payload) for m in self.stores[nid].load_run(1, 10**9)]
            if mine != ref[: len(mine)]:
                self.violation(f"stored messages of {nid} are not a prefix of {best_nid}'s")
            if core.last_applied != best.last_applied:
                self.result.liveness.append(
                    f"{nid} applied {core.last_applied} != {best.last_applied} after settling"
                )
        running = {id(c) for _, c in self.up()}
        forgotten = [p for c, p in self.proposals if id(c) in running and not p.done]
        if forgotten:
            self.violation(f"{len(forgotten)} proposals never resolved on running members")
        self.result.acked = len(self.acked_seq)
        self.result.counts = {
            "unresolved": len(forgotten),
            "dropped": sum(1 for c, p in self.proposals if p.done and p.error is not None),
            "catchups": self.catchups,
            "store_losses": self.store_losses,
            "installs": sum(r.installs for r in self.rfsms.values()),
            "quiesced": self.quiesced,
        }
        self.result.snapshots = sum(c.snapshots.taken + c.snapshots.installed for _, c in up)
