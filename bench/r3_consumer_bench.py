"""R3 consumers and KV side by side: three-node trijet against three-node nats-server.

Theory of operation: for every ``--sync`` mode (``default``: each server's
default durability; ``always``: ``jetstream { sync_interval: always }``, equal
durability with trijet, which always fsyncs before it acknowledges) and every
server, a fresh three-node cluster is started (``tests.support.cluster``, the
same nats-server-format conf files for both; 127.0.0.1; temp stores).  Then:

* **prefill** -- an R3 file stream ``BENCH`` (``bench.>``) gets ``--size``
  messages: ``size - consume`` on ``bench.fill``, then ``--consume`` on
  ``bench.js`` (the C ``loadgen jspub``, 256 in flight, every PubAck checked),
  so a filtered consumer of ``bench.js`` starts behind ``size - consume``
  messages it must skip.  Figure: the prefill's publish rate (``prefill``).
* **pull** -- a durable pull consumer shaped as nats-py's ``pull_subscribe``
  makes it (explicit ack, ``filter_subject: bench.js``, deliver all); the C
  ``jsconsume`` fetches batches of ``--batch`` (100) and acks every message
  (``+ACK``); the consumer must then report ack pending 0 and every message
  acknowledged.  Figure: msgs/s, first request to last message; with
  ``--pull-repeat N`` the median of N runs, each by a new durable over the
  same messages (on a loaded machine single runs swing by 2x).
* **push** -- a durable push consumer (ack none, flow control, heartbeats, as
  nats-py/nats.js push subscribers make them), filtered on ``bench.js``;
  figure: msgs/s, first to last message.
* **kv_put** / **kv_get** -- a bucket stream ``KV_B`` made as nats-py's
  ``create_key_value(replicas=3)`` makes it, prefilled with ``--size`` keys;
  then ``--kv-ops`` puts one at a time (each waits for its PubAck, as
  ``kv.put`` does) and ``--kv-ops`` gets one at a time
  (``$JS.API.DIRECT.GET.KV_B.$KV.B.<key>``, as ``kv.get`` does with direct
  gets), keys spread over the bucket.  Figures: ops/s.

Clients connect to the stream's leader.  ``ratio`` = trijet / reference.  The
machine is shared: the 1-minute load average is printed per cluster.

At ``--size 1000000`` the measured window is bounded: the pull and push
consumers read only the last ``--consume`` messages (``bench.js``), after
skipping the ``size - consume`` others by their filter; the prefill is the
C loadgen's async publishes (256 in flight).

CPU: ``pull_cpu_leader`` / ``push_cpu_leader`` are the consumer leader's
user + system CPU (``/proc/<pid>/stat``) over the phase per consumed message,
in µs (``CONSUMER.INFO``'s ``cluster.leader``: on nats-server it may differ
from the stream's leader); ``*_cpu_all`` the three nodes' together.  Their
ratio column is trijet / reference too (there, lower is better).

Run: ``python -m bench.r3_consumer_bench --size 10000,1000000`` (see
``bench/README.md``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import OUT_DIR, build_loadgen, comma_list
from bench.consumer_bench import build_jsconsume
from bench.core_bench import finish
from bench.js_bench import ApiClient
from tests.support.cluster import Cluster, start_cluster

STREAM = "BENCH"
BUCKET = "B"
DELIVER = "bench_deliver.r3"
SETTLE_S_MAX = 30.0
LEADER_S_MAX = 30.0
POLL_S = 0.05
"""Interval of the bench's polls of STREAM/CONSUMER.INFO (bounded deadlines)."""
TARGETS = {"pull": {"always": 0.5, "default": 0.3}}
PHASES = (
    "prefill",
    "pull",
    "pull_cpu_leader",
    "pull_cpu_all",
    "push",
    "push_cpu_leader",
    "push_cpu_all",
    "kv_prefill",
    "kv_put",
    "kv_get",
)


def leader_index(c: Cluster, api: ApiClient, stream: str) -> int:
    """The index of ``stream``'s leader (waits for one, bounded)."""
    deadline = time.monotonic() + LEADER_S_MAX
    while True:
        info = api.request(f"$JS.API.STREAM.INFO.{stream}")
        leader = (info.get("cluster") or {}).get("leader")
        if leader:
            return c.index(leader)
        if time.monotonic() > deadline:
            raise RuntimeError(f"{stream}: no leader: {info}")
        time.sleep(POLL_S)


def leader_port(c: Cluster, api: ApiClient, stream: str) -> int:
    """The client port of ``stream``'s leader (waits for one, bounded)."""
    return c.specs[leader_index(c, api, stream)].client_port


