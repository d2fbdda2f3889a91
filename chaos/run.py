"""One drill: start a cluster, load it, break it on a seeded schedule, heal, check, report.

Theory of operation: a run is a fixed sequence of phases, each with its own deadline, so a run
always ends and always leaves its directory behind:

1. *start*: proxies (``chaos.proxy``), conf files and three processes (``chaos.supervisor``); wait
   until every client port answers, then create the streams, consumer and bucket (bounded retry).
2. *faults*: workers (``chaos.workload``) and a monitor (stream leader and consumer ack floor,
   sampled every ``SAMPLE_S``) run for ``duration`` seconds while the scenario's nemesis acts.
3. *heal*: every fault undone (network healed, paused resumed, dead restarted); producers stop.
4. *quiet*: wait until every node's ``/jsz`` shows the same last seq for each stream (bounded).
5. *drain*: consumers keep fetching until the consumer has nothing pending (bounded).
6. *read*: each node's own replica is read (``chaos.readback``); the cluster is then shut down.
7. *check*: the checkers judge; ``result.json``, ``history.jsonl`` and ``report.html`` are written.

The harness runs on asyncio (nats-py's loop); the proxies run on trio in their own thread.  Every
random choice comes from ``random.Random`` values derived from the seed.  The run prints its seed
and the command that replays it, first thing and last thing.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import random
import shlex
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chaos import readback, workload
from chaos.checkers import RunData, check_all
from chaos.history import History, pair
from chaos.nemesis import Nemesis, scenario_of
from chaos.proxy import ProxyMesh
from chaos.supervisor import Supervisor, Target

NAMES = ("n1", "n2", "n3")
START_TIMEOUT_S = 30.0
SETUP_TIMEOUT_S = 30.0
SETUP_NO_META_S = 10.0  # setup bound when no meta leader was seen (e.g. trijet today)
NO_SETUP_WAIT_S = 3.0  # quiet/drain bounds after a failed setup
QUIET_TIMEOUT_S = 30.0
DRAIN_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 10.0
SAMPLE_S = 0.5
QUIET_POLL_S = 0.25  # replicas agree when two polls this far apart show the same last seqs
STREAMS = (workload.LOG, workload.CHAIN, workload.WQ)


@dataclass
class RunConfig:
    scenario: str
    target: Target = "nats-server"
    seed: int = 0
    duration: float = 20.0
    out: Path | None = None
    sync_always: bool = False
    rate_per_s: float = 40.0
    replicas: int = 3
    quiet_s: float = QUIET_TIMEOUT_S  # bound on waiting for replicas to converge
    drain_s: float = DRAIN_TIMEOUT_S  # bound on draining the consumer
    agree_s: float | None = None  # bound on consumer replicas agreeing (None: quiet_s, <= 10)
    report: bool = True  # write report.html and its plot (matplotlib: ~2 s)


def replay_command(cfg: RunConfig) -> str:
    args = [
        "python", "-m", "chaos", "run", cfg.scenario, "--target", cfg.target,
        "--seed", str(cfg.seed), "--duration", f"{cfg.duration:g}",
    ]  # fmt: skip
    if cfg.sync_always:
        args.append("--sync-always")
    if cfg.out is not None:
        args += ["--out", str(cfg.out)]
    return shlex.join(args)


def run(cfg: RunConfig) -> dict[str, Any]:
    """Run one drill (blocking); returns the result document also written to result.json."""
    try:
        scenario_of(cfg.scenario)
    except (KeyError, ValueError) as exc:
        raise SystemExit(f"scenario {cfg.scenario!r}: {exc}; see: python -m chaos list") from None
    if cfg.out is None:
        cfg.out = Path(tempfile.mkdtemp(prefix=f"chaos-{cfg.scenario}-{cfg.seed}-"))
    cfg.out.mkdir(parents=True, exist_ok=True)
    if (cfg.out / "nodes").exists():  # a re-run in the same directory starts from empty stores
        shutil.rmtree(cfg.out / "nodes")
    print(f"chaos: seed={cfg.seed} scenario={cfg.scenario} target={cfg.target} out={cfg.out}")
    print(f"chaos: replay: {replay_command(cfg)}", flush=True)
    logging.getLogger("asyncio").setLevel(logging.ERROR)  # not "socket.send() raised" per write
    try:
        result = asyncio.run(_run(cfg))
    except asyncio.CancelledError:
        print(f"chaos: interrupted; processes stopped. replay: {replay_command(cfg)}", flush=True)
        raise SystemExit(130) from None
    (cfg.out / "result.json").write_text(json.dumps(result, indent=1, default=str))
    try:
        from chaos import report

        if cfg.report:
            report.write(cfg.out)
    except Exception as exc:  # a report problem must not hide the verdicts
        print(f"chaos: report not written: {exc!r}", file=sys.stderr)
    bad = [v["name"] for v in result["verdicts"] if v["ok"] is False]
    print(f"chaos: {'FAIL ' + ','.join(bad) if bad else 'ok'}; report: {cfg.out / 'report.html'}")
    print(f"chaos: replay: {replay_command(cfg)}", flush=True)
    return result


async def _bounded(coro: Any, seconds: float) -> bool:
    """Await ``coro`` for at most ``seconds``; True if it finished."""
    try:
        await asyncio.wait_for(coro, seconds)
        return True
    except TimeoutError:
        return False


async def _poll(cond: Any, seconds: float, every: float = 0.25) -> bool:
    """Poll an async condition until true or ``seconds`` pass."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        with contextlib.suppress(Exception):
            if await cond():
                return True
        await asyncio.sleep(every)
    return False


