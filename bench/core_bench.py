"""Core NATS side by side: trijet against the reference nats-server.

Theory of operation: both servers are started on 127.0.0.1 with an ephemeral
port (``-p -1``; the port is read from the ``--ports_file_dir`` file each
writes), one after the other, and driven by the same external load generator:
``bench/loadgen/loadgen.c``, a raw-socket NATS client compiled here with
``gcc -O2`` into ``bench/out/`` (gitignored).  A C client costs a few percent
of a core, so what is measured is the server.  When no C compiler exists the
pure-Python ``pyloadgen.py`` stands in, with several publisher processes; its
subscriber then caps what can be measured for nats-server, and the output says
so.

Per server and repetition, a fresh server process serves these phases, each in
fresh client processes:

* ``pubsub``: one subscriber connection (started first; its SUB is confirmed
  with PING/PONG before anything is published), one publisher connection
  writing ``--msgs`` PUBs of ``--size`` bytes in large batches, then PING/PONG.
  The rate is measured at the subscriber, first to last message; the
  publisher's rate (start to final PONG) is reported too.
* ``pubsub_paced``: the same with the publisher sending a PING every
  ``--pace-every`` messages and never more than ``--pace-window`` PINGs
  unanswered, so the server's input is bounded the same way for both servers.
* ``pubsub_subjN``: the publisher rotates over N subjects, one ``bench.core.rot.>``
  subscriber.
* ``fanout``: ``--fanout`` (10) subscriber connections on one subject, one
  publisher of ``--fanout-msgs``; every subscriber gets every message; the
  figure is deliveries/s over the group's first-to-last span.
* ``queue``: the same ten in one queue group: each message goes to one member.
* ``reqrep_seq``: one responder connection, one requester sending
  ``--rr-msgs`` requests strictly one at a time (round trips/s, latency).
* ``reqrep_pipeN``: the same with ``--inflight`` requests outstanding.
* ``reqrep_py_seq`` / ``reqrep_py_pipe``: the same two with nats-py on both
  sides (``bench/loadgen/natspy_rr.py``: ``nc.request`` one at a time, or
  ``--py-inflight`` asyncio workers each doing so; ``msg.respond``), the client
  most Python users have: ``--py-rr-msgs`` requests.

A subscriber that loses its connection before all messages arrived (slow
consumer, server side) is reported as such, with the server log lines that
mention it, never averaged in silently.  The figures of each metric are the
median over ``--repeat`` repetitions; the order of the servers alternates
between repetitions.  Server CPU (user+system, all threads) and the load
average are recorded because the machine is shared.

Run: ``python -m bench.core_bench [--msgs 1000000] [--repeat 3]`` (see
``bench/README.md``).
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import (
    BENCH_DIR,
    OUT_DIR,
    REPO_DIR,
    ServerProc,
    build_loadgen,
    comma_list,
    find_nats_server,
    launch,
    safe_name,
    stop_server,
)

PYLOADGEN = BENCH_DIR / "loadgen" / "pyloadgen.py"
NATSPY_RR = BENCH_DIR / "loadgen" / "natspy_rr.py"

READY_S_MAX = 20.0


def server_cmd(name: str, args: argparse.Namespace, ports_dir: str) -> tuple[list[str], Path]:
    """Command and working directory for ``ref``, ``trijet`` or ``trijet=DIR``.

    ``trijet=DIR`` runs ``python -m node`` from another checkout (A/B runs).
    """
    base = ["-a", "127.0.0.1", "-p", "-1", "--ports_file_dir", ports_dir]
    if name == "ref":
        return [args.nats_server, *base], REPO_DIR
    cwd = Path(name.split("=", 1)[1]) if "=" in name else REPO_DIR
    cmd = [*shlex.split(args.trijet_prefix), sys.executable, "-m", "node", *base]
    return cmd, cwd


def start_server(name: str, args: argparse.Namespace, tag: str) -> ServerProc:
    safe = safe_name(name)
    ports_dir = tempfile.mkdtemp(prefix=f"core_bench_{safe}_")
    cmd, cwd = server_cmd(name, args, ports_dir)
    return launch(name, cmd, cwd, ports_dir, OUT_DIR / f"{safe}-{tag}.log", "core_bench")[0]


# -- load-generator processes ----------------------------------------------------


def lg_cmd(lg: list[str] | None, mode: str, port: int, **opts: Any) -> list[str]:
    base = lg if lg is not None else [sys.executable, str(PYLOADGEN)]
    cmd = [*base, mode, "-H", "127.0.0.1", "-P", str(port)]
    for k, v in opts.items():
        cmd += [f"-{k}", str(v)]
    return cmd


def last_json(text: str) -> dict[str, Any]:
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return dict(json.loads(line))
            except ValueError:
                break
    return {"ok": False, "err": "no result line", "raw": text[-500:]}


def start_waiting(cmd: list[str]) -> subprocess.Popen[str]:
    """Start a subscriber/responder and wait for its READY line."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(p.stdout, selectors.EVENT_READ)
    if not sel.select(READY_S_MAX):
        p.kill()
        raise RuntimeError(f"{cmd[1]} not ready after {READY_S_MAX}s")
    line = p.stdout.readline().strip()
    sel.close()
    if line != "READY":
        p.kill()
        raise RuntimeError(f"{cmd[1]} did not subscribe: {line!r}")
    return p


