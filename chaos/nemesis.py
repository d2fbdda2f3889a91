"""The nemesis: fault actions and the scenarios that schedule them.

Theory of operation: a scenario is an async function of a ``Nemesis`` that loops until the fault
phase's deadline, drawing every choice (which node, how long, which fault) from the run's seeded
``random.Random``; so a seed replays the same decisions (real processes still decide their own
timing).  Each fault is opened and closed through ``window``, which records ``nemesis`` start/end
records in the history (the report shades them) and guarantees the fault is undone even when the
phase is cancelled.  Loops are bounded by the deadline and by ``ROUNDS_MAX``.

Fault families (chaos-matrix.md): F1 kill, F2 bounce, F3 pause, F4 partitions (isolate, 2/1,
bridge, one-way, flapping), F5 slow links, F8 pause-kill composite, F9 corruption of a minority's
files while down, F13 stream-leader stepdown churn, peer-remove churn (R2 streams) and
scale churn (LOG R3 → R1 → R3 through STREAM.UPDATE), F6/F7 power loss (``chaos.powerloss``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chaos.history import History
from chaos.proxy import LinkFaults, ProxyMesh, partition
from chaos.supervisor import Supervisor

ROUNDS_MAX = 10_000
READY_TIMEOUT_S = 20.0


@dataclass
class Nemesis:
    sup: Supervisor
    mesh: ProxyMesh
    hist: History
    rng: random.Random
    deadline: float  # loop time
    leader_of: Callable[[], str | None]
    request: Callable[[str, bytes], Awaitable[Any]]
    power: Any = None  # chaos.powerloss.PowerLoss when the run mounted one
    #: cut the next pause to at most this (a composite's part acts early in its short share)
    first_pause_s: float | None = None

    @property
    def names(self) -> list[str]:
        return list(self.sup.nodes)

    def left(self) -> float:
        return self.deadline - asyncio.get_running_loop().time()

    async def pause_for(self, lo: float, hi: float) -> bool:
        """Sleep a drawn time in [lo, hi], cut at the deadline; False once it has passed."""
        d = min(self.rng.uniform(lo, hi), max(0.0, self.left()))
        if self.first_pause_s is not None:
            d, self.first_pause_s = min(d, self.first_pause_s), None
        await asyncio.sleep(d)
        return self.left() > 0

    def leader(self) -> str:
        got = self.leader_of()
        return got if got in self.sup.nodes else self.rng.choice(self.names)

    def others(self, name: str) -> list[str]:
        return [n for n in self.names if n != name]

    @contextlib.asynccontextmanager
    async def window(self, kind: str, nodes: list[str], **info: Any) -> AsyncIterator[None]:
        self.hist.event("nemesis", phase="start", f=kind, nodes=nodes, **info)
        try:
            yield
        finally:
            self.hist.event("nemesis", phase="end", f=kind, nodes=nodes)

    async def wait_ready(self, name: str) -> None:
        end = time.monotonic() + READY_TIMEOUT_S
        for _ in range(10**6):  # poll a real condition (a TCP connect) until a deadline
            if time.monotonic() >= end or self.sup.ready(name):
                return
            if not self.sup.nodes[name].alive():
                self.hist.event("note", what="node exited while starting", node=name,
                                log=self.sup.log_tail(name, 400))  # fmt: skip
                return
            await asyncio.sleep(0.05)

    async def restart(self, name: str) -> None:
        self.sup.start(name)
        await self.wait_ready(name)

    def net(self, faults: LinkFaults) -> None:
        self.mesh.set_faults(faults)

    async def heal_all(self) -> None:
        """Undo everything: network healed, paused resumed, dead restarted."""
        self.mesh.heal()
        for n in self.names:
            self.sup.resume(n)
        for n in self.names:
            if not self.sup.nodes[n].alive():
                await self.restart(n)


# -- scenarios --------------------------------------------------------------------------------


async def none(nm: Nemesis) -> None:
    await asyncio.sleep(max(0.0, nm.left()))


async def _kill_loop(nm: Nemesis, pick: Callable[[], str]) -> None:
    for _ in range(ROUNDS_MAX):
        if not await nm.pause_for(2, 5):
            return
        victim = pick()
        async with nm.window("kill", [victim]):
            nm.sup.kill(victim)
            await nm.pause_for(0.5, 3)
            await nm.restart(victim)


async def kill_leader(nm: Nemesis) -> None:
    await _kill_loop(nm, nm.leader)


async def kill_random(nm: Nemesis) -> None:
    await _kill_loop(nm, lambda: nm.rng.choice(nm.names))


async def bounce(nm: Nemesis) -> None:
    for _ in range(ROUNDS_MAX):
        if not await nm.pause_for(3, 6):
            return
        async with nm.window("bounce", nm.names):
            for n in nm.rng.sample(nm.names, len(nm.names)):
                nm.sup.kill(n)
                await asyncio.sleep(nm.rng.uniform(0, 0.05))
            await asyncio.sleep(nm.rng.uniform(0, 2))
            for n in nm.rng.sample(nm.names, len(nm.names)):
                nm.sup.start(n)
            for n in nm.names:
                await nm.wait_ready(n)


async def _pause_loop(nm: Nemesis, pick: Callable[[], list[str]]) -> None:
    for _ in range(ROUNDS_MAX):
        if not await nm.pause_for(2, 4):
            return
        victims = pick()
        async with nm.window("pause", victims):
            try:
                for v in victims:
                    nm.sup.pause(v)
                await nm.pause_for(1.5, 5)
            finally:
                for v in victims:
                    nm.sup.resume(v)


async def pause_leader(nm: Nemesis) -> None:
    await _pause_loop(nm, lambda: [nm.leader()])


async def pause_majority(nm: Nemesis) -> None:
    await _pause_loop(nm, lambda: nm.rng.sample(nm.names, 2))


async def _partition_loop(nm: Nemesis, kind: str, draw: Callable[[], tuple[LinkFaults, list[str]]]):
    for _ in range(ROUNDS_MAX):
        if not await nm.pause_for(2, 4):
            return
        faults, nodes = draw()
        async with nm.window(kind, nodes):
            try:
                nm.net(faults)
                await nm.pause_for(2, 6)
            finally:
                nm.mesh.heal()


async def partition_leader(nm: Nemesis) -> None:
    def draw() -> tuple[LinkFaults, list[str]]:
        ld = nm.leader()
        return partition([[ld], nm.others(ld)]), [ld]

    await _partition_loop(nm, "partition-isolate", draw)


async def partition_halves(nm: Nemesis) -> None:
    def draw() -> tuple[LinkFaults, list[str]]:
        minority = nm.rng.choice(nm.names)
        return partition([[minority], nm.others(minority)]), [minority]

    await _partition_loop(nm, "partition-2/1", draw)


async def partition_bridge(nm: Nemesis) -> None:
    def draw() -> tuple[LinkFaults, list[str]]:
        a, _bridge, c = nm.rng.sample(nm.names, 3)
        return LinkFaults(frozenset({(a, c), (c, a)})), [a, c]

    await _partition_loop(nm, "partition-bridge", draw)


async def partition_oneway(nm: Nemesis) -> None:
    def draw() -> tuple[LinkFaults, list[str]]:
        ld = nm.leader()  # the leader's outbound is lost: it hears the others, they do not hear it
        return LinkFaults(frozenset((ld, o) for o in nm.others(ld))), [ld]

    await _partition_loop(nm, "partition-oneway", draw)


async def partition_flap(nm: Nemesis) -> None:
    for _ in range(ROUNDS_MAX):
        if nm.left() <= 0:
            return
        victim = nm.rng.choice(nm.names)
        async with nm.window("partition-flap", [victim]):
            try:
                nm.net(partition([[victim], nm.others(victim)]))
                await nm.pause_for(1, 3)
            finally:
                nm.mesh.heal()
        await nm.pause_for(1, 3)


async def slow_links(nm: Nemesis) -> None:
    for _ in range(ROUNDS_MAX):
        if not await nm.pause_for(1, 3):
            return
        scope = nm.rng.choice(["one", "all"])
        nodes = [nm.rng.choice(nm.names)] if scope == "one" else nm.names
        pairs = [
            (a, b) for a in nm.names for b in nm.names if a != b and (a in nodes or b in nodes)
        ]
        async with nm.window("slow-links", nodes, mean_ms=100, jitter_ms=50):
            try:
                nm.net(LinkFaults(delay={p: (0.1, 0.05) for p in pairs}))
                await nm.pause_for(3, 6)
            finally:
                nm.mesh.heal()


async def pause_kill(nm: Nemesis) -> None:
    """F8: pause the leader, kill a follower while it is paused, resume, restart."""
    for _ in range(ROUNDS_MAX):
        if not await nm.pause_for(2, 4):
            return
        ld = nm.leader()
        other = nm.rng.choice(nm.others(ld))
        async with nm.window("pause-kill", [ld, other]):
            try:
                nm.sup.pause(ld)
                await nm.pause_for(1, 3)
                nm.sup.kill(other)
                await nm.pause_for(0.5, 1.5)
            finally:
                nm.sup.resume(ld)
            await nm.restart(other)


def store_files(root: Path) -> list[Path]:
    """Stream data files under a node's store dir (block/journal/index/meta), sorted."""
    return sorted(p for p in root.rglob("*") if p.is_file() and "streams" in p.parts)


