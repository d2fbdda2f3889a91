"""``trijet cluster``: Ctrl-C stops every node gracefully (not by SIGKILL after a wait)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CLI = "import sys; from node.cli import main; sys.exit(main(sys.argv[1:]))"
READY_S_MAX = 30.0
STOP_S_MAX = 20.0  # bounded wait for the launcher (it waits up to 10 s per node itself)


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
        assert len(lines) == 4, lines
        for line in lines[:3]:  # every node serving before the Ctrl-C
            port = int(line.split(",")[0].rsplit(":", 1)[1])
            deadline = time.monotonic() + READY_S_MAX
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    assert time.monotonic() < deadline, line
                    time.sleep(0.05)  # bounded poll: a port has no event to wait on
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