def finish(p: subprocess.Popen[str], timeout: float) -> dict[str, Any]:
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGTERM)
        out, _ = p.communicate(timeout=5)
    return last_json(out)


def run_pubs(cmds: list[list[str]], timeout: float) -> dict[str, Any]:
    """Run publisher processes together; merge their results."""
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, text=True) for c in cmds]
    res = [finish(p, timeout) for p in procs]
    if len(res) == 1:
        return res[0]
    msgs = sum(int(r.get("msgs", 0)) for r in res)
    el = max(float(r.get("elapsed_s", 0.0)) for r in res)
    return {
        "mode": "pub",
        "ok": all(r.get("ok") for r in res),
        "msgs": msgs,
        "elapsed_s": el,
        "msgs_per_s": msgs / el if el else 0.0,
        "publishers": res,
    }


# -- phases ----------------------------------------------------------------------


def phase_pubsub(
    s: ServerProc, args: argparse.Namespace, paced: bool, nsubjects: int = 0
) -> dict[str, Any]:
    """Publisher(s) to one subscriber; with ``nsubjects`` the publisher rotates
    over that many subjects (``bench.core.rot.<i>``) and the subscriber takes
    ``bench.core.rot.>`` (C load generator only)."""
    lg = args.loadgen
    subj = "bench.core.paced" if paced else "bench.core.pubsub"
    n = args.msgs
    timeout = max(120.0, n / 5000)
    if nsubjects:
        if lg is None:
            raise RuntimeError("rotating subjects need the C load generator")
        subj = "bench.core.rot"
        sub = start_waiting(
            lg_cmd(lg, "sub", s.port, s=subj + ".>", n=n, z=args.size, t=args.idle_s)
        )
        pub = run_pubs(
            [lg_cmd(lg, "pub", s.port, s=subj, n=n, z=args.size, b=args.batch_bytes, S=nsubjects)],
            timeout,
        )
        return {"sub": finish(sub, timeout), "pub": pub}
    sub = start_waiting(lg_cmd(lg, "sub", s.port, s=subj, n=n, z=args.size, t=args.idle_s))
    npub = 1 if lg is not None else args.py_pubs
    counts = [n // npub + (1 if i < n % npub else 0) for i in range(npub)]
    pace = {"i": args.pace_every, "w": args.pace_window} if paced else {}
    cmds = [
        lg_cmd(lg, "pub", s.port, s=subj, n=c, z=args.size, b=args.batch_bytes, **pace)
        for c in counts
    ]
    pub = run_pubs(cmds, timeout)
    subr = finish(sub, timeout)
    return {"sub": subr, "pub": pub}


def phase_fanout(s: ServerProc, args: argparse.Namespace, queue: bool) -> dict[str, Any]:
    """One publisher to ``--fanout`` subscriber connections on one subject: each
    gets every message (fan-out), or, with ``queue``, they form one queue group
    and share the messages (each member stops after ``--queue-idle-s`` without
    one).  The figure is deliveries over the span from the first member's first
    message to the last member's last (CLOCK_MONOTONIC, comparable across the
    processes); a run is good when the deliveries add up (``members * n``, or
    ``n`` for the queue) and every member got some."""
    lg = args.loadgen
    if lg is None:
        raise RuntimeError("fan-out and queue phases need the C load generator")
    subj = "bench.core.queue" if queue else "bench.core.fanout"
    n = args.fanout_msgs
    timeout = max(120.0, n * args.fanout / 5000)
    extra: dict[str, Any] = {"Q": "workers", "t": args.queue_idle_s} if queue else {}
    opts = {"s": subj, "n": n, "z": args.size, "t": args.idle_s, **extra}
    subs = [start_waiting(lg_cmd(lg, "sub", s.port, **opts)) for _ in range(args.fanout)]
    pub = run_pubs(
        [lg_cmd(lg, "pub", s.port, s=subj, n=n, z=args.size, b=args.batch_bytes)], timeout
    )
    res = [finish(p, timeout) for p in subs]
    got = sum(int(r.get("msgs", 0)) for r in res)
    want = n if queue else n * args.fanout
    firsts = [float(r["first_t"]) for r in res if r.get("msgs")]
    lasts = [float(r["last_t"]) for r in res if r.get("msgs")]
    span = max(lasts) - min(firsts) if firsts else 0.0
    ok = got == want and all(r.get("ok") for r in res)
    sub = {
        "ok": ok,
        "msgs": got,
        "expected": want,
        "msgs_per_s": got / span if span > 0 else 0.0,
        "members": [int(r.get("msgs", 0)) for r in res],
        "closed": any(r.get("closed") for r in res),
        "timeout": any(r.get("timeout") for r in res),
        "err": "; ".join(str(r.get("err")) for r in res if r.get("err")),
    }
    return {"sub": sub, "pub": pub}


def phase_reqrep(
    s: ServerProc, args: argparse.Namespace, inflight: int, natspy: bool = False
) -> dict[str, Any]:
    """One responder, one requester with ``inflight`` requests outstanding
    (the C load generator, or nats-py on both sides with ``natspy``)."""
    lg: list[str] | None = [sys.executable, str(NATSPY_RR)] if natspy else args.loadgen
    if natspy:
        n = args.py_rr_msgs
    else:
        n = args.rr_msgs if inflight == 1 else args.rr_pipe_msgs
    subj = f"bench.rr.{inflight}"
    timeout = max(120.0, n / 500)
    rep = start_waiting(lg_cmd(lg, "rep", s.port, s=subj, n=n, z=args.size, t=args.idle_s))
    req = finish(
        subprocess.Popen(
            lg_cmd(lg, "req", s.port, s=subj, n=n, z=args.size, k=inflight, t=args.idle_s),
            stdout=subprocess.PIPE,
            text=True,
        ),
        timeout,
    )
    repr_ = finish(rep, 10.0)
    return {"req": req, "rep": repr_}


@dataclass
class Sample:
    """One phase on one server."""

    server: str
    phase: str
    rep: int
    result: dict[str, Any]
    cpu_s: float
    wall_s: float
    load: tuple[float, float, float]
    notes: list[str] = field(default_factory=list)


def run_phase(s: ServerProc, phase: str, rep: int, args: argparse.Namespace) -> Sample:
    load = os.getloadavg()
    c0, t0 = s.cpu_s(), time.monotonic()
    spy = start_py_spy(s, phase, rep, args)
    try:
        if phase == "pubsub":
            res = phase_pubsub(s, args, paced=False)
        elif phase == "pubsub_paced":
            res = phase_pubsub(s, args, paced=True)
        elif phase.startswith("pubsub_subj"):
            res = phase_pubsub(s, args, paced=False, nsubjects=int(phase[len("pubsub_subj") :]))
        elif phase in ("fanout", "queue"):
            res = phase_fanout(s, args, queue=phase == "queue")
        elif phase == "reqrep_seq":
            res = phase_reqrep(s, args, 1)
        elif phase == "reqrep_py_seq":
            res = phase_reqrep(s, args, 1, natspy=True)
        elif phase == "reqrep_py_pipe":
            res = phase_reqrep(s, args, args.py_inflight, natspy=True)
        else:
            res = phase_reqrep(s, args, args.inflight)
    except RuntimeError as exc:
        res = {"error": str(exc)}
    finally:
        stop_py_spy(spy)
    sample = Sample(s.name, phase, rep, res, s.cpu_s() - c0, time.monotonic() - t0, load)
    for line in s.new_log_lines():
        low = line.lower()
        if "slow" in low or "err" in low or "wrn" in low or "warn" in low:
            sample.notes.append(line.strip())
    client = res.get("sub") or res.get("req") or {}
    if res.get("error"):
        sample.notes.append(f"phase error: {res['error']}")
    elif not client.get("ok"):
        what = "lost its connection" if client.get("closed") else "did not finish"
        sample.notes.append(
            f"client {what}: got {client.get('msgs', client.get('done'))} "
            f"(err={client.get('err')!r}, timeout={client.get('timeout')})"
        )
    return sample


def start_py_spy(s: ServerProc, phase: str, rep: int, args: argparse.Namespace) -> Any:
    wanted = args.py_spy_phases.split(",")
    if not args.py_spy or s.name == "ref" or phase not in wanted or rep != 0:
        return None
    safe = "".join(ch if ch.isalnum() else "_" for ch in s.name)
    out = OUT_DIR / f"{safe}-{phase}.{args.py_spy_format}"
    cmd = [args.py_spy, "record", "--pid", str(s.proc.pid), "-r", "250", "-o", str(out)]
    cmd += [
        "--format",
        args.py_spy_format,
        "--nonblocking",
        *shlex.split(os.environ.get("PY_SPY_EXTRA", "")),
    ]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)  # let it attach before the load starts
    return p, out