class Monitor:
    """Samples the LOG leader and c1's ack floor; remembers the current leader."""

    def __init__(self, hist: History) -> None:
        self.hist = hist
        self.leader: str | None = None
        self.nc: Any = None

    async def run(self, urls: list[str], stop: asyncio.Event) -> None:
        self.nc = await workload.connect(urls, 0, "monitor")
        js = self.nc.jetstream(timeout=1.0)
        for _ in range(10**9):
            if stop.is_set():
                break
            with contextlib.suppress(Exception):
                info = await js.stream_info(workload.LOG)
                ld = info.cluster.leader if info.cluster else None
                if ld and ld != self.leader:
                    self.leader = ld
                    self.hist.event("leader", stream=workload.LOG, leader=ld)
            with contextlib.suppress(Exception):
                ci = await js.consumer_info(workload.LOG, workload.CONSUMER)
                self.hist.event(
                    "cinfo", ack_floor=ci.ack_floor.stream_seq, leader=self.leader,
                    consumer_leader=ci.cluster.leader if ci.cluster else None,
                    pending=ci.num_pending, ack_pending=ci.num_ack_pending,
                )  # fmt: skip
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), SAMPLE_S)


async def _run(cfg: RunConfig) -> dict[str, Any]:
    assert cfg.out is not None
    main = asyncio.current_task()
    assert main is not None
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):  # cancel the run: every finally tears down
        loop.add_signal_handler(sig, main.cancel)
    rng = random.Random(cfg.seed)
    hist = History(cfg.out / "history.jsonl")
    sup = Supervisor(cfg.target, cfg.out / "nodes", NAMES, sync_always=cfg.sync_always)
    mesh = ProxyMesh(
        NAMES, {n: sup.nodes[n].cluster_port for n in NAMES}, random.Random(rng.random())
    )
    scenario = scenario_of(cfg.scenario)
    power = None
    phases: dict[str, float] = {}
    notes: list[str] = []
    drained = quiet = False
    alive: dict[str, bool] = {}
    reads: dict[str, Any] = {}
    consumers: dict[str, Any] = {}
    urls = [sup.nodes[n].url for n in NAMES]
    stop, drained_ev, mon_stop = asyncio.Event(), asyncio.Event(), asyncio.Event()
    tasks: list[asyncio.Task[Any]] = []
    try:
        mesh.start()
        sup.write_confs(mesh.ports)
        if scenario.needs_power:
            from chaos import powerloss

            power = powerloss.mount_all(sup, notes)
        for n in NAMES:
            sup.start(n)
        ok = await _bring_up(sup, mesh, notes)
        urls[:] = [sup.nodes[n].url for n in NAMES]  # a replanned node has a new client port
        if not ok:
            notes.append("not every node answered on its client port in time")
        setup_s = SETUP_TIMEOUT_S
        if not await _poll(_meta_leader(sup), START_TIMEOUT_S, 0.1):
            notes.append("no JetStream meta leader seen by every node in time")
            setup_s = SETUP_NO_META_S
        phases["started"] = hist.now()
        admin = await workload.connect(urls, 0, "admin")
        try:
            replicas = scenario.replicas or cfg.replicas
            await workload.setup(admin, replicas, loop.time() + setup_s)
        except Exception as exc:
            notes.append(f"setup failed: {exc}; the run goes on (its checkers say what they find)")
            cfg.quiet_s = cfg.drain_s = NO_SETUP_WAIT_S  # nothing to converge or drain
        phases["setup"] = hist.now()
        hist.event("note", what="faults begin")

        ctx = workload.Ctx(hist, urls, stop, cfg.rate_per_s)
        wrng = random.Random(rng.random())
        mon = Monitor(hist)
        producers = [
            *(workload.w1_producer(ctx, i, random.Random(wrng.random())) for i in range(3)),
            *(workload.w2_chain(ctx, i, random.Random(wrng.random())) for i in range(2)),
            *(workload.kv_worker(ctx, i, random.Random(wrng.random())) for i in range(3)),
            workload.w1_producer(ctx, 0, random.Random(wrng.random()), "w4", "wq", "wq-publish"),
        ]
        p_tasks = [asyncio.create_task(c) for c in producers]
        c_tasks = [
            asyncio.create_task(
                workload.w3_consumer(ctx, i, random.Random(wrng.random()), drained_ev)
            )
            for i in range(3)
        ]
        c_tasks.append(
            asyncio.create_task(
                workload.w3_consumer(ctx, 0, random.Random(wrng.random()), drained_ev, wq=True)
            )
        )
        m_task = asyncio.create_task(mon.run(urls, mon_stop))
        tasks += [*p_tasks, *c_tasks, m_task]
        nm = Nemesis(
            sup, mesh, hist, random.Random(rng.random()), loop.time() + cfg.duration,
            lambda: mon.leader, lambda subj, data: admin.request(subj, data, timeout=2.0), power,
        )  # fmt: skip
        try:
            if not await _bounded(scenario.fn(nm), cfg.duration + 60):
                notes.append("nemesis overran its deadline and was cancelled")
        finally:
            await _bounded(nm.heal_all(), 60)
        hist.event("note", what="healed")
        phases["healed"] = hist.now()
        stop.set()
        await _bounded(asyncio.gather(*p_tasks, return_exceptions=True), STOP_TIMEOUT_S)
        for t in p_tasks:
            t.cancel()

        members = _members(admin)
        quiet = await _poll(_streams_agree(sup, members), cfg.quiet_s, QUIET_POLL_S)
        if not quiet:
            notes.append(f"replicas did not agree on last seqs within {cfg.quiet_s}s")
        phases["quiet"] = hist.now()
        drained = await _poll(_drained(admin), cfg.drain_s)
        if not drained:
            notes.append(f"consumer not drained within {cfg.drain_s}s")
        drained_ev.set()
        await _bounded(asyncio.gather(*c_tasks, return_exceptions=True), STOP_TIMEOUT_S)
        agree_s = min(10.0, cfg.quiet_s) if cfg.agree_s is None else cfg.agree_s
        await _poll(_consumers_agree(sup, members), agree_s)
        mon_stop.set()
        await _bounded(m_task, STOP_TIMEOUT_S)
        phases["drained"] = hist.now()

        reads, consumers = await _stable_reads(sup, cfg.quiet_s, notes, await members())
        phases["read"] = hist.now()
        alive = {n: sup.ready(n) for n in NAMES}
        with contextlib.suppress(Exception):
            await admin.close()
        with contextlib.suppress(Exception):
            await mon.nc.close()
    finally:
        for ev in (stop, drained_ev, mon_stop):  # every worker loop ends on these, even when a
            ev.set()  # client library turned our cancellation into one of its own errors
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=STOP_TIMEOUT_S)
        hist.close()
        sup.close()
        mesh.close()
        if power is not None:
            power.close()
        phases["closed"] = hist.now()

    data = RunData(pair(hist.records), hist.records, reads, consumers, drained, quiet, alive)
    verdicts = check_all(data)
    phases["checked"] = hist.now()
    return {
        "seed": cfg.seed,
        "scenario": cfg.scenario,
        "family": scenario.family,
        "target": cfg.target,
        "duration": cfg.duration,
        "sync_always": cfg.sync_always,
        "replay": replay_command(cfg),
        "phases": phases,
        "notes": notes,
        "ops": _op_counts(data),
        "unavailable_s": round(unavailability(data, phases), 2),
        "reads": {
            n: {s: {"state": r.state, "read": len(r.msgs), "error": r.error} for s, r in rs.items()}
            for n, rs in reads.items()
        },
        "verdicts": [v.as_dict() for v in verdicts],
    }