def corrupt(files: list[Path], rng: random.Random) -> dict[str, Any]:
    """Flip one byte or truncate one file, chosen by ``rng``; returns what was done."""
    candidates = [p for p in files if p.stat().st_size > 0]
    if not candidates:
        return {"did": "nothing (no files)"}
    path = rng.choice(candidates)
    size = path.stat().st_size
    if rng.random() < 0.5:
        off = rng.randrange(size)
        with open(path, "r+b") as fh:
            fh.seek(off)
            b = fh.read(1)
            fh.seek(off)
            fh.write(bytes([b[0] ^ (1 << rng.randrange(8))]))
        return {"did": "bitflip", "file": str(path), "offset": off}
    cut = rng.randrange(size)
    with open(path, "r+b") as fh:
        fh.truncate(cut)
    return {"did": "truncate", "file": str(path), "to": cut}


async def corrupt_minority(nm: Nemesis) -> None:
    """F9: kill one follower, damage its stream files, restart it."""
    for _ in range(ROUNDS_MAX):
        if not await nm.pause_for(3, 5):
            return
        ld = nm.leader()
        victim = nm.rng.choice(nm.others(ld))
        async with nm.window("corrupt", [victim]):
            nm.sup.kill(victim)
            did = [corrupt(store_files(nm.sup.nodes[victim].store_dir), nm.rng) for _ in range(2)]
            nm.hist.event("note", what="corruption", node=victim, did=did)
            await nm.pause_for(0.5, 1.5)
            await nm.restart(victim)


