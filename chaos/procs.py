"""Start chaos.raftnode processes and talk to their control ports (tests, bench)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import trio

ROOT = Path(__file__).resolve().parents[1]


class Proc:
    def __init__(self, node_id: str, members: list[str], data: Path, secret: bytes, **kw: Any):
        self.node_id = node_id
        self.members = members
        self.data = data
        self.secret = secret
        self.extra = kw
        self.proc: trio.Process | None = None
        self.raft_port = 0
        self.ctl: trio.SocketStream | None = None
        self._buf = b""

    async def start(self, peers: dict[str, int] | None = None) -> None:
        args = [
            sys.executable,
            "-m",
            "chaos.raftnode",
            "--id",
            self.node_id,
            "--members",
            ",".join(self.members),
            "--data",
            str(self.data),
            "--fsm",
            self.extra.get("fsm", "toy"),
            *self.extra.get("args", []),
        ]
        if peers:
            args += ["--peers", ",".join(f"{k}=127.0.0.1:{v}" for k, v in peers.items())]
        env = dict(os.environ, TRIJET_CLUSTER_SECRET=self.secret.decode(), PYTHONPATH=str(ROOT))
        self.proc = await trio.lowlevel.open_process(
            args, stdout=subprocess.PIPE, env=env, cwd=str(ROOT)
        )
        assert self.proc.stdout is not None
        line = b""
        with trio.fail_after(20):
            while not line.endswith(b"\n"):
                chunk = await self.proc.stdout.receive_some(1)
                if not chunk:
                    raise RuntimeError(f"{self.node_id} exited before READY")
                line += chunk
        parts = dict(p.split("=") for p in line.decode().split()[1:])
        self.raft_port = int(parts["raft_port"])
        self.ctl = await trio.open_tcp_stream("127.0.0.1", int(parts["control_port"]))
        self._buf = b""

    async def call(self, **req: Any) -> dict[str, Any]:
        assert self.ctl is not None
        await self.ctl.send_all(json.dumps(req).encode() + b"\n")
        while b"\n" not in self._buf:
            data = await self.ctl.receive_some(1 << 20)
            if not data:
                raise RuntimeError("control connection closed")
            self._buf += data
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)  # type: ignore[no-any-return]

    async def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            await self.proc.wait()
        if self.ctl is not None:
            await self.ctl.aclose()
        self.proc, self.ctl = None, None


async def tell_peers(procs: list[Proc]) -> None:
    """Give every running member the raft ports of the others."""
    live = [p for p in procs if p.proc is not None]
    for p in live:
        peers = {q.node_id: ["127.0.0.1", q.raft_port] for q in live if q is not p}
        assert (await p.call(op="peers", peers=peers))["ok"]