def unavailability(data: RunData, phases: dict[str, float]) -> float:
    """Longest stretch of the fault phase without an ok publish completing, in seconds."""
    t0, t1 = phases.get("setup", 0.0), phases.get("healed", 0.0)
    times = sorted(
        o.t1 for o in data.ops if o.f == "publish" and o.type == "ok" and t0 <= o.t1 <= t1
    )
    points = [t0, *times, t1]
    return max((b - a for a, b in itertools.pairwise(points)), default=0.0)


def _op_counts(data: RunData) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for o in data.ops:
        out.setdefault(o.f, {"ok": 0, "fail": 0, "info": 0})[o.type] += 1
    return out


PORT_REPLANS_MAX = 3


async def _bring_up(sup: Supervisor, mesh: ProxyMesh, notes: list[str]) -> bool:
    """Wait (bounded) until every node answers on its client port.  A node whose start
    failed because another process on the machine took one of its ports (they were free
    when drawn) gets fresh ports and starts again, up to ``PORT_REPLANS_MAX`` times: that is
    the machine's doing, not the target's.  (Restarts during the faults keep their ports.)"""
    end = time.monotonic() + START_TIMEOUT_S
    replans = 0
    for _ in range(10**6):
        if time.monotonic() >= end:
            return False
        if all(sup.ready(n) for n in sup.nodes):
            return True
        for n in sup.nodes:
            if replans < PORT_REPLANS_MAX and sup.bind_failed(n):
                replans += 1
                sup.replan(n)
                mesh.cluster_ports[n] = sup.nodes[n].cluster_port
                notes.append(f"{n}: a port was taken by another process at start; new ports")
                sup.start(n)
        await asyncio.sleep(0.05)
    return False


