"""JetStream R1 publish side by side: trijet against the reference nats-server.

Theory of operation: for every storage (``file``, ``memory``) and mode
(``sync``: one publish outstanding at a time; ``async``: a window of ``--window``
publishes outstanding), each server is started afresh with JetStream in a new
temporary store directory, an R1 stream ``BENCH`` (subjects ``bench.>``) is
created through ``$JS.API.STREAM.CREATE.BENCH``, and ``--sync-msgs`` or
``--async-msgs`` messages of ``--size`` bytes are published to ``bench.js``,
each with its own reply inbox.

The publisher is ``bench/loadgen/loadgen.c`` in its ``jspub`` mode (a raw-socket
C client shared with ``core_bench``): it keeps K publishes in flight (K=1 for
sync), checks that every reply is a PubAck (``{"stream":…,"seq":N}`` without
``"error"``), and reports the rate from the first publish to the last PubAck and
the round-trip latency.  Afterwards ``$JS.API.STREAM.INFO.BENCH`` must report
exactly N messages with last sequence N; a run failing any check is excluded
from the medians and listed under *notes*.  With ``--msg-id`` every publish is an
HPUB carrying a unique ``Nats-Msg-Id`` (the dedupe path; ``jspub -I``, or nats-py
with ``--client py``).

Durability is the same on both sides: the reference runs with
``jetstream { sync_interval: always }`` (nats-server syncs every write before
it acks; the option is checked with ``nats-server -t -c`` and, once running,
in ``/varz``), and trijet always makes a batch durable before acking it.  The
memory rows measure the same path without disk.

Figures per metric are medians over ``--repeat`` repetitions; the server order
alternates between repetitions.  Server CPU per message is recorded because
the machine is shared (2 cores).

Run: ``python -m bench.js_bench [--repeat 3]`` (see ``bench/README.md``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import nats

from bench.common import (
    OUT_DIR,
    JsServer,
    build_loadgen,
    check_ref_config,
    comma_list,
    find_nats_server,
    ref_sync_of,
    safe_name,
    start_js_server,
    stop_server,
)
from bench.core_bench import finish, fmt, print_collapsed_top

STREAM = "BENCH"
SUBJECT = "bench.js"
API_TIMEOUT_S = 10.0
TARGETS = {
    ("always", "sync"): 1.0,
    ("default", "sync"): 0.5,
    ("default", "async"): 0.5,
}
"""Required trijet/reference ratio per (the reference's sync mode, mode), file storage (issue 15).

Against the reference at ``always`` trijet has equal durability (it fsyncs every batch
before acking); against its default the reference acks before any fsync.  Memory storage
keeps the earlier targets (``MEMORY_TARGETS``) against either reference.
"""
MEMORY_TARGETS = {"sync": 0.5, "async": 0.3}

# -- servers -----------------------------------------------------------------------


def start(name: str, args: argparse.Namespace, tag: str) -> JsServer:
    """Start ``ref`` / ``ref-always`` / ``ref-default`` / ``trijet[=DIR]`` in a fresh store dir."""
    store_dir = tempfile.mkdtemp(prefix=f"js_bench_store_{safe_name(name)}_", dir=args.store_parent)
    log_path = OUT_DIR / f"js-{safe_name(name)}-{tag}.log"
    return start_js_server(
        name,
        store_dir,
        log_path,
        "js_bench",
        nats_server=args.nats_server,
        ref_sync="always",
        trijet_prefix=args.trijet_prefix,
    )


def stop_js_server(s: JsServer) -> None:
    stop_server(s.proc)
    subprocess.run(["rm", "-rf", s.store_dir], check=False)


def varz_sync_always(s: JsServer) -> bool | None:
    """``jetstream.config.sync_always`` from ``/varz`` (None when not reported)."""
    if s.http_port is None:
        return None
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{s.http_port}/varz", timeout=5) as r:
            doc = json.load(r)
    except (OSError, ValueError):
        return None
    val = doc.get("jetstream", {}).get("config", {}).get("sync_always")
    return bool(val) if val is not None else None


# -- a tiny request client for the JetStream API --------------------------------------


class ApiClient:
    """One raw NATS connection that sends ``$JS.API`` requests and reads the replies."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=API_TIMEOUT_S)
        self.buf = b""
        self.n = 0
        self._line()  # INFO
        self.sock.sendall(
            b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"no_responders":true,'
            b'"protocol":1,"name":"js_bench"}\r\nSUB _INBOX.jsb.* 1\r\n'
        )

    def _fill(self) -> None:
        data = self.sock.recv(65536)
        if not data:
            raise RuntimeError("server closed the API connection")
        self.buf += data

    def _line(self) -> bytes:
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _take(self, n: int) -> bytes:
        while len(self.buf) < n + 2:
            self._fill()
        data, self.buf = self.buf[:n], self.buf[n + 2 :]
        return data

    def request(self, subject: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send one request and return the decoded JSON reply."""
        self.n += 1
        payload = json.dumps(body).encode() if body is not None else b""
        reply = f"_INBOX.jsb.{self.n}"
        self.sock.sendall(f"PUB {subject} {reply} {len(payload)}\r\n".encode() + payload + b"\r\n")
        while True:
            line = self._line()
            if line == b"PING":
                self.sock.sendall(b"PONG\r\n")
                continue
            if line.startswith(b"-ERR"):
                raise RuntimeError(f"server said {line.decode(errors='replace')}")
            parts = line.split()
            if parts and parts[0] == b"MSG":
                data = self._take(int(parts[-1]))
            elif parts and parts[0] == b"HMSG":
                total, hdr = int(parts[-1]), int(parts[-2])
                raw = self._take(total)
                if not raw[hdr:]:
                    raise RuntimeError(f"{subject}: {raw[:hdr].splitlines()[0]!r}")
                data = raw[hdr:]
            else:
                continue
            if parts[1] == reply.encode():
                return dict(json.loads(data))

    def close(self) -> None:
        self.sock.close()


# -- runs ----------------------------------------------------------------------------------


@dataclass
class Sample:
    """One (storage, mode) run on one server."""

    server: str
    storage: str
    mode: str
    rep: int
    result: dict[str, Any]
    cpu_s: float
    wall_s: float
    load: tuple[float, float, float]
    ok: bool = False
    notes: list[str] = field(default_factory=list)


async def py_publish(
    port: int, n: int, window: int, size: int, idle_s: float, msg_id: bool = False
) -> dict[str, Any]:
    """nats-py: ``js.publish`` one at a time (window 1) or ``js.publish_async`` with
    ``window`` in flight; the same result keys as ``loadgen jspub``.  With ``msg_id``
    every publish carries a unique ``Nats-Msg-Id`` header (HPUB, the dedupe path)."""
    nc = await nats.connect(f"nats://127.0.0.1:{port}")
    js = nc.jetstream(timeout=idle_s, publish_async_max_pending=max(1, window))
    payload = b"x" * size
    lat: list[float] = []
    bad: list[str] = []
    done = 0
    try:
        t0 = time.perf_counter()
        if window <= 1:
            for i in range(n):
                t = time.perf_counter()
                try:
                    hdr = {"Nats-Msg-Id": f"m{i}"} if msg_id else None
                    await js.publish(SUBJECT, payload, headers=hdr)
                except Exception as exc:  # counted, reported
                    bad.append(repr(exc))
                    break
                lat.append(time.perf_counter() - t)
                done += 1
        else:
            futs = []
            for i in range(n):
                sent = time.perf_counter()
                hdr = {"Nats-Msg-Id": f"m{i}"} if msg_id else None
                f = await js.publish_async(SUBJECT, payload, headers=hdr)
                f.add_done_callback(lambda _f, t=sent: lat.append(time.perf_counter() - t))
                futs.append(f)
            for f in futs:
                try:
                    await asyncio.wait_for(f, idle_s)
                    done += 1
                except Exception as exc:  # counted, reported
                    bad.append(repr(exc))
        el = time.perf_counter() - t0
    finally:
        await nc.close()
    lat.sort()
    pct = {"p50": 0.0, "p99": 0.0}
    if lat:
        pct = {
            "p50": 1e6 * lat[len(lat) // 2],
            "p99": 1e6 * lat[min(len(lat) - 1, len(lat) * 99 // 100)],
        }
    return {
        "ok": not bad and done == n,
        "done": done,
        "rps": done / el if el else 0.0,
        "lat_us": pct,
        "acks_ok": done,
        "acks_bad": len(bad),
        "bad_ack": bad[0] if bad else None,
    }


def run_one(s: JsServer, storage: str, mode: str, rep: int, args: argparse.Namespace) -> Sample:
    """Create the stream, publish, verify the stream's state."""
    n = args.sync_msgs if mode == "sync" else args.async_msgs
    window = 1 if mode == "sync" else args.window
    api = ApiClient(s.proc.port)
    notes: list[str] = []
    try:
        created = api.request(
            f"$JS.API.STREAM.CREATE.{STREAM}",
            {"name": STREAM, "subjects": ["bench.>"], "storage": storage, "num_replicas": 1},
        )
        if "error" in created:
            raise RuntimeError(f"stream create failed: {created['error']}")
        # the previous run's dirty pages written back first: with ext4's ordered
        # journal a commit (each fsync) waits for them, so whoever runs next
        # would pay for the one before
        os.sync()
        load = os.getloadavg()
        cmd = [*args.loadgen, "jspub", "-H", "127.0.0.1", "-P", str(s.proc.port)]
        cmd += ["-s", SUBJECT, "-n", str(n), "-z", str(args.size), "-k", str(window)]
        cmd += ["-t", str(args.idle_s)] + (["-I"] if args.msg_id else [])
        spy = start_py_spy(s, storage, mode, rep, args)
        try:
            c0, t0 = s.proc.cpu_s(), time.monotonic()
            if args.client == "py":
                res = asyncio.run(
                    py_publish(s.proc.port, n, window, args.size, args.idle_s, args.msg_id)
                )
            else:
                p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
                res = finish(p, max(120.0, n / 200))
            cpu, wall = s.proc.cpu_s() - c0, time.monotonic() - t0
        finally:
            stop_py_spy(spy)
        info = api.request(f"$JS.API.STREAM.INFO.{STREAM}")
    finally:
        api.close()
    state = info.get("state", {})
    res["stream_msgs"] = state.get("messages")
    res["stream_last_seq"] = state.get("last_seq")
    sample = Sample(s.proc.name, storage, mode, rep, res, cpu, wall, load)
    if not res.get("ok"):
        notes.append(
            f"publisher failed: done={res.get('done')} acks_ok={res.get('acks_ok')} "
            f"acks_bad={res.get('acks_bad')} first bad ack={res.get('bad_ack')!r} "
            f"err={res.get('err')!r} timeout={res.get('timeout')}"
        )
    if state.get("messages") != n or state.get("last_seq") != n:
        notes.append(f"stream state after the run: {state} (expected {n} messages)")
    sample.ok = not notes
    for line in s.proc.new_log_lines():
        low = line.lower()
        if "err" in low or "wrn" in low or "warn" in low or "slow" in low:
            notes.append(line.strip())
    sample.notes = notes
    return sample


def start_py_spy(s: JsServer, storage: str, mode: str, rep: int, args: argparse.Namespace) -> Any:
    if not args.py_spy or ref_sync_of(s.proc.name, "always") is not None or rep != 0:
        return None
    safe = "".join(ch if ch.isalnum() else "_" for ch in s.proc.name)
    out = OUT_DIR / f"js-{safe}-{storage}-{mode}.raw"
    cmd = [args.py_spy, "record", "--pid", str(s.proc.proc.pid), "-r", "250", "-o", str(out)]
    cmd += ["--format", "raw", "--nonblocking"]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)  # let it attach before the load starts
    return p, out


def stop_py_spy(spy: Any) -> None:
    if spy is None:
        return
    p, out = spy
    p.send_signal(signal.SIGINT)
    try:
        p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
    print(f"  py-spy profile: {out}")
    if out.exists():
        print_collapsed_top(out, top=30)


# -- report --------------------------------------------------------------------------------


def values(samples: list[Sample]) -> dict[tuple[str, str, str], dict[str, list[float]]]:
    """(storage, mode, metric) -> server -> values over the successful runs."""
    out: dict[tuple[str, str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for sm in samples:
        if not sm.ok:
            continue
        r = sm.result
        done = int(r["done"])
        out[(sm.storage, sm.mode, "rate")][sm.server].append(float(r["rps"]))
        out[(sm.storage, sm.mode, "p50")][sm.server].append(float(r["lat_us"]["p50"]))
        out[(sm.storage, sm.mode, "p99")][sm.server].append(float(r["lat_us"]["p99"]))
        out[(sm.storage, sm.mode, "cpu")][sm.server].append(1e6 * sm.cpu_s / done)
    return out


METRIC_LABEL = {
    "rate": "msgs/s (first publish to last PubAck)",
    "p50": "  p50 publish->ack us (lower=better)",
    "p99": "  p99 publish->ack us (lower=better)",
    "cpu": "  server CPU us per msg (lower=better)",
}


def report(samples: list[Sample], args: argparse.Namespace) -> dict[str, Any]:
    """Print the table of medians, the ratio and target lines; return the summary."""
    vals = values(samples)
    names = list(dict.fromkeys(sm.server for sm in samples))
    refs = [n for n in names if ref_sync_of(n, "always") is not None]
    others = [n for n in names if n not in refs]
    pairs = [(n, r) for r in refs for n in others]
    short = {n: n if len(n) <= 12 else "…" + n[-11:] for n in names}
    head = f"{'storage':8}{'mode':7}{'metric':40}" + "".join(f" {short[n]:>12}" for n in names)
    head += "".join(f" {'r' + str(i):>7}" for i in range(len(pairs)))
    print()
    for i, (n, r) in enumerate(pairs):
        print(f"r{i} = {n} / {r} (reference at sync_interval {ref_sync_of(r, 'always')})")
    print(head + "  runs")
    print("-" * (len(head) + 6))
    summary: dict[str, Any] = {}
    for key in sorted(vals, key=lambda k: (k[0], k[1] != "sync", list(METRIC_LABEL).index(k[2]))):
        storage, mode, metric = key
        med = {n: statistics.median(v) if (v := vals[key].get(n)) else None for n in names}
        row = f"{storage:8}{mode:7}{METRIC_LABEL[metric]:40}"
        row += "".join(f" {fmt(med[n]):>12}" for n in names)
        entry: dict[str, Any] = {n: med[n] for n in names}
        entry.update({n + "_all": vals[key].get(n, []) for n in names})
        for n, r in pairs:
            ratio = med[n] / med[r] if med[n] is not None and med[r] else None
            entry[f"ratio[{n}/{r}]"] = ratio
            row += f" {'' if ratio is None else f'{ratio:.3f}':>7}"
        runs = "/".join(str(len(vals[key].get(n, []))) for n in names)
        print(f"{row}  {runs}")
        summary["/".join(key)] = entry
    notes = [(sm, n) for sm in samples for n in sm.notes]
    if notes:
        print("\nnotes (failed checks, server log lines):")
        for sm, n in notes:
            print(f"  [{sm.server} {sm.storage} {sm.mode} #{sm.rep}] {n[:200]}")
    loads = [sm.load[0] for sm in samples]
    print(
        f"\nload average (1 min) at run starts: min {min(loads):.2f} "
        f"median {statistics.median(loads):.2f} max {max(loads):.2f}; cpus {os.cpu_count()}"
    )
    client = "nats-py" if args.client == "py" else "C loadgen jspub"
    print(f"client: {client}{' with a unique Nats-Msg-Id per publish' if args.msg_id else ''}")
    print()
    for storage in args.storages:
        for mode in args.modes:
            e = summary.get(f"{storage}/{mode}/rate")
            if e is None:
                continue
            for n, r in pairs:
                sync = ref_sync_of(r, "always")
                if storage == "file":
                    target = TARGETS.get((str(sync), mode))
                else:
                    target = MEMORY_TARGETS[mode]
                ratio = e.get(f"ratio[{n}/{r}]")
                if ratio is None or target is None:
                    verdict = "n/a"
                else:
                    verdict = "met" if ratio >= target else "NOT met"
                rtxt = "n/a" if ratio is None else f"{ratio:.3f}"
                print(
                    f"js_{storage}_{mode}: {n}={fmt(e.get(n))} {r}={fmt(e.get(r))} "
                    f"ratio={rtxt} target>={target if target is not None else '-'}: {verdict}"
                )
    return summary


# -- main ------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench.js_bench", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--sync-msgs", type=int, default=20_000, help="messages per sync run")
    p.add_argument("--async-msgs", type=int, default=200_000, help="messages per async run")
    p.add_argument("--size", type=int, default=128, help="payload bytes")
    p.add_argument("--window", type=int, default=256, help="async: publishes in flight")
    p.add_argument("--repeat", type=int, default=3, help="repetitions (median reported)")
    p.add_argument(
        "--servers",
        default="ref,ref-default,trijet",
        help="comma list of ref (= ref-always), ref-always, ref-default, trijet, trijet=DIR, "
        "trijet-interval[=DIR] (trijet at sync_interval 2m, the reference's default)",
    )
    p.add_argument("--client", default="c", choices=["c", "py"], help="C jspub or nats-py")
    p.add_argument(
        "--msg-id",
        action="store_true",
        help="a unique Nats-Msg-Id header on every publish (C: jspub -I, HPUB; or nats-py)",
    )
    p.add_argument("--storage", default="file,memory", help="comma list of file, memory")
    p.add_argument("--modes", default="sync,async", help="comma list of sync, async")
    p.add_argument("--store-parent", default=None, help="where the temp store dirs go (TMPDIR)")
    p.add_argument("--idle-s", type=float, default=20.0, help="publisher gives up after idle")
    p.add_argument("--trijet-prefix", default="", help="command prefix for trijet")
    p.add_argument("--py-spy", default="", help="py-spy binary: profile trijet (1st repetition)")
    p.add_argument("--json", default="", help="write all raw results to this file")
    args = p.parse_args(argv)
    args.storages = comma_list(args.storage)
    args.modes = comma_list(args.modes)
    bad = [x for x in args.storages if x not in ("file", "memory")]
    bad += [x for x in args.modes if x not in ("sync", "async")]
    if bad:
        p.error(f"unknown storage or mode: {', '.join(bad)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    OUT_DIR.mkdir(exist_ok=True)
    args.nats_server = find_nats_server()
    args.loadgen = build_loadgen(False)
    if args.loadgen is None:
        sys.exit("js_bench: needs the C load generator (gcc or cc)")
    check_ref_config(args.nats_server, "always", "js_bench")
    servers = comma_list(args.servers)
    ver = subprocess.run([args.nats_server, "--version"], capture_output=True, text=True)
    print(f"reference: {args.nats_server} ({ver.stdout.strip()})")
    print(f"trijet:    {sys.executable} -m node -js")
    print(
        f"sync_msgs={args.sync_msgs} async_msgs={args.async_msgs} window={args.window} "
        f"size={args.size} repeat={args.repeat} load={os.getloadavg()}"
    )
    samples: list[Sample] = []
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for rep in range(args.repeat):
        order = servers if rep % 2 == 0 else list(reversed(servers))
        for storage in args.storages:
            for mode in args.modes:
                for name in order:
                    s = start(name, args, f"{stamp}-{storage}-{mode}-{rep}")
                    try:
                        want = ref_sync_of(name, "always")
                        if want == "always" and varz_sync_always(s) is False:
                            sys.exit("js_bench: the reference does not report sync_always")
                        sm = run_one(s, storage, mode, rep, args)
                    except RuntimeError as exc:
                        sm = Sample(name, storage, mode, rep, {}, 0.0, 0.0, os.getloadavg())
                        sm.notes.append(f"run error: {exc}")
                    finally:
                        stop_js_server(s)
                    samples.append(sm)
                    print(f"[{rep}] {name:8} {storage:6} {mode:5} {brief(sm)}", flush=True)
    summary = report(samples, args)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(
                {"args": vars(args), "summary": summary, "samples": [vars(sm) for sm in samples]},
                fh,
                indent=1,
                default=str,
            )
    return 0


def brief(sm: Sample) -> str:
    r = sm.result
    cores = sm.cpu_s / sm.wall_s if sm.wall_s else 0.0
    tail = f"srv_cpu={sm.cpu_s:.2f}s ({cores:.2f} cores) load={sm.load[0]:.2f}"
    if not r:
        return f"ERROR {'; '.join(sm.notes)} {tail}"
    lat = r.get("lat_us", {})
    state = "ok" if sm.ok else "FAILED (see notes)"
    return (
        f"{r.get('rps', 0):>9,.0f} msgs/s p50={lat.get('p50', 0):.0f}us "
        f"p99={lat.get('p99', 0):.0f}us {state} {tail}"
    )


if __name__ == "__main__":
    sys.exit(main())