def stop_py_spy(spy: Any) -> None:
    if spy is None:
        return
    p, out = spy
    p.send_signal(signal.SIGINT)
    try:
        _, err = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        _, err = p.communicate()
    print(f"  py-spy profile: {out}")
    if err.strip():
        print("  py-spy:", err.strip().splitlines()[-1])
    if out.suffix == ".raw" and out.exists():
        print_collapsed_top(out)


def print_collapsed_top(path: Path, top: int = 20) -> None:
    """Self and inclusive sample shares per function from py-spy's collapsed stacks."""
    self_n: dict[str, int] = defaultdict(int)
    incl_n: dict[str, int] = defaultdict(int)
    total = 0
    for line in path.read_text().splitlines():
        stack, _, cnt = line.rpartition(" ")
        if not cnt.isdigit():
            continue
        n = int(cnt)
        total += n
        frames = stack.split(";")
        names = [f.rsplit(":", 1)[0] if f.count(":") >= 1 else f for f in frames]
        self_n[names[-1]] += n
        for name in set(names):
            incl_n[name] += n
    if not total:
        return
    print(f"  top {top} by self samples ({total} samples):")
    for name, n in sorted(self_n.items(), key=lambda kv: -kv[1])[:top]:
        print(f"    {100 * n / total:5.1f}% self {100 * incl_n[name] / total:5.1f}% incl  {name}")