async def stepdown(nm: Nemesis) -> None:
    """F13 (the part that needs no membership change): stream leader stepdowns."""
    for _ in range(ROUNDS_MAX):
        if not await nm.pause_for(2, 4):
            return
        ld = nm.leader()
        async with nm.window("stepdown", [ld]):
            with contextlib.suppress(Exception):
                await nm.request("$JS.API.STREAM.LEADER.STEPDOWN.LOG", b"")
            await asyncio.sleep(0.5)


PEER_REMOVE_STREAMS = ("LOG", "CHAIN", "WQ")


async def _members(nm: Nemesis, stream: str) -> list[str]:
    try:
        msg = await nm.request(f"$JS.API.STREAM.INFO.{stream}", b"")
        cl = json.loads(msg.data).get("cluster") or {}
    except Exception:
        return []
    names = {cl.get("leader"), *(r.get("name") for r in cl.get("replicas") or [])}
    return sorted(n for n in names if n in nm.sup.nodes)


async def peer_remove(nm: Nemesis) -> None:
    """F13 membership churn: ``STREAM.PEER.REMOVE`` of a member of LOG, CHAIN or WQ (R2 in
    this scenario, so the third server is free to take its place), its leader half of the
    time; the removed server may be chosen again in a later round."""
    for _ in range(ROUNDS_MAX):
        if not await nm.pause_for(1.5, 3):
            return
        stream = nm.rng.choice(PEER_REMOVE_STREAMS)
        members = await _members(nm, stream)
        if not members:
            nm.hist.event("note", what=f"peer-remove: no members of {stream} known")
            continue
        ld = nm.leader() if stream == "LOG" else members[0]
        victim = ld if ld in members and nm.rng.random() < 0.5 else nm.rng.choice(members)
        async with nm.window("peer-remove", [victim], stream=stream):
            try:
                msg = await nm.request(
                    f"$JS.API.STREAM.PEER.REMOVE.{stream}", json.dumps({"peer": victim}).encode()
                )
                answer = json.loads(msg.data)
            except Exception as exc:
                answer = {"exception": repr(exc)[:200]}
            nm.hist.event("note", what=f"peer-remove {victim} from {stream}", answer=answer)
            await nm.pause_for(1, 2)


