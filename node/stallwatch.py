"""Event-loop stall diagnostics (off unless ``TRIJET_STALL_MS`` is set).

Raft heartbeats and elections run on the event loop: a task step that holds
the loop longer than the election timeout (0.3 s) deposes a healthy leader.
With ``TRIJET_STALL_MS=<ms>`` in its environment a server logs every task
step that held the loop at least that long (``event=loop_stall task=…``),
and every garbage collection that did (``event=gc_stall``), so the culprit
of a re-election under load is named in the log.  The per-step cost (two
clock reads) is why it is off by default.
"""

from __future__ import annotations

import gc
import logging
import os
import time
from typing import Any

import trio

log = logging.getLogger("node.stall")

ENV = "TRIJET_STALL_MS"


class StallWatch(trio.abc.Instrument):
    """Logs task steps (and GC passes) longer than ``threshold_s``."""

    def __init__(self, threshold_s: float) -> None:
        self.threshold_s = threshold_s
        self._t0 = 0.0
        self._gc_t0 = 0.0
        self.stalls = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self._t0 = time.perf_counter()

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        dt = time.perf_counter() - self._t0
        if dt >= self.threshold_s:
            self.stalls += 1
            log.warning("event=loop_stall task=%s ms=%.1f", task.name, dt * 1000)

    def gc_callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_t0 = time.perf_counter()
            return
        dt = time.perf_counter() - self._gc_t0
        if dt >= self.threshold_s / 4:
            log.warning(
                "event=gc_stall generation=%s ms=%.1f collected=%s",
                info.get("generation"),
                dt * 1000,
                info.get("collected"),
            )


def install_from_env() -> StallWatch | None:
    """Install the watch in the running trio loop if ``TRIJET_STALL_MS`` is set."""
    raw = os.environ.get(ENV)
    if not raw:
        return None
    watch = StallWatch(float(raw) / 1000.0)
    trio.lowlevel.add_instrument(watch)
    gc.callbacks.append(watch.gc_callback)
    log.info("event=stallwatch_on threshold_ms=%s", raw)
    return watch