# -- report ------------------------------------------------------------------------


def metric_values(samples: list[Sample]) -> dict[str, dict[str, list[float]]]:
    """metric -> server -> values over repetitions (failed runs excluded)."""
    out: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for sm in samples:
        r = sm.result
        cores = sm.cpu_s / sm.wall_s if sm.wall_s else 0.0
        if sm.phase.startswith("pubsub") or sm.phase in ("fanout", "queue"):
            sub, pub = r.get("sub", {}), r.get("pub", {})
            key = {
                "pubsub": "pubsub_128B",
                "pubsub_paced": "pubsub_128B_paced",
                "fanout": "fanout_128B",
                "queue": "queue_128B",
            }.get(sm.phase, sm.phase + "_128B")
            if sub.get("ok"):
                out[key][sm.server].append(float(sub["msgs_per_s"]))
                out[key + "_srv_us_per_msg"][sm.server].append(1e6 * sm.cpu_s / sub["msgs"])
                out[key + "_srv_cores"][sm.server].append(cores)
            if pub.get("ok"):
                out[key + "_pub"][sm.server].append(float(pub["msgs_per_s"]))
        else:
            req = r.get("req", {})
            k = int(req.get("inflight", 0))
            py = "py_" if sm.phase.startswith("reqrep_py") else ""
            key = f"reqrep_{py}seq" if sm.phase.endswith("_seq") else f"reqrep_{py}pipe{k}"
            if req.get("ok"):
                out[key][sm.server].append(float(req["rps"]))
                out[key + "_p50_us"][sm.server].append(float(req["lat_us"]["p50"]))
                out[key + "_p99_us"][sm.server].append(float(req["lat_us"]["p99"]))
    return out


