"""Eager and lazy followers (``RaftConfig.lazy_follower_s``, raft.syncobj) in the
deterministic simulator (chaos.sim).

A three-member group: a new entry goes at once to one follower (a majority
with the leader), the other gets it at most ``lazy_follower_s`` later, batched
with what was appended meanwhile.  Every test runs on the simulator's fake
clock with its Raft safety checks on every step; any violation fails the test.
"""

from __future__ import annotations

from collections.abc import Iterable

from chaos.sim import Simulation
from raft.core import RaftCore
from raft.wire import decode_messages
from tests.raft.simwait import LAZY_S, lazy_sim, run_for, run_until, settled_leader


class EntryLog:
    """Records every append-entries carrying entries: (time, src, dst, indexes)."""

    def __init__(self, sim: Simulation) -> None:
        self.sent: list[tuple[float, str, str, list[int]]] = []
        inner = sim.send

        def send(src: str, outbox: Iterable[tuple[str, bytes]]) -> None:
            outbox = list(outbox)
            for dst, payload in outbox:
                for m in decode_messages(payload):
                    if m.get("type") == "append_entries" and m.get("entries"):
                        self.sent.append((sim.t, src, dst, [e[1] for e in m["entries"]]))
            inner(src, outbox)

        sim.send = send  # type: ignore[method-assign]

    def to(self, dst: str) -> list[tuple[float, list[int]]]:
        return [(t, idx) for t, _s, d, idx in self.sent if d == dst]


def propose(sim: Simulation, core: RaftCore, value: bytes) -> list[object]:
    """Propose and run the member's cycle at once, as the trio driver's kick
    does (the simulator alone would wait for its next event)."""
    out: list[object] = []
    p = core.propose(value)
    p.on_done = lambda p: out.append(p.error if p.error is not None else p.result)
    sim.run_cycle(core.node_id, core)
    return out


def follower_ids(sim: Simulation, leader: RaftCore) -> list[str]:
    return [nid for nid, _ in sim.up() if nid != leader.node_id]


def test_an_entry_commits_with_one_follower_and_reaches_the_other_within_the_interval() -> None:
    sim = lazy_sim()
    leader = settled_leader(sim)
    log = EntryLog(sim)
    t0 = sim.t
    done = propose(sim, leader, b"v1")
    run_until(sim, lambda: bool(done), "the commit")
    assert done == [1]
    index = leader.commit_index
    got = {nid: [t for t, idx in log.to(nid) if index in idx] for nid in follower_ids(sim, leader)}
    eager = [nid for nid, ts in got.items() if ts]
    assert len(eager) == 1, got  # committed on one follower's copy alone
    lazy = next(nid for nid in got if nid not in eager)
    lazy_core = sim.cores[lazy]
    assert lazy_core is not None and lazy_core.journal.last_index < index
    run_until(sim, lambda: lazy_core.journal.last_index >= index, "the lazy copy")
    assert sim.t - t0 <= LAZY_S + 0.01  # sent within the interval (plus the network's delay)
    assert leader.obj.eager_sends >= 1


def test_the_lazy_follower_gets_a_run_of_entries_in_few_messages() -> None:
    sim = lazy_sim()
    leader = settled_leader(sim)
    log = EntryLog(sim)
    first = leader.journal.last_index + 1
    results: list[list[object]] = []
    for k in range(40):  # one at a time, each waiting for its commit: sync publishes
        done = propose(sim, leader, b"v%d" % k)
        run_until(sim, lambda done=done: bool(done), f"commit {k}")
        results.append(done)
    last = leader.journal.last_index
    assert all(r and isinstance(r[0], int) for r in results)
    run_for(sim, 2 * LAZY_S)
    counts = {}
    for nid in follower_ids(sim, leader):
        core = sim.cores[nid]
        assert core is not None and core.journal.last_index >= last  # everyone has everything
        counts[nid] = sum(1 for _t, idx in log.to(nid) if idx and idx[-1] >= first)
    eager, lazy = max(counts.values()), min(counts.values())
    assert eager >= 40  # one message per entry
    assert lazy * 3 <= eager, counts  # batched: several entries per message


def test_without_the_option_every_entry_goes_to_every_follower_at_once() -> None:
    sim = lazy_sim(lazy=None)
    leader = settled_leader(sim)
    log = EntryLog(sim)
    done = propose(sim, leader, b"v1")
    run_until(sim, lambda: bool(done), "the commit")
    index = leader.commit_index
    sent_at = sorted({t for t, _s, _d, idx in log.sent if index in idx})
    assert {d for _t, _s, d, idx in log.sent if index in idx} == set(follower_ids(sim, leader))
    assert len(sent_at) == 1  # in the same cycle
    assert leader.obj.eager_sends == 0


def test_commits_go_on_when_the_eager_follower_is_lost() -> None:
    sim = lazy_sim()
    leader = settled_leader(sim)
    log = EntryLog(sim)
    done = propose(sim, leader, b"v1")
    run_until(sim, lambda: bool(done), "the first commit")
    index = leader.commit_index
    eager = next(d for _t, _s, d, idx in log.sent if index in idx)
    sim.crash(eager, mid_cycle=False)
    sim.restart_at.pop(eager)  # stays down
    spans = []
    for k in range(10):
        t0 = sim.t
        d = propose(sim, leader, b"w%d" % k)
        run_until(sim, lambda d=d: bool(d), f"commit {k} without the eager follower")
        assert isinstance(d[0], int), d
        spans.append(sim.t - t0)
    # the first waits at most for the lazy send; then the other follower is eager
    assert max(spans[3:]) < LAZY_S / 2, spans
    other = next(nid for nid, _ in sim.up() if nid != leader.node_id)
    assert [n.id for n in leader.obj._eager] == [other]


def test_the_eager_follower_is_the_one_holding_the_most_of_the_log() -> None:
    """``_eager_followers`` on a leader's own state: a follower still catching up
    (a lower match index) is not chosen while another is current, however
    recently it answered; the eager one is kept while nobody holds more and it
    answers; it is replaced when the other holds more or it falls silent."""
    sim = lazy_sim()
    leader = settled_leader(sim)
    obj = leader.obj
    a, b = sorted(obj._SyncObj__otherNodes, key=lambda n: n.id)
    heard = obj._SyncObj__lastResponseTime
    match = obj._SyncObj__raftMatchIndex
    now = sim.t
    others = {a, b}

    def choose(eager: list[object], m: tuple[int, int], h: tuple[float, float]) -> object:
        obj._eager = list(eager)
        match[a], match[b] = m
        heard[a], heard[b] = h
        (chosen,) = obj._eager_followers(others, LAZY_S)
        return chosen

    assert choose([], (100, 10), (now - 0.001, now)) is a  # b catches up: not b
    assert choose([], (10, 100), (now, now - 0.001)) is b
    assert choose([a], (100, 100), (now - 0.001, now)) is a  # kept while level
    assert choose([a], (100, 97), (now, now)) is a  # the lazy one trails: kept
    assert choose([a], (90, 100), (now, now)) is b  # the other holds more
    assert choose([a], (100, 100), (now - 2 * LAZY_S, now)) is b  # a fell silent