class Spy:
    """``--py-spy``: a py-spy recording of a trijet stream leader during one phase."""

    def __init__(self, c: Cluster, api: ApiClient, stream: str, phase: str, args: Any) -> None:
        self.p: subprocess.Popen[str] | None = None
        if not args.py_spy or c.kind != "trijet" or phase not in args.py_spy_phases:
            return
        proc = c.procs[leader_index(c, api, stream)]
        assert proc is not None
        out = OUT_DIR / f"r3c-{phase}-{args.size_now}.txt"
        cmd = [args.py_spy, "record", "--pid", str(proc.pid), "-r", "500", "-o", str(out)]
        cmd += ["--format", "raw", "--nonblocking"]
        self.p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)  # attached before the load starts

    def stop(self) -> None:
        if self.p is not None:
            self.p.send_signal(signal.SIGINT)
            self.p.communicate(timeout=60)


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """CPU time of the consumer's leader and of all three nodes over one phase
    (every node's CPU is read first; the leader is looked up at the end)."""

    def __init__(self, c: Cluster, api: ApiClient, consumer: str) -> None:
        self.c, self.api, self.consumer = c, api, consumer
        self.t0 = {p.pid: cpu_s(p.pid) for p in c.procs if p is not None}

    def us_per(self, n: int, phase: str) -> dict[str, float]:
        """µs of CPU per message: ``<phase>_cpu_leader`` and ``<phase>_cpu_all``."""
        used = {pid: cpu_s(pid) - t for pid, t in self.t0.items()}
        info = self.api.request(f"$JS.API.CONSUMER.INFO.{STREAM}.{self.consumer}")
        leader = (info.get("cluster") or {}).get("leader")
        idx = self.c.index(leader) if leader else leader_index(self.c, self.api, STREAM)
        proc = self.c.procs[idx]
        assert proc is not None
        return {
            f"{phase}_cpu_leader": used[proc.pid] * 1e6 / n,
            f"{phase}_cpu_all": sum(used.values()) * 1e6 / n,
        }


def created(doc: dict[str, Any], what: str) -> None:
    if "error" in doc:
        raise RuntimeError(f"{what} failed: {doc['error']}")


def jspub(args: argparse.Namespace, port: int, subject: str, n: int, k: int, keys: int = 0) -> Any:
    cmd = [*args.loadgen, "jspub", "-P", str(port), "-s", subject, "-n", str(n)]
    cmd += ["-z", str(args.msg_size), "-k", str(k), "-t", "30"]
    if keys:
        cmd += ["-K", str(keys)]
    res = finish(subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True), 1800.0)
    if not res.get("ok"):
        raise RuntimeError(f"jspub {subject} failed: {res}")
    return res


def prefill(c: Cluster, api: ApiClient, args: argparse.Namespace) -> dict[str, float]:
    cfg = {"name": STREAM, "subjects": ["bench.>"], "num_replicas": 3, "storage": "file"}
    created(api.request(f"$JS.API.STREAM.CREATE.{STREAM}", cfg), "stream create")
    port = leader_port(c, api, STREAM)
    t0 = time.monotonic()
    fill = args.size_now - args.consume
    if fill > 0:
        jspub(args, port, "bench.fill", fill, 256)
    jspub(args, port, "bench.js", args.consume, 256)
    el = time.monotonic() - t0
    state = api.request(f"$JS.API.STREAM.INFO.{STREAM}").get("state", {})
    if state.get("messages") != args.size_now:
        raise RuntimeError(f"prefill: stream holds {state.get('messages')}")
    return {"prefill": args.size_now / el}


def settled(api: ApiClient, name: str, n: int) -> dict[str, Any]:
    deadline = time.monotonic() + SETTLE_S_MAX
    while True:
        info = api.request(f"$JS.API.CONSUMER.INFO.{STREAM}.{name}")
        floor = (info.get("ack_floor") or {}).get("consumer_seq")
        if (info.get("num_ack_pending"), floor) == (0, n):
            return info
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"{name} after the run: ack_floor={info.get('ack_floor')} "
                f"pending={info.get('num_ack_pending')} delivered={info.get('delivered')}"
            )
        time.sleep(POLL_S)


def pull(c: Cluster, api: ApiClient, args: argparse.Namespace) -> dict[str, float]:
    """``--pull-repeat`` runs, each with a new durable over the same messages;
    the median rate (the runs' rates are printed)."""
    rates = []
    cpus: list[dict[str, float]] = []
    for i in range(args.pull_repeat):
        name = "PULL" if i == 0 else f"PULL{i}"
        rate, cpu = _pull_once(c, api, args, name)
        rates.append(rate)
        cpus.append(cpu)
    if len(rates) > 1:
        print(f"  {c.kind} pull runs: " + " ".join(f"{r:,.0f}" for r in rates), flush=True)
    out = {"pull": statistics.median(rates)}
    for k in cpus[0]:
        out[k] = statistics.median(x[k] for x in cpus)
    return out


