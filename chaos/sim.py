"""Deterministic simulator of a pysyncobj Raft group, with Raft safety checks.

Theory of operation
-------------------
N members (:class:`raft.core.RaftCore`, the same code the trio driver runs)
live in one thread on a fake clock. The network is :class:`chaos.net.SimNetwork`
carrying the *encoded* frames; disks are :class:`raft.storage.MemoryDisk`.
Everything random — election timeouts, delays, faults, the client workload —
is drawn from RNGs derived from one seed, so a seed replays exactly.

Each step jumps the clock to the next event (a frame arriving, a member's
timer, a scheduled fault or client request), delivers due frames, runs one
cycle on every member that has work or a due timer (``cycle``, fsync,
send, release — the driver's order), then checks:

* **election safety** — at most one leader per term;
* **leader completeness** — a new leader holds every committed entry;
* **committed entries never change** — an entry at or below a member's
  commit index equals the one recorded as committed at that index;
* **log matching** — entries with equal (index, term) have equal commands and
  equal previous terms (inductively: equal prefixes);
* **state machine safety** — equal applied index ⇒ equal state (hash chain).

At the end the network heals, crashed members restart, the workload stops and
the group settles; then every *acknowledged* proposal must sit at its
acknowledged position on the most advanced member, and every member's applied
values must be a prefix of it.

Faults, as data: drop, duplicate, delay/reorder, partitions (isolate one,
one-way), crash (optionally in the middle of a cycle: the cycle's un-synced
journal records are lost, torn at a random byte) and restart from durable
state, leadership transfer, forced log compaction.

The replicated state machine and its workload are hooks (``new_fsm``,
``fsm_state``, ``client``, ``final_checks``): ``--workload meta`` runs the
real meta state machine under the same faults (``chaos.metasim``),
``--workload stream`` a replicated stream's (``chaos.streamsim``).

A leader's journal write may lag, as the trio driver's does (``raft.driver``:
a leader goes on cycling while its own fsync is in flight): with probability
``leader_write_lag`` a leader's cycle that has nothing but append-entries to
send leaves its records unsynced, for a later cycle's sync; meanwhile the
followers' acknowledgements may commit (the leader counts itself only up to
its durable index).  A crash then loses those records, or keeps a torn part of
them (a write that had started).

``--stock`` turns off raft/'s pysyncobj workarounds to show what they fix;
``--unsafe-send-before-fsync`` seeds the "acknowledge before fsync" bug and
``--unsafe-leader-counts-unsynced`` the "a leader counts its own unsynced
entries towards a majority" bug, to show the checker catches them.

CLI: ``python -m chaos.sim --seeds 200`` (ends with ``N seeds, V violations``),
``python -m chaos.sim --seed 1234`` replays one seed.
"""

from __future__ import annotations

import argparse
import logging
import random
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from chaos.net import Faults, SimNetwork, decode_one_frame
from chaos.toyfsm import ToyStateMachine
from raft.config import RaftConfig
from raft.core import RaftCore
from raft.errors import RaftError
from raft.fsm import StateMachine
from raft.liveness import BEAT_S, PING_GROUP, SILENCE_S, PeerLiveness
from raft.proposal import Proposal
from raft.storage import MemoryDisk
from raft.syncobj import PATCHES
from raft.wire import encode_frame

__all__ = [
    "SimConfig",
    "SimResult",
    "Simulation",
    "main",
    "make_simulation",
    "run_seed",
    "run_seeds",
]

GROUP = "sim"


@dataclass
class SimConfig:
    nodes: int = 3
    duration_s: float = 3.0
    settle_s: float = 3.0
    stock: bool = False
    without: frozenset[str] = frozenset()  # individual workarounds to disable
    unsafe_send_before_fsync: bool = False
    #: probability that a leader's cycle leaves its journal records to a later sync
    leader_write_lag: float = 0.5
    #: seeded bug: a lagging leader counts its unsynced entries (no durable cap)
    unsafe_leader_counts_unsynced: bool = False
    compaction_entries: int = 40
    client_interval_s: float = 0.02
    fault_interval_s: tuple[float, float] = (0.15, 0.6)
    workload: str = "toy"  # "meta": chaos.metasim; "stream": chaos.streamsim
    #: hibernation of an idle group (raft.quiet); None: heartbeat forever
    quiet_after_s: float | None = 0.2
    #: probability that the client pauses (a lull: the group may hibernate)
    lull: float = 0.015
    lull_s: tuple[float, float] = (0.3, 1.0)
    #: a leader sends a new entry at once only to the followers a majority
    #: needs, the others at most this much later (stream groups: 0.02)
    lazy_follower_s: float | None = None
    #: a leader announces a new commit index with the next entries or at most
    #: this much later (stream groups: 0.02); None: at once
    commit_notify_s_max: float | None = None