async def power_loss_one(nm: Nemesis) -> None:
    await _power_loss(nm, lambda: [nm.rng.choice(nm.names)], "power-loss")


async def power_loss_all(nm: Nemesis) -> None:
    await _power_loss(nm, lambda: list(nm.names), "power-loss-all")


async def _power_loss(nm: Nemesis, pick: Callable[[], list[str]], kind: str) -> None:
    if nm.power is None:
        nm.hist.event("note", what=f"{kind} skipped: no FUSE power-loss file system mounted")
        await none(nm)
        return
    for _ in range(ROUNDS_MAX):
        if not await nm.pause_for(3, 6):
            return
        victims = pick()
        async with nm.window(kind, victims):
            for v in victims:
                nm.sup.kill(v)
            lost = {v: nm.power.crash(v) for v in victims}
            nm.hist.event("note", what="unsynced writes dropped", lost=lost)
            await nm.pause_for(0.5, 2)
            for v in nm.rng.sample(victims, len(victims)):
                nm.sup.start(v)
            for v in victims:
                await nm.wait_ready(v)


async def disk_full(nm: Nemesis) -> None:
    """F11: one node's store answers ENOSPC for 2-5 s (needs the FUSE layer)."""
    if nm.power is None:
        nm.hist.event("note", what="disk-full skipped: no FUSE file system mounted")
        await none(nm)
        return
    for _ in range(ROUNDS_MAX):
        if not await nm.pause_for(2, 4):
            return
        victim = nm.rng.choice(nm.names)
        async with nm.window("disk-full", [victim]):
            try:
                nm.power.disk_full(victim, True)
                await nm.pause_for(2, 5)
            finally:
                nm.power.disk_full(victim, False)


async def _scale(nm: Nemesis, replicas: int) -> None:
    try:
        msg = await nm.request("$JS.API.STREAM.INFO.LOG", b"")
        config = json.loads(msg.data)["config"]
        config["num_replicas"] = replicas
        msg = await nm.request("$JS.API.STREAM.UPDATE.LOG", json.dumps(config).encode())
        got = json.loads(msg.data)
        answer = got.get("error") or {"num_replicas": (got.get("config") or {}).get("num_replicas")}
    except Exception as exc:
        answer = {"exception": repr(exc)[:200]}
    nm.hist.event("note", what=f"scale LOG to R{replicas}", answer=answer)


async def scale_churn(nm: Nemesis) -> None:
    """F13: scale LOG down to R1 and back up to R3 (the final state is always R3)."""
    for _ in range(ROUNDS_MAX):
        if not await nm.pause_for(2, 4):
            return
        async with nm.window("scale-r1", nm.names):
            try:
                await _scale(nm, 1)
                await nm.pause_for(2, 4)
            finally:
                await _scale(nm, 3)


@dataclass(frozen=True)
class Scenario:
    name: str
    family: str
    title: str
    fn: Callable[[Nemesis], Awaitable[None]]
    needs_power: bool = False
    replicas: int | None = None  # the streams' replicas, when the scenario needs a count