def _pull_once(
    c: Cluster, api: ApiClient, args: argparse.Namespace, name: str
) -> tuple[float, dict[str, float]]:
    cfg = {
        "durable_name": name,
        "ack_policy": "explicit",
        "deliver_policy": "all",
        "filter_subject": "bench.js",
    }
    made = api.request(
        f"$JS.API.CONSUMER.CREATE.{STREAM}.{name}", {"stream_name": STREAM, "config": cfg}
    )
    created(made, "pull consumer create")
    port = leader_port(c, api, STREAM)
    cmd = [*args.jsconsume, "-P", str(port), "-s", STREAM, "-c", name]
    cmd += ["-n", str(args.consume), "-b", str(args.batch), "-k", "1"]
    spy = Spy(c, api, STREAM, "pull", args)
    meter = CpuMeter(c, api, name)
    res = finish(subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True), 1800.0)
    spy.stop()
    cpu = meter.us_per(args.consume, "pull")
    if not res.get("ok"):
        raise RuntimeError(f"pull client: {res}")
    settled(api, name, args.consume)
    return float(res["msgs_per_s"]), cpu


def push(c: Cluster, api: ApiClient, args: argparse.Namespace) -> dict[str, float]:
    port = leader_port(c, api, STREAM)
    spy = Spy(c, api, STREAM, "push", args)
    cmd = [*args.jsconsume, "-P", str(port), "-d", DELIVER, "-n", str(args.consume), "-A"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None
    if p.stdout.readline().strip() != "READY":
        p.kill()
        raise RuntimeError("push client did not start")
    cfg = {
        "durable_name": "PUSH",
        "ack_policy": "none",
        "deliver_policy": "all",
        "deliver_subject": DELIVER,
        "filter_subject": "bench.js",
        "flow_control": True,
        "idle_heartbeat": 5_000_000_000,
    }
    meter = CpuMeter(c, api, "PUSH")  # before its creation: delivery starts at once
    made = api.request(
        f"$JS.API.CONSUMER.CREATE.{STREAM}.PUSH", {"stream_name": STREAM, "config": cfg}
    )
    if "error" in made:
        p.kill()
        created(made, "push consumer create")
    res = finish(p, 1800.0)
    spy.stop()
    cpu = meter.us_per(args.consume, "push")
    if not res.get("ok"):
        raise RuntimeError(f"push client: {res}")
    return {"push": float(res["msgs_per_s"]), **cpu}


def kv(c: Cluster, api: ApiClient, args: argparse.Namespace) -> dict[str, float]:
    cfg = {  # what nats-py's create_key_value(bucket="B", replicas=3) sends
        "name": f"KV_{BUCKET}",
        "subjects": [f"$KV.{BUCKET}.>"],
        "max_msgs_per_subject": 1,
        "discard": "new",
        "allow_rollup_hdrs": True,
        "deny_delete": True,
        "allow_direct": True,
        "num_replicas": 3,
        "storage": "file",
        "duplicate_window": 120_000_000_000,
    }
    created(api.request(f"$JS.API.STREAM.CREATE.KV_{BUCKET}", cfg), "bucket create")
    port = leader_port(c, api, f"KV_{BUCKET}")
    keys = args.size_now
    spy = Spy(c, api, f"KV_{BUCKET}", "kv_prefill", args)
    fill = jspub(args, port, f"$KV.{BUCKET}.k", keys, 256, keys=keys)
    spy.stop()
    spy = Spy(c, api, f"KV_{BUCKET}", "kv_put", args)
    put = jspub(args, port, f"$KV.{BUCKET}.k", args.kv_ops, 1, keys=keys)
    spy.stop()
    spy = Spy(c, api, f"KV_{BUCKET}", "kv_get", args)
    cmd = [
        *args.loadgen,
        "req",
        "-P",
        str(port),
        "-s",
        f"$JS.API.DIRECT.GET.KV_{BUCKET}.$KV.{BUCKET}.k",
    ]
    cmd += ["-n", str(args.kv_ops), "-z", "0", "-k", "1", "-t", "30", "-K", str(keys)]
    get = finish(subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True), 1800.0)
    spy.stop()
    if not get.get("ok"):
        raise RuntimeError(f"kv get: {get}")
    state = api.request(f"$JS.API.STREAM.INFO.KV_{BUCKET}").get("state", {})
    if state.get("messages") != keys:
        raise RuntimeError(f"bucket holds {state.get('messages')} values, not {keys}")
    return {
        "kv_prefill": float(fill["rps"]),
        "kv_put": float(put["rps"]),
        "kv_get": float(get["rps"]),
    }