@dataclass
class SimResult:
    seed: int
    violations: list[str] = field(default_factory=list)
    liveness: list[str] = field(default_factory=list)
    acked: int = 0
    steps: int = 0
    elections: int = 0
    crashes: int = 0
    snapshots: int = 0
    #: workload-specific counters (e.g. the stream workload's catch-ups)
    counts: dict[str, int] = field(default_factory=dict)

    def replay(self, cfg: SimConfig) -> str:
        flags = " --stock" if cfg.stock else ""
        flags += "".join(f" --without {p}" for p in sorted(cfg.without))
        if cfg.unsafe_send_before_fsync:
            flags += " --unsafe-send-before-fsync"
        if cfg.unsafe_leader_counts_unsynced:
            flags += " --unsafe-leader-counts-unsynced"
        if cfg.leader_write_lag != SimConfig.leader_write_lag:
            flags += f" --leader-write-lag {cfg.leader_write_lag}"
        if cfg.workload != "toy":
            flags += f" --workload {cfg.workload}"
        if cfg.quiet_after_s is None:
            flags += " --no-quiet"
        if cfg.lazy_follower_s is not None:
            flags += f" --lazy-follower {cfg.lazy_follower_s}"
        if cfg.commit_notify_s_max is not None:
            flags += f" --commit-notify {cfg.commit_notify_s_max}"
        return f"python -m chaos.sim --seed {self.seed}{flags}"


