"""Python ``logging`` set up to print like nats-server.

Theory of operation
-------------------
nats-server log lines look like ``[12345] 2026/11/22 01:23:45.123456 [INF] message``: the
process id, a local (or UTC) timestamp with microseconds, a three-letter level. ``-T=false``
drops the timestamp. Debug (``-D``) and trace (``-V``) are *independent* switches in
nats-server: ``-V`` alone shows ``[TRC]`` lines but not ``[DBG]`` ones, so a filter, not only
the logger level, decides. :data:`TRACE` is a custom level below ``DEBUG``.

:func:`setup_logging` configures the root logger once per call (replacing the handler it
installed before) and then logs the configuration warnings collected by
:func:`node.config.load` at ``[WRN]``.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from node.config import ServerConfig

__all__ = ["LEVEL_TAGS", "TRACE", "NatsFormatter", "setup_logging", "trace"]

#: Trace level (protocol tracing), below DEBUG.
TRACE = 5
logging.addLevelName(TRACE, "TRACE")

LEVEL_TAGS = {
    TRACE: "TRC",
    logging.DEBUG: "DBG",
    logging.INFO: "INF",
    logging.WARNING: "WRN",
    logging.ERROR: "ERR",
    logging.CRITICAL: "FTL",
}

_HANDLER_MARK = "_trijet_handler"


def trace(logger: logging.Logger, msg: str, *args: object) -> None:
    """Log ``msg`` at :data:`TRACE` (cheap when tracing is off)."""
    if logger.isEnabledFor(TRACE):
        logger.log(TRACE, msg, *args)


def _tag(levelno: int) -> str:
    if levelno in LEVEL_TAGS:
        return LEVEL_TAGS[levelno]
    for level in sorted(LEVEL_TAGS, reverse=True):
        if levelno >= level:
            return LEVEL_TAGS[level]
    return "TRC"


class NatsFormatter(logging.Formatter):
    """``[pid] YYYY/MM/DD HH:MM:SS.ffffff [LVL] message`` (timestamp optional)."""

    def __init__(self, *, logtime: bool = True, utc: bool = False) -> None:
        super().__init__()
        self.logtime = logtime
        self.utc = utc

    def format(self, record: logging.LogRecord) -> str:
        msg = record.getMessage()
        if record.exc_info:
            msg = f"{msg}\n{self.formatException(record.exc_info)}"
        prefix = f"[{record.process or os.getpid()}] "
        if self.logtime:
            tm = time.gmtime(record.created) if self.utc else time.localtime(record.created)
            micros = int((record.created % 1) * 1_000_000)
            prefix += time.strftime("%Y/%m/%d %H:%M:%S", tm) + f".{micros:06d} "
        return f"{prefix}[{_tag(record.levelno)}] {msg}"


class _DebugTraceFilter(logging.Filter):
    def __init__(self, *, debug: bool, trace: bool) -> None:
        super().__init__()
        self.debug = debug
        self.trace = trace

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.DEBUG:
            return self.trace
        if record.levelno < logging.INFO:
            return self.debug
        return True


def setup_logging(cfg: ServerConfig, *, stream: IO[str] | None = None) -> logging.Handler:
    """Configure the root logger from ``cfg`` (debug, trace, logtime, logtime_utc, log_file).

    Args:
        cfg: the server configuration; its ``warnings`` are logged at WRN afterwards.
        stream: where to write when ``cfg.log_file`` is None (default ``sys.stderr``).

    Returns:
        The installed handler (tests may remove it).
    """
    root = logging.getLogger()
    for h in list(root.handlers):
        if getattr(h, _HANDLER_MARK, False):
            root.removeHandler(h)
            h.close()
    handler: logging.Handler
    if cfg.log_file:
        handler = logging.FileHandler(cfg.log_file, encoding="utf-8")
    else:
        handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    setattr(handler, _HANDLER_MARK, True)
    handler.setFormatter(NatsFormatter(logtime=cfg.logtime, utc=cfg.logtime_utc))
    handler.addFilter(_DebugTraceFilter(debug=cfg.debug, trace=cfg.trace))
    root.addHandler(handler)
    if cfg.trace:
        root.setLevel(TRACE)
    elif cfg.debug:
        root.setLevel(logging.DEBUG)
    else:
        root.setLevel(logging.INFO)
    log = logging.getLogger("node.config")
    for w in cfg.warnings:
        log.warning("%s", w)
    return handler