LABELS = {
    "pubsub_128B": "pub->sub msgs/s (at subscriber)",
    "pubsub_128B_pub": "pub->sub msgs/s (publisher, to last PONG)",
    "pubsub_128B_srv_us_per_msg": "  server CPU us per msg (lower=better)",
    "pubsub_128B_srv_cores": "  server CPU cores used",
    "pubsub_128B_paced": "paced pub->sub msgs/s (at subscriber)",
    "pubsub_128B_paced_pub": "paced pub->sub msgs/s (publisher)",
    "pubsub_128B_paced_srv_us_per_msg": "  server CPU us per msg (lower=better)",
    "pubsub_128B_paced_srv_cores": "  server CPU cores used",
    "reqrep_seq": "req/rep sequential round trips/s",
    "reqrep_py_seq": "nats-py req/rep sequential round trips/s",
    "fanout_128B": "fan-out 1 pub -> N subs, deliveries/s",
    "fanout_128B_pub": "  publisher msgs/s",
    "fanout_128B_srv_us_per_msg": "  server CPU us per delivery (lower=better)",
    "fanout_128B_srv_cores": "  server CPU cores used",
    "queue_128B": "queue group of N, deliveries/s",
    "queue_128B_pub": "  publisher msgs/s",
    "queue_128B_srv_us_per_msg": "  server CPU us per delivery (lower=better)",
    "queue_128B_srv_cores": "  server CPU cores used",
}


def label(key: str) -> str:
    """The table's wording for a metric key."""
    if key in LABELS:
        return LABELS[key]
    if key.endswith("_p50_us"):
        return "  p50 round-trip latency us (lower=better)"
    if key.endswith("_p99_us"):
        return "  p99 round-trip latency us (lower=better)"
    if key.startswith("pubsub_subj"):
        n = key.removeprefix("pubsub_subj").split("_", 1)[0]
        rest = key.split("_128B", 1)[1]
        return {
            "": f"pub->sub over {int(n):,} subjects msgs/s",
            "_pub": "  publisher msgs/s",
            "_srv_us_per_msg": "  server CPU us per msg (lower=better)",
            "_srv_cores": "  server CPU cores used",
        }.get(rest, key)
    if key.startswith("reqrep_pipe"):
        return f"req/rep {key.removeprefix('reqrep_pipe')} in flight round trips/s"
    if key.startswith("reqrep_py_pipe"):
        return f"nats-py req/rep {key.removeprefix('reqrep_py_pipe')} in flight round trips/s"
    return key


def fmt(v: float | None) -> str:
    if v is None:
        return "-"
    if v >= 1000:
        return f"{v:,.0f}"
    return f"{v:.2f}"