SCENARIOS = {
    s.name: s
    for s in (
        Scenario("none", "-", "no faults (baseline)", none),
        Scenario("kill-leader", "F1", "SIGKILL the LOG leader, restart", kill_leader),
        Scenario("kill-random", "F1", "SIGKILL a random node, restart", kill_random),
        Scenario("bounce", "F2", "kill all three within 100 ms, restart in random order", bounce),
        Scenario("pause-leader", "F3", "SIGSTOP the LOG leader 1.5-5 s", pause_leader),
        Scenario("pause-majority", "F3", "SIGSTOP two nodes 1.5-5 s", pause_majority),
        Scenario("partition-leader", "F4", "isolate the LOG leader", partition_leader),
        Scenario("partition-halves", "F4", "random 2/1 split", partition_halves),
        Scenario(
            "partition-bridge", "F4", "bridge: two nodes cannot see each other", partition_bridge
        ),
        Scenario(
            "partition-oneway",
            "F4",
            "the leader's outbound route traffic is held",
            partition_oneway,
        ),
        Scenario("partition-flap", "F4", "isolate a random node every 1-3 s", partition_flap),
        Scenario("slow-links", "F5", "100 +- 50 ms on one node's or all links", slow_links),
        Scenario(
            "power-loss-one", "F6", "one node loses its unsynced writes", power_loss_one, True
        ),
        Scenario(
            "power-loss-all", "F7", "all nodes lose unsynced writes at once", power_loss_all, True
        ),
        Scenario("pause-kill", "F8", "pause leader, kill a follower meanwhile", pause_kill),
        Scenario(
            "corrupt-minority",
            "F9",
            "bit flip / truncation in one follower's files",
            corrupt_minority,
        ),
        Scenario("stepdown", "F13", "LOG leader stepdown via the JS API", stepdown),
        Scenario("scale-churn", "F13", "scale LOG R3 -> R1 -> R3", scale_churn),
        Scenario(
            "peer-remove",
            "F13",
            "PEER.REMOVE a member of an R2 stream (the spare server takes its place)",
            peer_remove,
            replicas=2,
        ),
        Scenario("disk-full", "F11", "one node's writes fail with ENOSPC 2-5 s", disk_full, True),
    )
}


#: a composite's part waits at most this before its first fault
FIRST_PAUSE_S = 0.5


def scenario_of(spec: str) -> Scenario:
    """A scenario by name, or several joined by ``+`` (``kill-leader+stepdown``) run one
    after the other in one cluster run: each gets an equal share of the fault phase and the
    cluster is healed after each, so one start, setup, quiet and read serve several fault
    families (the CI drills); each part's first fault comes within ``FIRST_PAUSE_S``.  A ``part`` record opens each share in the history.

    Raises:
        KeyError: an unknown scenario name.
        ValueError: parts that need different stream replica counts.
    """
    if "+" not in spec:
        return SCENARIOS[spec]
    parts = [SCENARIOS[p] for p in spec.split("+")]
    counts = {p.replicas for p in parts if p.replicas is not None}
    if len(counts) > 1:
        raise ValueError(f"{spec}: parts need different replica counts {sorted(counts)}")

    async def fn(nm: Nemesis) -> None:
        loop = asyncio.get_running_loop()
        end = nm.deadline
        share = max(0.0, nm.left()) / len(parts)
        try:
            for p in parts:
                # from the part's own start: a part that overran (restarts are slow) does
                # not eat the next one's share; the phase ends later instead
                nm.deadline = loop.time() + share
                nm.hist.event("part", scenario=p.name, family=p.family)
                nm.first_pause_s = FIRST_PAUSE_S
                await p.fn(nm)
                await nm.heal_all()
        finally:
            nm.deadline = end

    return Scenario(
        spec,
        "+".join(p.family for p in parts),
        "; then ".join(p.title for p in parts),
        fn,
        any(p.needs_power for p in parts),
        counts.pop() if counts else None,
    )
