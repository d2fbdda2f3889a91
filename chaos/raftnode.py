"""One Raft group member as a process, over TcpPeerLinks, with a tiny control port.

Usage::

    python -m chaos.raftnode --id a --members a,b,c --data /tmp/a \\
        [--listen 127.0.0.1:0] [--control 127.0.0.1:0] [--secret-env TRIJET_CLUSTER_SECRET]
        [--peers b=127.0.0.1:7001,c=127.0.0.1:7002] [--fsm toy|counting]

On start it prints one line ``READY raft_port=<p> control_port=<q>`` (ports
may be ephemeral). The control port speaks JSON lines, one request → one
reply::

    {"op": "peers", "peers": {"b": ["127.0.0.1", 7001]}}  -> {"ok": true}
    {"op": "propose", "value": "hex"}                     -> {"ok": true, "result": 3}
    {"op": "wait_leader", "exclude": "a"}                 -> {"ok": true, "leader": "b"}
    {"op": "wait_applied", "count": 10}                   -> {"ok": true, "applied": 10}
    {"op": "wait_stat", "name": "auth_failures", "min": 1}  -> {"ok": true, "stats": {...}}
    {"op": "status"} / {"op": "links"} / {"op": "values"} / {"op": "step_down"}
    {"op": "load", "n": 20000, "size": 128, "concurrency": 256}
        -> proposals/s and commit latency percentiles measured in this process

Errors come back as ``{"ok": false, "error": "<ExceptionName>", "detail": ...}``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import sys
import time
from collections.abc import Callable
from typing import Any

import trio

from chaos.toyfsm import CountingStateMachine, ToyStateMachine
from raft.config import RaftConfig
from raft.errors import NotLeader
from raft.group import RaftGroup
from raft.links import TcpPeerLinks
from raft.storage import MemoryDisk, OsDisk

log = logging.getLogger("chaos.raftnode")


def _addr(s: str) -> tuple[str, int]:
    host, port = s.rsplit(":", 1)
    return host, int(port)


class Node:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        secret = os.environ.get(args.secret_env, "").encode()
        if not secret:
            raise SystemExit(f"set the cluster secret in ${args.secret_env}")
        peers = {}
        for item in filter(None, args.peers.split(",")):
            pid, addr = item.split("=", 1)
            peers[pid] = _addr(addr)
        self.links = TcpPeerLinks(args.id, secret, peers, rng=random.Random())
        self.fsm = CountingStateMachine() if args.fsm == "counting" else ToyStateMachine()
        members = [m for m in args.members.split(",") if m]
        self.group = RaftGroup(
            args.group,
            args.id,
            [m for m in members if m != args.id],
            self.fsm,
            self.links,
            MemoryDisk() if args.disk == "memory" else OsDisk(args.data),
            RaftConfig(),
            fsync_in_thread=not args.fsync_inline,
        )

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(self.links.run)
            listeners = await nursery.start(self.links.serve, *_addr(self.args.listen))
            raft_port = listeners[0].socket.getsockname()[1]
            await nursery.start(self.group.run)
            ctl = await nursery.start(trio.serve_tcp, self.control, _addr(self.args.control)[1])
            ctl_port = ctl[0].socket.getsockname()[1]
            print(f"READY raft_port={raft_port} control_port={ctl_port}", flush=True)

    async def control(self, stream: trio.SocketStream) -> None:
        buf = b""
        try:
            while True:
                data = await stream.receive_some(65536)
                if not data:
                    return
                buf += data
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    reply = await self.handle(json.loads(line))
                    await stream.send_all(json.dumps(reply).encode() + b"\n")
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return

    async def _until(self, pred: Callable[[], bool]) -> None:
        while not pred():
            await self.group.wait_cycle()

    async def handle(self, req: dict[str, Any]) -> dict[str, Any]:
        g = self.group
        op = req.get("op")
        try:
            if op == "peers":
                for pid, (host, port) in req["peers"].items():
                    self.links.add_peer(pid, (host, int(port)))
                return {"ok": True}
            if op == "propose":
                return {"ok": True, "result": await g.propose(bytes.fromhex(req["value"]))}
            if op == "wait_leader":
                exclude = req.get("exclude")
                await self._until(lambda: g.leader_id not in (None, exclude))
                return {"ok": True, "leader": g.leader_id}
            if op == "wait_applied":
                await self._until(lambda: g.status()["applied"] >= req["count"])
                return {"ok": True, "applied": g.status()["applied"]}
            if op == "status":
                return {"ok": True, "status": g.status()}
            if op == "wait_stat":
                await self._until(lambda: self.links.stats[req["name"]] >= req["min"])
                return {"ok": True, "stats": dict(self.links.stats)}
            if op == "links":
                return {"ok": True, "stats": dict(self.links.stats)}
            if op == "values":
                vals = getattr(self.fsm, "values", [])
                return {"ok": True, "values": [v.hex() for v in vals]}
            if op == "step_down":
                return {"ok": True, "leader": await g.step_down()}
            if op == "load":
                return {"ok": True, **(await self.load(req))}
            return {"ok": False, "error": "BadRequest", "detail": f"unknown op {op!r}"}
        except NotLeader as e:
            return {"ok": False, "error": "NotLeader", "leader": e.leader_id}
        except Exception as e:
            return {"ok": False, "error": type(e).__name__, "detail": str(e)}

    async def load(self, req: dict[str, Any]) -> dict[str, Any]:
        n, size, conc = int(req["n"]), int(req.get("size", 128)), int(req.get("concurrency", 256))
        lat: list[float] = []
        payload = os.urandom(size)
        counter = iter(range(n))
        errors = 0

        async def worker() -> None:
            nonlocal errors
            for _ in counter:
                t0 = time.perf_counter()
                try:
                    await self.group.propose(payload)
                except Exception:
                    errors += 1
                    continue
                lat.append(time.perf_counter() - t0)

        prof = None
        if req.get("profile"):
            import cProfile

            prof = cProfile.Profile()
            prof.enable()
        st0 = self.group.status()
        t0 = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for _ in range(conc):
                nursery.start_soon(worker)
        dt = time.perf_counter() - t0
        if prof is not None:
            prof.disable()
            prof.dump_stats(req["profile"])
        st1 = self.group.status()
        lat.sort()

        def pct(p: float) -> float:
            return lat[min(len(lat) - 1, int(p * len(lat)))] * 1e3 if lat else float("nan")

        return {
            "proposals": len(lat),
            "errors": errors,
            "seconds": dt,
            "per_s": len(lat) / dt,
            "p50_ms": pct(0.50),
            "p99_ms": pct(0.99),
            "raft_entries": st1["last_index"] - st0["last_index"],
            "fsyncs": st1["fsyncs"] - st0["fsyncs"],
        }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m chaos.raftnode")
    ap.add_argument("--id", required=True)
    ap.add_argument("--members", required=True, help="comma-separated member ids")
    ap.add_argument("--group", default="g1")
    ap.add_argument("--data", required=True)
    ap.add_argument("--listen", default="127.0.0.1:0")
    ap.add_argument("--control", default="127.0.0.1:0")
    ap.add_argument("--peers", default="", help="id=host:port,... (can also be sent later)")
    ap.add_argument("--secret-env", default="TRIJET_CLUSTER_SECRET")
    ap.add_argument("--fsm", choices=["toy", "counting"], default="toy")
    ap.add_argument("--log-level", default="WARNING")
    ap.add_argument("--disk", choices=["os", "memory"], default="os", help="memory: no fsync")
    ap.add_argument("--fsync-inline", action="store_true", help="fsync on the event loop")
    args = ap.parse_args(argv)
    logging.basicConfig(
        level=args.log_level, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s"
    )
    trio.run(Node(args).run)


if __name__ == "__main__":
    main()