class Simulation:
    """One seeded run."""

    def __init__(self, seed: int, cfg: SimConfig | None = None) -> None:
        self.seed = seed
        self.cfg = cfg or SimConfig()
        self.rng = random.Random(seed)
        self.fault_rng = random.Random(self.rng.getrandbits(64))
        self.client_rng = random.Random(self.rng.getrandbits(64))
        self.lull_rng = random.Random(seed * 7919 + 1)  # leaves the other draws alone
        self.lag_rng = random.Random(seed * 7919 + 2)
        self.net = SimNetwork(random.Random(self.rng.getrandbits(64)), Faults())
        self.ids = [f"n{i}" for i in range(self.cfg.nodes)]
        self.t = 0.0
        self.disks = {i: MemoryDisk() for i in self.ids}
        self.cores: dict[str, RaftCore | None] = {i: None for i in self.ids}
        self.restart_at: dict[str, float] = {}
        self.raft_config = RaftConfig(
            log_compaction_entries_min=self.cfg.compaction_entries,
            log_compaction_s_min=1e9,
            patches=frozenset() if self.cfg.stock else RaftConfig().patches - self.cfg.without,
            snapshot_chunk_bytes=512,
            # lost forwards are given up within the settling time (3 s), so
            # the stream workload's "no proposal forgotten" check can see them
            forward_reply_s_max=0.8,
            watch_s_max=1.5,
            quiet_after_s=self.cfg.quiet_after_s,
            lazy_follower_s=self.cfg.lazy_follower_s,
            commit_notify_s_max=self.cfg.commit_notify_s_max,
        )
        # link liveness (raft.liveness): pings, silence, link down/up events
        self.live: dict[str, PeerLiveness] = {i: PeerLiveness(SILENCE_S) for i in self.ids}
        self.next_ping = BEAT_S
        self.result = SimResult(seed)
        # checker state
        self.leaders: dict[int, str] = {}
        self.completeness_checked: set[tuple[int, str]] = set()
        self.logmap: dict[tuple[int, int], tuple[bytes, int | None]] = {}
        self.committed: dict[int, tuple[int, bytes]] = {}
        self.checked_commit: dict[str, int] = {}
        self.applied: dict[int, object] = {}
        self.acked: dict[bytes, int] = {}
        self.value_counter = 0
        self.next_client = 0.05
        self.next_fault = self.fault_rng.uniform(*self.cfg.fault_interval_s)
        self.clients_on = True
        self.faults_on = True
        self.lazy: dict[str, int] = {}
        self._quiesced_seen: dict[str, int] = {}
        self.quiesced = 0
        for i in self.ids:
            self.start(i)

    # ------------------------------------------------------------ members

    def start(self, nid: str) -> None:
        core = RaftCore(
            GROUP,
            nid,
            self.ids,
            self.new_fsm(),
            self.disks[nid],
            self.raft_config,
            now=lambda: self.t,
            rng=random.Random(self.rng.getrandbits(64)),
        )
        core.cap_own_unsynced = not self.cfg.unsafe_leader_counts_unsynced
        self.cores[nid] = core
        live = self.live[nid] = PeerLiveness(SILENCE_S)
        core.quiet_state.heard = live.last_heard
        self._quiesced_seen[nid] = 0
        # the links come up (both sides), unless a partition blocks them
        for other, oc in self.up():
            if other != nid and not self.net.is_blocked(nid, other):
                live.heard(other, self.t)
                self.live[other].heard(nid, self.t)
                oc.peer_event(nid)
        self.checked_commit[nid] = 0
        core.journal.take_changed_from()
        self.check_log_matching(nid, core, from_idx=core.journal.first_index)

    def new_fsm(self) -> StateMachine:
        """A fresh state machine for a member (re)starting."""
        return ToyStateMachine()

    def fsm_state(self, core: RaftCore) -> object:
        """A comparable summary of a member's applied state (state machine safety)."""
        fsm = core.fsm
        assert isinstance(fsm, ToyStateMachine)
        return (len(fsm.values), fsm.chain)

    def deliver(self, src: str, dst: str, gid: str, payload: bytes) -> bool:
        """A frame for another channel than the group's (True: taken care of)."""
        return False

    def crash(self, nid: str, mid_cycle: bool) -> None:
        core = self.cores[nid]
        if core is None:
            return
        if mid_cycle:
            ready = core.cycle()  # journal records of this cycle are never synced
            self.send(nid, ready.early_outbox)  # a leader's append-entries go first
            if self.cfg.unsafe_send_before_fsync:
                self.send(nid, ready.outbox)
        pending = core.journal.take_pending() if core.journal.dirty else b""
        if pending and self.lag_rng.random() < 0.5:  # a lagging write had started
            self.disks[nid].append(core.journal.name, pending)
        self.disks[nid].crash(self.fault_rng)
        self.cores[nid] = None
        for _other, oc in self.up():  # its sockets close: the links go down at once
            oc.peer_event(nid)
        self.result.crashes += 1
        self.restart_at[nid] = self.t + self.fault_rng.uniform(0.05, 1.0)

    def up(self) -> list[tuple[str, RaftCore]]:
        return [(i, c) for i, c in self.cores.items() if c is not None]

    def leader(self) -> RaftCore | None:
        for _, c in self.up():
            if c.is_leader:
                return c
        return None

    def send(self, src: str, outbox: Iterable[tuple[str, bytes]]) -> None:
        for peer, payload in outbox:
            self.net.send(src, peer, encode_frame(GROUP, payload), self.t)

    def run_cycle(self, nid: str, core: RaftCore) -> None:
        for _ in range(8):
            ready = core.cycle()
            self.send(nid, ready.early_outbox)
            if self.cfg.unsafe_send_before_fsync:
                # seeded bug: acknowledge before fsync, fsync lazily (every 10th cycle)
                self.send(nid, ready.outbox)
                self.lazy[nid] = self.lazy.get(nid, 0) + 1
                if self.lazy[nid] % 10 == 0:
                    ready.sync()
            elif (
                not ready.outbox
                and core.is_leader
                and core.has_peers
                and self.lag_rng.random() < self.cfg.leader_write_lag
            ):
                pass  # the leader's write lags: its records wait for a later sync
            else:
                ready.sync()
                self.send(nid, ready.outbox)
            ready.release()
            if ready.leadership is not None and ready.leadership.is_leader:
                self.result.elections += 1
            self.count_quiet(nid, core)
            if not ready.more:
                break

    def count_quiet(self, nid: str, core: RaftCore) -> None:
        """Count hibernations (``counts["quiesced"]``)."""
        n = core.quiet_state.quiesced
        self.quiesced += n - self._quiesced_seen.get(nid, 0)
        self._quiesced_seen[nid] = n

    def link_beat(self) -> None:
        """The links' pings (every ``BEAT_S``) and silence reports (raft.liveness)."""
        if self.t >= self.next_ping:
            self.next_ping = self.t + BEAT_S
            for nid, _ in self.up():
                for other in self.ids:
                    if other != nid:
                        self.net.send(nid, other, encode_frame(PING_GROUP, b""), self.t)
        for nid, core in self.up():
            for peer in self.live[nid].newly_silent(self.t):
                core.peer_event(peer)

    # ------------------------------------------------------------ workload and faults

    def client(self) -> None:
        up = self.up()
        if not up:
            return
        n = 1 if self.client_rng.random() < 0.8 else self.client_rng.randint(2, 12)
        _nid, core = up[self.client_rng.randrange(len(up))]
        for _ in range(n):
            self.value_counter += 1
            v = f"{self.seed}-{self.value_counter}".encode()
            try:
                p = core.propose(v)
            except RaftError:
                continue
            p.on_done = self._on_done

    def _on_done(self, p: Proposal) -> None:
        if p.error is None and isinstance(p.result, int):
            self.acked[p.data] = p.result

    def fault(self) -> None:
        r = self.fault_rng
        up = self.up()
        choice = r.random()
        leader = self.leader()
        if choice < 0.04 and up:
            for nid, _ in up:  # coordinated power loss
                self.crash(nid, mid_cycle=r.random() < 0.5)
        elif choice < 0.18 and up:
            nid = leader.node_id if (leader is not None and r.random() < 0.6) else r.choice(up)[0]
            self.crash(nid, mid_cycle=r.random() < 0.5)
        elif choice < 0.33:
            victim = (
                leader.node_id if (leader is not None and r.random() < 0.5) else r.choice(self.ids)
            )
            self.net.isolate(victim, self.ids)
        elif choice < 0.40:
            a, b = r.sample(self.ids, 2)
            self.net.block(a, b)
        elif choice < 0.58:
            self.net.heal()
        elif choice < 0.75:
            f = self.net.faults
            f.drop = r.choice([0.0, 0.0, 0.02, 0.1, 0.25])
            f.duplicate = r.choice([0.0, 0.05, 0.2])
            f.reorder = r.choice([0.0, 0.1, 0.3])
            f.delay_s_max = r.choice([0.002, 0.01, 0.05])
        elif choice < 0.85 and leader is not None:
            p = leader.transfer_leadership()
            p.on_done = None
        elif up:
            r.choice(up)[1].force_log_compaction()

    # ------------------------------------------------------------ checks

    def violation(self, msg: str) -> None:
        if len(self.result.violations) < 20:
            self.result.violations.append(f"t={self.t:.4f}: {msg}")

    def check_log_matching(self, nid: str, core: RaftCore, from_idx: int) -> None:
        j = core.journal
        start = max(from_idx, j.first_index)
        for idx in range(start, j.last_index + 1):
            e = j.entry_at(idx)
            assert e is not None
            cmd, _, term = e
            prev_term = j.term_at(idx - 1)
            key = (idx, term)
            known = self.logmap.get(key)
            if known is None:
                self.logmap[key] = (cmd, prev_term)
                continue
            if known[0] != cmd:
                self.violation(f"log matching: {nid} idx={idx} term={term} has a different command")
            elif prev_term is not None and known[1] is not None and known[1] != prev_term:
                self.violation(
                    f"log matching: {nid} idx={idx} term={term} prev term {prev_term} != {known[1]}"
                )
            elif known[1] is None and prev_term is not None:
                self.logmap[key] = (cmd, prev_term)

    def check(self) -> None:
        for nid, core in self.up():
            j = core.journal
            term = core.term
            if core.is_leader:
                other = self.leaders.setdefault(term, nid)
                if other != nid:
                    self.violation(f"two leaders in term {term}: {other} and {nid}")
                if (term, nid) not in self.completeness_checked:
                    self.completeness_checked.add((term, nid))
                    for idx, (cterm, cmd) in self.committed.items():
                        if idx < j.first_index:
                            continue
                        e = j.entry_at(idx)
                        if e is None or e[2] != cterm or e[0] != cmd:
                            self.violation(
                                f"leader completeness: {nid} leads term {term} "
                                f"without committed entry {idx}"
                            )
                            break
            cf = j.take_changed_from()
            if cf is not None:
                self.check_log_matching(nid, core, cf)
                self.checked_commit[nid] = min(self.checked_commit[nid], cf - 1)
            commit = min(core.commit_index, j.last_index)
            for idx in range(max(self.checked_commit[nid] + 1, j.first_index), commit + 1):
                e = j.entry_at(idx)
                assert e is not None
                rec = self.committed.get(idx)
                if rec is None:
                    self.committed[idx] = (e[2], e[0])
                elif rec != (e[2], e[0]):
                    self.violation(
                        f"committed entry changed: {nid} idx={idx} term={e[2]} "
                        f"(committed term {rec[0]})"
                    )
            self.checked_commit[nid] = max(self.checked_commit[nid], commit)
            la = core.last_applied
            state = self.fsm_state(core)
            if state is None:  # not comparable now (a stream replica filling a hole)
                continue
            rec2 = self.applied.setdefault(la, state)
            if rec2 != state:
                self.violation(
                    f"state machine safety: {nid} applied={la} has state {state!r:.60}, "
                    f"another member had {rec2!r:.60}"
                )

    def final_checks(self) -> None:
        up = self.up()
        best = max(up, key=lambda ic: ic[1].last_applied)[1]
        fsm = best.fsm
        assert isinstance(fsm, ToyStateMachine)
        values = fsm.values
        for v, pos in sorted(self.acked.items(), key=lambda kv: kv[1]):
            if pos > len(values) or values[pos - 1] != v:
                got = values[pos - 1] if pos <= len(values) else None
                self.violation(f"acknowledged value {v!r} at {pos} lost (found {got!r})")
                break
        for nid, core in up:
            f2 = core.fsm
            assert isinstance(f2, ToyStateMachine)
            if f2.values != values[: len(f2.values)]:
                self.violation(f"applied values of {nid} are not a prefix of {best.node_id}'s")
            if len(f2.values) != len(values) or core.last_applied != best.last_applied:
                self.result.liveness.append(
                    f"{nid} applied {core.last_applied} != {best.last_applied} after settling"
                )
        self.result.acked = len(self.acked)
        self.result.counts["quiesced"] = self.quiesced
        self.result.snapshots = sum(c.snapshots.taken + c.snapshots.installed for _, c in up)

    # ------------------------------------------------------------ main loop

    def step(self, end: float) -> None:
        cands = [end]
        nt = self.net.next_time()
        if nt is not None:
            cands.append(nt)
        if self.clients_on:
            cands.append(self.next_client)
        if self.faults_on:
            cands.append(self.next_fault)
        cands.extend(self.restart_at.values())
        cands.append(self.next_ping)
        for nid, core in self.up():
            cands.append(core.next_deadline())
            cands.append(self.live[nid].next_silence())
        self.t = max(self.t + 1e-6, min(cands))
        for src, dst, frame in self.net.pop_due(self.t):
            core = self.cores.get(dst)
            if core is not None:
                gid, payload = decode_one_frame(frame)
                self.live[dst].heard(src, self.t)
                if gid == PING_GROUP:
                    continue
                if not self.deliver(src, dst, gid, payload):
                    core.receive(src, payload)
        for nid, at in sorted(self.restart_at.items()):
            if at <= self.t:
                del self.restart_at[nid]
                self.start(nid)
        if self.clients_on and self.next_client <= self.t:
            self.client()
            self.next_client = self.t + self.client_rng.expovariate(1 / self.cfg.client_interval_s)
            if self.cfg.lull and self.lull_rng.random() < self.cfg.lull:
                self.next_client += self.lull_rng.uniform(*self.cfg.lull_s)
        self.link_beat()
        if self.faults_on and self.next_fault <= self.t:
            self.fault()
            self.next_fault = self.t + self.fault_rng.uniform(*self.cfg.fault_interval_s)
        for nid, core in self.up():
            if core.has_work or core.next_deadline() <= self.t:
                self.run_cycle(nid, core)
        self.result.steps += 1
        self.check()

    def run(self) -> SimResult:
        end = self.cfg.duration_s
        while self.t < end and len(self.result.violations) < 20:
            self.step(end)
        # settle: heal, restart, stop faults and clients
        self.faults_on = False
        self.clients_on = False
        self.net.heal()
        self.net.faults = Faults()
        for nid in self.ids:
            if self.cores[nid] is None:
                self.restart_at[nid] = self.t
        end = self.t + self.cfg.settle_s
        while self.t < end and len(self.result.violations) < 20:
            self.step(end)
        self.final_checks()
        return self.result


