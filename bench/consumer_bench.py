"""JetStream consumers side by side: pull fetch+ack and push delivery, trijet against nats-server.

Theory of operation: for every storage (``file``, ``memory``) and mode, each
server is started afresh with JetStream in a new temporary store directory
(the reference with ``sync_interval: always``, as in ``js_bench``), an R1
stream ``BENCH`` (subjects ``bench.>``) is created and pre-filled with
``--msgs`` messages of ``--size`` bytes (``loadgen jspub``, every PubAck
checked), then the consumer side is timed:

* ``pull``: a durable pull consumer with explicit acks; the client
  (``bench/loadgen/jsconsume.c``, raw socket) sends ``MSG.NEXT`` requests for
  ``--batch`` messages (``--inflight`` outstanding) and acknowledges every
  message with its own ``+ACK`` (explicit acks, not ack-all); the rate is
  messages from the first request to the last message.  Afterwards the
  consumer must report every message delivered and acknowledged
  (``num_ack_pending`` 0, ack floor = N; waited for, bounded).
* ``fetch``: the same client against a durable pull consumer with
  ``ack_policy`` none (no acks sent): what the PySpark source's reader does
  (issue 17); run it with a larger ``--batch`` (1024) and ``--inflight`` 2.
* ``push``: the client subscribes a deliver subject, then a durable push
  consumer (``ack_policy`` none, flow control and idle heartbeat on, as
  nats.js/nats-py push subscribers create them) is created; the rate is from
  the first to the last message.

The order of the servers alternates between repetitions; figures are medians
over ``--repeat`` runs, and server CPU per message is recorded (the machine
is shared).  Target: pull fetch+ack >= 0.6x the reference.

Run: ``python -m bench.consumer_bench [--repeat 3]`` (see ``bench/README.md``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import (
    BENCH_DIR,
    OUT_DIR,
    JsServer,
    build_loadgen,
    c_compiler,
    check_ref_config,
    comma_list,
    compile_c,
    find_nats_server,
)
from bench.core_bench import finish, start_py_spy, stop_py_spy
from bench.js_bench import ApiClient, stop_js_server
from bench.js_bench import start as start_js_server

STREAM = "BENCH"
SUBJECT = "bench.js"
DELIVER = "bench_deliver.push"
JSCONSUME_SRC = BENCH_DIR / "loadgen" / "jsconsume.c"
TARGETS = {"pull": 0.6}
SETTLE_S_MAX = 20.0
"""Longest wait for the server to apply the last acks before the check."""


def build_jsconsume() -> list[str]:
    """Compile ``jsconsume.c`` when stale; its command."""
    cc = c_compiler()
    if cc is None:
        sys.exit("consumer_bench: needs a C compiler (gcc or cc) for the consumer client")
    exe, _cmd, err = compile_c(cc, JSCONSUME_SRC, "jsconsume")
    if err is not None:
        sys.exit(f"consumer_bench: building jsconsume failed:\n{err}")
    return [str(exe)]


@dataclass
class Sample:
    server: str
    storage: str
    mode: str
    rep: int
    result: dict[str, Any]
    cpu_s: float
    load: tuple[float, float, float]
    ok: bool = True
    notes: list[str] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return float(self.result.get("msgs_per_s", 0.0))


def prefill(s: JsServer, api: ApiClient, storage: str, args: argparse.Namespace) -> None:
    created = api.request(
        f"$JS.API.STREAM.CREATE.{STREAM}",
        {"name": STREAM, "subjects": ["bench.>"], "storage": storage, "num_replicas": 1},
    )
    if "error" in created:
        raise RuntimeError(f"stream create failed: {created['error']}")
    cmd = [*args.loadgen, "jspub", "-H", "127.0.0.1", "-P", str(s.proc.port), "-s", SUBJECT]
    cmd += ["-n", str(args.msgs), "-z", str(args.size), "-k", "256", "-t", "20"]
    if args.msg_id:
        cmd.append("-I")
    res = finish(subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True), 300.0)
    state = api.request(f"$JS.API.STREAM.INFO.{STREAM}").get("state", {})
    if not res.get("ok") or state.get("messages") != args.msgs:
        raise RuntimeError(f"prefill failed: {res} state={state}")


def run_pull(
    s: JsServer, api: ApiClient, args: argparse.Namespace, *, ack: bool = True
) -> tuple[dict[str, Any], list[str]]:
    policy = "explicit" if ack else "none"
    cfg = {"durable_name": "PULL", "ack_policy": policy, "deliver_policy": "all"}
    made = api.request(
        f"$JS.API.CONSUMER.CREATE.{STREAM}.PULL", {"stream_name": STREAM, "config": cfg}
    )
    if "error" in made:
        raise RuntimeError(f"consumer create failed: {made['error']}")
    cmd = [*args.jsconsume, "-P", str(s.proc.port), "-s", STREAM, "-c", "PULL"]
    cmd += ["-n", str(args.msgs), "-b", str(args.batch), "-k", str(args.inflight)]
    if not ack:
        cmd.append("-A")
    res = finish(subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True), 600.0)
    notes: list[str] = []
    if not ack:
        return res, notes
    deadline = time.monotonic() + SETTLE_S_MAX
    while True:
        info = api.request(f"$JS.API.CONSUMER.INFO.{STREAM}.PULL")
        floor = info.get("ack_floor", {}).get("stream_seq")
        if (info.get("num_ack_pending"), floor) == (0, args.msgs) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    if info.get("num_ack_pending") != 0 or floor != args.msgs:
        notes.append(
            f"consumer after the run: ack_floor={info.get('ack_floor')} "
            f"num_ack_pending={info.get('num_ack_pending')} delivered={info.get('delivered')}"
        )
    return res, notes


def run_push(
    s: JsServer, api: ApiClient, args: argparse.Namespace
) -> tuple[dict[str, Any], list[str]]:
    cmd = [*args.jsconsume, "-P", str(s.proc.port), "-d", DELIVER, "-n", str(args.msgs), "-A"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None
    if p.stdout.readline().strip() != "READY":
        raise RuntimeError("push client did not start")
    cfg = {
        "durable_name": "PUSH",
        "ack_policy": "none",
        "deliver_policy": "all",
        "deliver_subject": DELIVER,
        "flow_control": True,
        "idle_heartbeat": 5_000_000_000,
    }
    made = api.request(
        f"$JS.API.CONSUMER.CREATE.{STREAM}.PUSH", {"stream_name": STREAM, "config": cfg}
    )
    if "error" in made:
        p.kill()
        raise RuntimeError(f"consumer create failed: {made['error']}")
    return finish(p, 600.0), []


def run_one(s: JsServer, storage: str, mode: str, rep: int, args: argparse.Namespace) -> Sample:
    api = ApiClient(s.proc.port)
    try:
        prefill(s, api, storage, args)
        load = os.getloadavg()
        spy = start_py_spy(s.proc, f"{storage}-{mode}", rep, args)
        c0 = s.proc.cpu_s()
        try:
            if mode == "push":
                res, notes = run_push(s, api, args)
            else:
                res, notes = run_pull(s, api, args, ack=mode == "pull")
        finally:
            cpu = s.proc.cpu_s() - c0
            stop_py_spy(spy)
    finally:
        api.close()
    sm = Sample(s.proc.name, storage, mode, rep, res, cpu, load)
    if not res.get("ok"):
        notes.append(f"client failed: {res}")
    for line in s.proc.new_log_lines():
        low = line.lower()
        if "error" in low or "[err]" in low or "slow consumer" in low:
            notes.append(line.strip())
    sm.notes, sm.ok = notes, not notes
    return sm


def report(samples: list[Sample], args: argparse.Namespace) -> dict[str, Any]:
    servers = list(dict.fromkeys(sm.server for sm in samples))
    print()
    head = f"{'storage':8} {'mode':5} " + " ".join(f"{s:>14}" for s in servers)
    trijets = [s for s in servers if s != "ref"]
    head += "".join(
        f" {'ratio' + (str(i + 1) if len(trijets) > 1 else ''):>7}" for i in range(len(trijets))
    )
    print(head + "  target  (msgs/s, median; cpu us/msg in brackets)")
    summary: dict[str, Any] = {}
    for storage in args.storages:
        for mode in args.modes:
            row = f"{storage:8} {mode:5} "
            med: dict[str, float] = {}
            for srv in servers:
                good = [
                    sm
                    for sm in samples
                    if (sm.server, sm.storage, sm.mode) == (srv, storage, mode) and sm.ok
                ]
                if not good:
                    row += f"{'n/a':>14} "
                    continue
                med[srv] = statistics.median(sm.rate for sm in good)
                cpu_us = statistics.median(sm.cpu_s / max(args.msgs, 1) * 1e6 for sm in good)
                row += f"{med[srv]:>8,.0f} [{cpu_us:>4.1f}] "
            ratios = {}
            for t in trijets:
                r = med.get(t, 0.0) / med["ref"] if med.get("ref") else None
                ratios[t] = r
                row += f" {r:>6.2f}x" if r is not None else f" {'n/a':>7}"
            target = TARGETS.get(mode)
            row += f"  {target:.1f}x" if target else "     -"
            print(row)
            summary[f"{storage}/{mode}"] = {"median_msgs_per_s": med, "ratio": ratios}
    bad = [sm for sm in samples if not sm.ok]
    if bad:
        print("\nnotes (runs excluded from medians):")
        for sm in bad:
            print(f"  [{sm.rep}] {sm.server} {sm.storage} {sm.mode}: " + "; ".join(sm.notes[:4]))
    return summary


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench.consumer_bench", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--msgs", type=int, default=50_000, help="messages in the stream")
    p.add_argument("--size", type=int, default=128, help="payload bytes")
    p.add_argument("--msg-id", action="store_true", help="publish with a Nats-Msg-Id header (HMSG)")
    p.add_argument("--batch", type=int, default=100, help="pull: messages per request")
    p.add_argument("--inflight", type=int, default=1, help="pull: requests outstanding")
    p.add_argument("--repeat", type=int, default=3, help="repetitions (median reported)")
    p.add_argument("--servers", default="ref,trijet", help="comma list of ref, trijet, trijet=DIR")
    p.add_argument("--storage", default="file,memory", help="comma list of file, memory")
    p.add_argument("--modes", default="pull,push", help="comma list of pull, fetch, push")
    p.add_argument("--store-parent", default=None, help="where the temp store dirs go (TMPDIR)")
    p.add_argument("--trijet-prefix", default="", help="command prefix for trijet")
    p.add_argument("--py-spy", default="", help="py-spy binary: profile trijet (1st run)")
    p.add_argument(
        "--py-spy-phases", default="file-pull", help="<storage>-<mode> phases to profile"
    )
    p.add_argument("--py-spy-format", default="raw", choices=["raw", "flamegraph", "speedscope"])
    p.add_argument("--json", default="", help="write all raw results to this file")
    args = p.parse_args(argv)
    args.storages = comma_list(args.storage)
    args.modes = comma_list(args.modes)
    bad = [x for x in args.storages if x not in ("file", "memory")]
    bad += [x for x in args.modes if x not in ("pull", "fetch", "push")]
    if bad:
        p.error(f"unknown storage or mode: {', '.join(bad)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    OUT_DIR.mkdir(exist_ok=True)
    args.nats_server = find_nats_server()
    args.loadgen = build_loadgen(False)
    if args.loadgen is None:
        sys.exit("consumer_bench: needs the C load generator (gcc or cc)")
    args.jsconsume = build_jsconsume()
    check_ref_config(args.nats_server, "always", "consumer_bench")
    servers = comma_list(args.servers)
    ver = subprocess.run([args.nats_server, "--version"], capture_output=True, text=True)
    print(f"reference: {args.nats_server} ({ver.stdout.strip()}), sync_interval: always")
    print(f"trijet:    {sys.executable} -m node -js")
    print(
        f"msgs={args.msgs} size={args.size} batch={args.batch} inflight={args.inflight} "
        f"repeat={args.repeat} load={os.getloadavg()}"
    )
    samples: list[Sample] = []
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for rep in range(args.repeat):
        order = servers if rep % 2 == 0 else list(reversed(servers))
        for storage in args.storages:
            for mode in args.modes:
                for name in order:
                    s = start_js_server(name, args, f"cons-{stamp}-{storage}-{mode}-{rep}")
                    try:
                        sm = run_one(s, storage, mode, rep, args)
                    except RuntimeError as exc:
                        sm = Sample(name, storage, mode, rep, {}, 0.0, os.getloadavg(), False)
                        sm.notes.append(f"run error: {exc}")
                    finally:
                        stop_js_server(s)
                    samples.append(sm)
                    print(f"[{rep}] {name:8} {storage:6} {mode:4} {brief(sm)}", flush=True)
    summary = report(samples, args)
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "args": {k: v for k, v in vars(args).items()},
                    "summary": summary,
                    "samples": [vars(sm) for sm in samples],
                },
                indent=1,
                default=str,
            )
        )
    return 0


def brief(sm: Sample) -> str:
    if not sm.result:
        return f"ERROR {'; '.join(sm.notes)}"
    r = sm.result
    per = sm.cpu_s / max(r.get("msgs", 1), 1) * 1e6
    state = "ok" if sm.ok else "FAILED: " + "; ".join(sm.notes[:2])
    return (
        f"{sm.rate:>9,.0f} msgs/s ({r.get('msgs')} in {r.get('elapsed_s', 0):.2f}s, "
        f"{r.get('requests', 0)} req, {r.get('statuses', 0)} status) srv_cpu={sm.cpu_s:.2f}s "
        f"({per:.1f} us/msg) load={sm.load[0]:.2f} {state}"
    )


if __name__ == "__main__":
    sys.exit(main())