def _meta_leader(sup: Supervisor) -> Any:
    async def cond() -> bool:
        for node in sup.nodes.values():
            doc = await asyncio.to_thread(readback.jsz, node.http_port)
            if not (doc.get("meta_cluster") or {}).get("leader"):
                return False
        return True

    return cond


READ_ATTEMPTS = 4
READ_RETRY_S = 2.0


Members = dict[str, set[str]]


def _members(admin: Any) -> Callable[[], Awaitable[Members]]:
    """Each stream's replicas now (a peer remove changes them during a run)."""

    async def get() -> Members:
        return await readback.stream_members(admin, STREAMS, list(NAMES))

    return get


def _hosted(members: Members, node: str) -> tuple[str, ...]:
    return tuple(s for s in STREAMS if node in members.get(s, NAMES))


async def _stable_reads(
    sup: Supervisor, bound_s: float, notes: list[str], members: Members
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Read every replica; while replicas' states differ, wait and read again (bounded), so a
    replica that is only lagging is not judged divergent, and one that stays apart is.  A
    node is read for the streams it is a replica of (``members``); consumer state is
    compared among LOG's replicas."""
    end = time.monotonic() + bound_s
    reads: dict[str, Any] = {}
    consumers: dict[str, Any] = {}
    for attempt in range(1, READ_ATTEMPTS + 1):
        for n, node in sup.nodes.items():
            mine = _hosted(members, n)
            reads[n], c = await readback.read_node(node.url, node.http_port, mine)
            if workload.LOG in mine:
                consumers[n] = c
        states = {(s, str(reads[n][s].state)) for n in reads for s in STREAMS if s in reads[n]}
        agree = (
            len(states) == len({s for s, _ in states})
            and len({str(c) for c in consumers.values()}) <= 1
        )
        # a replica that could not be read this time (a direct get timed out while it was
        # still catching up after the heal) is read again too, within the same bound
        failed = sorted(f"{n}/{s}" for n in reads for s, r in reads[n].items() if r.error)
        if agree and not failed:
            if attempt > 1:
                notes.append(f"replicas agreed at read attempt {attempt}")
            return reads, consumers
        if attempt == READ_ATTEMPTS or time.monotonic() + READ_RETRY_S > end:
            notes.append(
                f"replicas still differ or unreadable ({', '.join(failed)})"
                f" after {attempt} read attempts"
            )
            break
        await asyncio.sleep(READ_RETRY_S)
    return reads, consumers


def _streams_agree(sup: Supervisor, members: Callable[[], Awaitable[Members]]) -> Any:
    """All replicas report the same last seqs, twice in a row (a stable view, not a passing
    one)."""
    seen: list[Any] = []

    async def cond() -> bool:
        lasts = []
        where = await members()
        for n, node in sup.nodes.items():
            doc = await asyncio.to_thread(readback.jsz, node.http_port)
            sds = readback.local_streams(doc)
            lasts.append(
                tuple(
                    (sds.get(s) or {}).get("state", {}).get("last_seq")
                    if s in _hosted(where, n)
                    else "-"
                    for s in STREAMS
                )
            )
        per_stream = [{x[i] for x in lasts} - {"-"} for i in range(len(STREAMS))]
        agreed = all(len(v) == 1 and None not in v for v in per_stream)
        stable = agreed and seen == lasts
        seen[:] = lasts if agreed else []
        return stable

    return cond


def _consumers_agree(sup: Supervisor, members: Callable[[], Awaitable[Members]]) -> Any:
    async def cond() -> bool:
        states = []
        where = (await members()).get(workload.LOG, set(NAMES))
        for n, node in sup.nodes.items():
            if n not in where:
                continue
            doc = await asyncio.to_thread(readback.jsz, node.http_port)
            states.append(readback.consumer_state(readback.local_streams(doc).get("LOG")))
        return "absent" not in states[0] and all(s == states[0] for s in states)

    return cond


def _drained(nc: Any) -> Any:
    js = nc.jetstream(timeout=1.0)

    async def cond() -> bool:
        for stream, durable in (
            (workload.LOG, workload.CONSUMER),
            (workload.WQ, workload.WQ_CONSUMER),
        ):
            ci = await js.consumer_info(stream, durable)
            if ci.num_pending or ci.num_ack_pending:
                return False
        return True

    return cond