def make_simulation(seed: int, cfg: SimConfig | None = None) -> Simulation:
    """The simulation of ``cfg.workload`` for ``seed``."""
    cfg = cfg or SimConfig()
    if cfg.workload == "meta":
        from chaos.metasim import MetaSimulation  # builds on this module

        return MetaSimulation(seed, cfg)
    if cfg.workload == "stream":
        from chaos.streamsim import StreamSimulation  # builds on this module

        return StreamSimulation(seed, cfg)
    return Simulation(seed, cfg)


def run_seed(seed: int, cfg: SimConfig | None = None) -> SimResult:
    """Run one seed and return its result (violations are in ``result.violations``)."""
    try:
        return make_simulation(seed, cfg).run()
    except Exception as e:  # a crash inside pysyncobj/raft is a finding too
        r = SimResult(seed)
        r.violations.append(f"exception: {e!r}")
        return r


def _run_seed_star(args: tuple[int, SimConfig]) -> SimResult:
    return run_seed(*args)


def run_seeds(seeds: Iterable[int], cfg: SimConfig | None = None, jobs: int = 1) -> list[SimResult]:
    cfg = cfg or SimConfig()
    work = [(s, cfg) for s in seeds]
    if jobs <= 1:
        return [_run_seed_star(w) for w in work]
    import multiprocessing

    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        return pool.map(_run_seed_star, work, chunksize=4)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m chaos.sim", description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=None, help="run seeds start..start+N-1")
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--seed", type=int, default=None, help="replay one seed")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--duration", type=float, default=SimConfig.duration_s)
    ap.add_argument("--stock", action="store_true", help="disable raft/ pysyncobj workarounds")
    ap.add_argument(
        "--without",
        action="append",
        default=[],
        choices=sorted(PATCHES),
        help="disable one raft/ workaround (repeatable)",
    )
    ap.add_argument("--unsafe-send-before-fsync", action="store_true")
    ap.add_argument("--unsafe-leader-counts-unsynced", action="store_true")
    ap.add_argument(
        "--leader-write-lag",
        type=float,
        default=SimConfig.leader_write_lag,
        help="probability that a leader's cycle leaves its fsync to a later cycle",
    )
    ap.add_argument(
        "--workload",
        choices=["toy", "meta", "stream"],
        default="toy",
        help="replicated state machine: toy values, the meta group's MetaMachine, or a "
        "replicated stream (ReplicatedStreamFSM over a memory store, catch-up included)",
    )
    ap.add_argument(
        "--no-quiet", action="store_true", help="idle groups never hibernate (raft.quiet off)"
    )
    ap.add_argument(
        "--lazy-follower",
        type=float,
        default=None,
        metavar="S",
        help="a new entry goes at once to a majority's followers, the others within S",
    )
    ap.add_argument(
        "--commit-notify",
        type=float,
        default=None,
        metavar="S",
        help="a new commit index goes with the next entries or within S (default: at once)",
    )
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO if a.verbose else logging.CRITICAL)
    cfg = SimConfig(
        nodes=a.nodes,
        duration_s=a.duration,
        stock=a.stock,
        without=frozenset(a.without),
        unsafe_send_before_fsync=a.unsafe_send_before_fsync,
        unsafe_leader_counts_unsynced=a.unsafe_leader_counts_unsynced,
        leader_write_lag=a.leader_write_lag,
        workload=a.workload,
        quiet_after_s=None if a.no_quiet else SimConfig.quiet_after_s,
        lazy_follower_s=a.lazy_follower,
        commit_notify_s_max=a.commit_notify,
    )
    seeds = [a.seed] if a.seed is not None else list(range(a.start, a.start + (a.seeds or 20)))
    t0 = time.monotonic()
    results = run_seeds(seeds, cfg, a.jobs)
    bad = 0
    live = 0
    for r in results:
        if a.verbose or a.seed is not None:
            print(
                f"seed={r.seed} steps={r.steps} acked={r.acked} elections={r.elections} "
                f"crashes={r.crashes} snapshots={r.snapshots} liveness_issues={len(r.liveness)}"
                + "".join(f" {k}={v}" for k, v in sorted(r.counts.items()))
            )
        if r.liveness:
            live += 1
            if a.verbose or a.seed is not None:
                for m in r.liveness:
                    print(f"  liveness: {m}")
        if r.violations:
            bad += 1
            print(f"VIOLATION seed={r.seed}:")
            for m in r.violations:
                print(f"  {m}")
            print(f"  replay: {r.replay(cfg)}")
    dt = time.monotonic() - t0
    print(f"({dt:.1f} s; {live} seeds did not fully converge while settling)", file=sys.stderr)
    print(f"{len(results)} seeds, {bad} violations")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