def report(samples: list[Sample], args: argparse.Namespace) -> dict[str, Any]:
    """Print the table of medians and the headline lines; return the summary."""
    vals = metric_values(samples)
    names = list(dict.fromkeys(sm.server for sm in samples))
    others = [n for n in names if n != "ref"]
    short = {n: n if len(n) <= 12 else "…" + n[-11:] for n in names}
    print()
    head = f"{'metric':44}" + "".join(f" {short[n]:>12}" for n in names)
    if "ref" in names:
        head += "".join(
            " " + f"{'ratio' if n == 'trijet' else 'ratio' + str(i)}".rjust(7)
            for i, n in enumerate(others)
        )
    print(head + "  runs")
    print("-" * len(head + "  runs"))
    summary: dict[str, Any] = {}
    for key in vals:
        med = {n: statistics.median(v) if (v := vals[key].get(n)) else None for n in names}
        ref = med.get("ref")
        row = f"{label(key):44}" + "".join(f" {fmt(med[n]):>12}" for n in names)
        entry: dict[str, Any] = {}
        for n in names:
            entry[n] = med[n]
            entry[n + "_all"] = vals[key].get(n, [])
        if "ref" in names:
            for n in others:
                ratio = med[n] / ref if med[n] is not None and ref else None
                entry["ratio" if n == "trijet" else f"ratio[{n}]"] = ratio
                row += f" {'' if ratio is None else f'{ratio:.3f}':>7}"
        runs = "/".join(str(len(vals[key].get(n, []))) for n in names)
        print(f"{row}  {runs}")
        summary[key] = entry
    if len(others) > 1:
        print(
            "ratio columns: "
            + ", ".join(
                f"{'ratio' if n == 'trijet' else 'ratio' + str(i)} = {n}/ref"
                for i, n in enumerate(others)
            )
        )
    notes = [(sm.server, sm.phase, sm.rep, n) for sm in samples for n in sm.notes]
    if notes:
        print("\nnotes (server log lines and client failures):")
        for server, phase, rep, n in notes:
            print(f"  [{server} {phase} #{rep}] {n[:200]}")
    loads = [sm.load[0] for sm in samples]
    print(
        f"\nload average (1 min) at phase starts: min {min(loads):.2f} "
        f"median {statistics.median(loads):.2f} max {max(loads):.2f}; "
        f"cpus {os.cpu_count()}; loadgen: {'C' if args.loadgen else 'Python (fallback)'}"
    )
    if not args.loadgen:
        print("WARNING: Python load generator: the reference figures, so the ratios, are capped")
    print()
    for key in (
        "pubsub_128B",
        "pubsub_128B_paced",
        "pubsub_subj1000_128B",
        "pubsub_subj10000_128B",
        "fanout_128B",
        "queue_128B",
        "reqrep_seq",
        f"reqrep_pipe{args.inflight}",
        "reqrep_py_seq",
        f"reqrep_py_pipe{args.py_inflight}",
    ):
        if key not in summary:
            continue
        e = summary[key]
        for n in others:
            ratio = e.get("ratio" if n == "trijet" else f"ratio[{n}]")
            rtxt = "n/a" if ratio is None else f"{ratio:.3f}"
            print(f"{key}: {n}={fmt(e.get(n))} ref={fmt(e.get('ref'))} ratio={rtxt}")
    for n in others:
        e = summary.get("pubsub_128B", {})
        ratio = e.get("ratio" if n == "trijet" else f"ratio[{n}]")
        if ratio is not None:
            verdict = "met" if ratio >= 0.5 else "NOT met"
            print(f"target pubsub_128B ratio >= 0.5 ({n}): {verdict}")
    return summary


# -- main ----------------------------------------------------------------------------

