"""``trijet cluster``: it says ready once the cluster serves (an R3 stream create is answered
at once), and Ctrl-C stops every node gracefully (not by SIGKILL after a wait)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import nats

REPO = Path(__file__).resolve().parents[2]
CLI = "import sys; from node.cli import main; sys.exit(main(sys.argv[1:]))"
CREATE_TIMEOUT_S = 10.0
STOP_S_MAX = 20.0  # bounded wait for the launcher (it waits up to 10 s per node itself)


async def _create_r3(url: str) -> int:
    """The first request after "ready": one R3 create, answered without a retry."""
    nc = await nats.connect(url)
    try:
        info = await nc.jetstream(timeout=CREATE_TIMEOUT_S).add_stream(
            name="L", subjects=["l.>"], num_replicas=3
        )
        return info.config.num_replicas
    finally:
        await nc.close()


def test_ctrl_c_stops_every_node_gracefully(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen(
        [sys.executable, "-c", CLI, "cluster", "--nodes", "3", "--dir", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=REPO,
        env=env,
        text=True,
        start_new_session=True,  # its own process group: nothing outlives the test
    )
    try:
        assert proc.stdout is not None
        lines = []
        for line in proc.stdout:  # the launcher prints its nodes, then this line
            lines.append(line)
            if line.startswith("Ctrl-C stops the cluster."):
                break
        assert len(lines) == 5, lines
        assert lines[3].startswith("cluster ready: JetStream meta leader n"), lines
        url = lines[0].split(",")[0].split(": ", 1)[1]
        assert asyncio.run(_create_r3(url)) == 3
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=STOP_S_MAX)
        for n in ("n1", "n2", "n3"):
            log = (tmp_path / f"{n}.log").read_text()
            assert "Server Exiting" in log, (n, log[-500:])  # SIGTERM honoured, not SIGKILL
    finally:
        try:  # the launcher and any node it left behind
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
