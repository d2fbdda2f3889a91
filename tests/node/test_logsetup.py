"""node.logsetup: nats-server log line format and levels."""

from __future__ import annotations

import io
import logging
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from node.config import ServerConfig
from node.logsetup import TRACE, setup_logging, trace


@pytest.fixture
def restore_root() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for h in list(root.handlers):
        if h not in handlers:
            root.removeHandler(h)
            h.close()
    root.setLevel(level)


def emit(cfg: ServerConfig) -> list[str]:
    buf = io.StringIO()
    setup_logging(cfg, stream=buf)
    log = logging.getLogger("node.test")
    trace(log, "t %s", 1)
    log.debug("d")
    log.info("Server is ready")
    log.warning("w")
    log.error("e")
    log.critical("f")
    return buf.getvalue().splitlines()


def test_format_with_time(restore_root: None) -> None:
    lines = emit(ServerConfig())
    assert len(lines) == 4
    pat = rf"^\[{os.getpid()}\] \d{{4}}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{{6}} \[INF\] Server is ready$"
    assert re.match(pat, lines[0]), lines[0]
    assert [ln.split("[", 2)[2][:3] for ln in lines] == ["INF", "WRN", "ERR", "FTL"]


def test_no_logtime(restore_root: None) -> None:
    lines = emit(ServerConfig(logtime=False))
    assert lines[0] == f"[{os.getpid()}] [INF] Server is ready"


def test_debug_and_trace_are_independent(restore_root: None) -> None:
    tags = lambda lines: [ln.split("] ")[1][1:4] for ln in lines]  # noqa: E731
    assert tags(emit(ServerConfig(logtime=False, debug=True)))[:2] == ["DBG", "INF"]
    only_trace = tags(emit(ServerConfig(logtime=False, trace=True)))
    assert only_trace[:2] == ["TRC", "INF"] and "DBG" not in only_trace
    both = tags(emit(ServerConfig(logtime=False, debug=True, trace=True)))
    assert both[:3] == ["TRC", "DBG", "INF"]
    assert TRACE < logging.DEBUG


def test_log_file_and_warnings(tmp_path: Path, restore_root: None) -> None:
    path = tmp_path / "s.log"
    cfg = ServerConfig(log_file=str(path), logtime=False, warnings=["x.conf:1:1: ignored"])
    handler = setup_logging(cfg)
    logging.getLogger("node.test").info("hello")
    handler.flush()
    text = path.read_text().splitlines()
    assert text[0].endswith("[WRN] x.conf:1:1: ignored")
    assert text[1].endswith("[INF] hello")