PHASES = (
    "pubsub",
    "pubsub_paced",
    "pubsub_subj1000",
    "pubsub_subj10000",
    "fanout",
    "queue",
    "reqrep_seq",
    "reqrep_pipe",
    "reqrep_py_seq",
    "reqrep_py_pipe",
)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench.core_bench", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--msgs", type=int, default=1_000_000, help="messages per pub->sub run")
    p.add_argument("--size", type=int, default=128, help="payload bytes")
    p.add_argument("--repeat", type=int, default=3, help="repetitions (median reported)")
    p.add_argument(
        "--servers",
        default="ref,trijet",
        help="comma list of ref, trijet, trijet=DIR (trijet from another checkout, for A/B)",
    )
    p.add_argument("--phases", default=",".join(PHASES), help="comma list of " + ",".join(PHASES))
    p.add_argument("--batch-bytes", type=int, default=262144, help="publisher write size")
    p.add_argument("--pace-every", type=int, default=5000, help="paced: PING every N msgs")
    p.add_argument("--pace-window", type=int, default=2, help="paced: max unanswered PINGs")
    p.add_argument("--rr-msgs", type=int, default=20_000, help="sequential requests")
    p.add_argument("--rr-pipe-msgs", type=int, default=200_000, help="pipelined requests")
    p.add_argument("--inflight", type=int, default=64, help="pipelined requests in flight")
    p.add_argument("--py-rr-msgs", type=int, default=10_000, help="nats-py requests per run")
    p.add_argument("--py-inflight", type=int, default=16, help="nats-py requests in flight")
    p.add_argument("--fanout", type=int, default=10, help="fanout/queue: subscriber connections")
    p.add_argument(
        "--fanout-msgs", type=int, default=100_000, help="fanout/queue: messages published"
    )
    p.add_argument(
        "--queue-idle-s", type=float, default=1.0, help="queue: a member stops after this idle"
    )
    p.add_argument("--idle-s", type=float, default=10.0, help="client gives up after idle")
    p.add_argument("--python-loadgen", action="store_true", help="force the Python fallback")
    p.add_argument("--py-pubs", type=int, default=4, help="publisher processes (Python)")
    p.add_argument("--trijet-prefix", default="", help="command prefix for trijet")
    p.add_argument("--py-spy", default="", help="py-spy binary: profile trijet (1st run)")
    p.add_argument("--py-spy-phases", default="pubsub", help="phases to profile (comma list)")
    p.add_argument("--py-spy-format", default="raw", choices=["raw", "flamegraph", "speedscope"])
    p.add_argument("--json", default="", help="write all raw results to this file")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    OUT_DIR.mkdir(exist_ok=True)
    args.nats_server = find_nats_server()
    args.loadgen = build_loadgen(args.python_loadgen)
    servers = comma_list(args.servers)
    phases = comma_list(args.phases)
    ver = subprocess.run([args.nats_server, "--version"], capture_output=True, text=True)
    print(f"reference: {args.nats_server} ({ver.stdout.strip()})")
    print(f"trijet:    {sys.executable} -m node")
    print(f"loadgen:   {shlex.join(args.loadgen) if args.loadgen else 'pyloadgen.py (fallback)'}")
    print(f"msgs={args.msgs} size={args.size} repeat={args.repeat} load={os.getloadavg()}")
    samples: list[Sample] = []
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for rep in range(args.repeat):
        order = servers if rep % 2 == 0 else list(reversed(servers))
        for name in order:
            s = start_server(name, args, f"{stamp}-{rep}")
            try:
                for phase in phases:
                    sm = run_phase(s, phase, rep, args)
                    samples.append(sm)
                    print(f"[{rep}] {name:6} {phase:13} {brief(sm)}", flush=True)
            finally:
                stop_server(s)
    summary = report(samples, args)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(
                {
                    "args": {k: v for k, v in vars(args).items()},
                    "summary": summary,
                    "samples": [vars(sm) for sm in samples],
                },
                fh,
                indent=1,
                default=str,
            )
    return 0


def brief(sm: Sample) -> str:
    r = sm.result
    cores = sm.cpu_s / sm.wall_s if sm.wall_s else 0.0
    tail = f"srv_cpu={sm.cpu_s:.2f}s ({cores:.2f} cores) load={sm.load[0]:.2f}"
    if "error" in r:
        return f"ERROR {r['error']} {tail}"
    if "sub" in r:
        sub, pub = r["sub"], r["pub"]
        state = (
            "ok" if sub.get("ok") else f"FAILED got={sub.get('msgs')} closed={sub.get('closed')}"
        )
        return (
            f"sub={sub.get('msgs_per_s', 0):,.0f}/s pub={pub.get('msgs_per_s', 0):,.0f}/s "
            f"{state} {tail}"
        )
    req = r["req"]
    state = "ok" if req.get("ok") else f"FAILED done={req.get('done')}"
    lat = req.get("lat_us", {})
    return (
        f"rt/s={req.get('rps', 0):,.0f} k={req.get('inflight')} p50={lat.get('p50', 0):.0f}us "
        f"p99={lat.get('p99', 0):.0f}us {state} {tail}"
    )


if __name__ == "__main__":
    sys.exit(main())