def run_cluster(kind: str, sync: str, args: argparse.Namespace, figures: dict[str, float]) -> None:
    """Every phase on a fresh cluster; ``figures`` gets each as it is measured."""
    work = Path(tempfile.mkdtemp(prefix=f"r3c-{kind}-{sync}-", dir=args.store_parent))
    try:
        _run_phases(kind, sync, args, figures, work)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def _run_phases(
    kind: str, sync: str, args: argparse.Namespace, figures: dict[str, float], work: Path
) -> None:
    with start_cluster(kind, sync_always=sync == "always", workdir=work) as c:
        api = ApiClient(c.specs[0].client_port)
        try:
            if {"prefill", "pull", "push"} & set(args.phases):
                figures.update(prefill(c, api, args))
            if "pull" in args.phases:
                figures.update(pull(c, api, args))
            if "push" in args.phases:
                figures.update(push(c, api, args))
            if {"kv_put", "kv_get"} & set(args.phases):
                figures.update(kv(c, api, args))
        finally:
            api.close()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench.r3_consumer_bench", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--size", default="10000,1000000", help="stream sizes (comma list)")
    p.add_argument("--consume", type=int, default=20_000, help="messages consumed (pull, push)")
    p.add_argument("--kv-ops", type=int, default=2_000, help="KV puts and gets, one at a time")
    p.add_argument("--msg-size", type=int, default=128, help="payload bytes")
    p.add_argument("--batch", type=int, default=100, help="pull: messages per fetch")
    p.add_argument(
        "--pull-repeat", type=int, default=1, help="pull: runs (new durables), median reported"
    )
    p.add_argument("--sync", default="default,always", help="comma list of default, always")
    p.add_argument("--servers", default="trijet,reference", help="comma list")
    p.add_argument("--store-parent", default=None, help="where the temp store dirs go")
    p.add_argument("--keep", action="store_true", help="keep the clusters' directories")
    p.add_argument("--phases", default="pull,push,kv", help="comma list of pull, push, kv")
    p.add_argument("--json", default="", help="write the figures to this file")
    p.add_argument("--py-spy", default="", help="py-spy binary: profile trijet's leader")
    p.add_argument(
        "--py-spy-phases", default="pull,push,kv_prefill,kv_put,kv_get", help="comma list"
    )
    args = p.parse_args(argv)
    args.sizes = [int(x) for x in comma_list(args.size)]
    args.syncs = comma_list(args.sync)
    args.servers_list = comma_list(args.servers)
    args.phases = [
        x
        for p_ in comma_list(args.phases)
        for x in ({"kv": ["kv_prefill", "kv_put", "kv_get"]}.get(p_, [p_]))
    ]
    if min(args.sizes) < args.consume:
        p.error("--consume must not exceed the smallest --size")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    OUT_DIR.mkdir(exist_ok=True)
    args.loadgen = build_loadgen(False)
    if args.loadgen is None:
        sys.exit("r3_consumer_bench: needs the C load generator (gcc or cc)")
    args.jsconsume = build_jsconsume()
    print(
        f"sizes={args.sizes} consume={args.consume} kv_ops={args.kv_ops} batch={args.batch} "
        f"msg_size={args.msg_size} load={os.getloadavg()}",
        flush=True,
    )
    results: dict[str, dict[str, float]] = {}
    for size in args.sizes:
        args.size_now = size
        for sync in args.syncs:
            for kind in args.servers_list:
                key = f"{kind}/{sync}/{size}"
                load = os.getloadavg()[0]
                results[key] = {}
                try:
                    run_cluster(kind, sync, args, results[key])
                except (RuntimeError, OSError) as exc:  # a failed phase or a request timed
                    # out (a loaded machine): the phases before it keep their figures
                    print(f"{key}: ERROR {exc}", flush=True)
                figs = " ".join(f"{k}={v:,.0f}" for k, v in results[key].items())
                print(f"{key:28} {figs} load={load:.2f}", flush=True)
    print()
    print(f"{'size':>8} {'sync':8} {'phase':8} {'trijet':>10} {'reference':>10} {'ratio':>6}")
    for size in args.sizes:
        for sync in args.syncs:
            for phase in PHASES:
                t = results.get(f"trijet/{sync}/{size}", {}).get(phase)
                r = results.get(f"reference/{sync}/{size}", {}).get(phase)
                ratio = f"{t / r:.2f}" if t and r else "n/a"
                target = TARGETS.get(phase, {}).get(sync)
                goal = f"  (target >= {target})" if target else ""
                ts = f"{t:,.0f}" if t else "n/a"
                rs = f"{r:,.0f}" if r else "n/a"
                print(f"{size:>8} {sync:8} {phase:8} {ts:>10} {rs:>10} {ratio:>6}{goal}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
