"""``trijet-server --signal <command>[=<pid>]``: signal a running server, as nats-server does.

Theory of operation: the command names a signal (nats-server's ``CommandToSignal``: ``stop``
SIGKILL, ``quit`` SIGINT, ``term`` SIGTERM, ``reload`` SIGHUP, ``reopen`` SIGUSR1, ``ldm``
SIGUSR2); the part after ``=`` is a pid, a pid file (read when such a file exists), or a pid
prefix ending in ``*`` (every matching server).  Without a pid every running trijet server is
found through ``/proc`` (nats-server runs ``pgrep``); more than one is an error unless a
glob was given.  The process then exits (status 0) without starting a server; errors carry
nats-server's messages and exit 1 through :class:`~node.configtypes.ConfigError`.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Literal

from node.configtypes import ConfigError

#: nats-server's commands and the signals they send
COMMANDS: dict[str, signal.Signals] = {
    "stop": signal.SIGKILL,
    "quit": signal.SIGINT,
    "reopen": signal.SIGUSR1,
    "reload": signal.SIGHUP,
    "ldm": signal.SIGUSR2,
    "term": signal.SIGTERM,
}
PROCESS_NAME = "trijet-server"
#: bound on the processes looked at when none is named
PROC_SCAN_MAX = 100_000


def process_signal(text: str) -> tuple[int, str, Literal["stdout", "stderr"]]:
    """Send the signal ``text`` asks for; returns what :class:`ConfigExit` carries (exit 0).

    Raises:
        ConfigError: invalid parameters, an unknown command, no or several servers, a
            failed ``kill``.
    """
    parts = text.split("=")
    if len(parts) > 2:
        raise ConfigError(f"invalid signal parameters: {parts[2:]}")
    command = parts[0]
    pid_expr = _maybe_read_pid_file(parts[1]) if len(parts) == 2 else ""
    is_glob = pid_expr.endswith("*")
    pid_str = pid_expr.removesuffix("*")
    pids: list[int] = []
    if pid_str:
        try:
            pids = [int(pid_str)]
        except ValueError:
            raise ConfigError(f"invalid pid: {pid_str}") from None
    if not pid_str or is_glob:
        pids = running_servers()
    if len(pids) > 1 and not is_glob:
        listed = "".join(f"\n{p}" for p in pids)
        raise ConfigError(f"multiple {PROCESS_NAME} processes running:{listed}")
    if not pids:
        raise ConfigError(f"no {PROCESS_NAME} processes running")
    signum = COMMANDS.get(command)
    if signum is None:
        raise ConfigError(f'unknown signal "{command}"')
    errors = ""
    for pid in pids:
        if is_glob and not str(pid).startswith(pid_str):
            continue
        try:
            os.kill(pid, signum)
        except OSError as exc:
            errors += f'\nsignal "{command}" {pid}: {exc.strerror}'
    if errors:
        raise ConfigError(errors)
    return 0, "", "stderr"


def _maybe_read_pid_file(text: str) -> str:
    try:
        return Path(text).read_text().strip()
    except OSError:
        return text


def running_servers() -> list[int]:
    """Pids of the running trijet servers (``trijet-server``, ``python -m node``), not ours."""
    me = os.getpid()
    out: list[int] = []
    try:
        entries = os.listdir("/proc")[:PROC_SCAN_MAX]
    except OSError:
        raise ConfigError("unable to resolve pid, try providing one") from None
    for entry in entries:
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if _is_server(argv):
            out.append(int(entry))
    return sorted(out)


def _is_server(argv: list[bytes]) -> bool:
    names = [os.path.basename(a) for a in argv[:2]]
    if b"trijet-server" in names:
        return True
    return argv[1:3] == [b"-m", b"node"]
