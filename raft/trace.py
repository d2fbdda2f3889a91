"""Opt-in monotonic stamps along a replicated write's path (a measuring aid).

Set ``TRIJET_RAFT_TRACE`` to a directory: every process appends lines
``event group t_ns last_index commit_index`` to ``<dir>/<pid>.trace``
(``time.monotonic_ns``, comparable across the processes of one machine).  Off
(the default) it costs one module attribute test per stamp site.
"""

from __future__ import annotations

import atexit
import os
import time

__all__ = ["ON", "now", "stamp"]

_DIR = os.environ.get("TRIJET_RAFT_TRACE", "")
ON = bool(_DIR)
_buf: list[str] = []


now = time.monotonic_ns


def stamp(event: str, group: str, last: int, commit: int, t_ns: int = 0) -> None:
    """Record ``event`` of ``group`` at ``t_ns`` (default: now)."""
    _buf.append(f"{event} {group} {t_ns or now()} {last} {commit}\n")
    if len(_buf) >= 256:
        flush()


def flush() -> None:
    if _buf:
        with open(os.path.join(_DIR, f"{os.getpid()}.trace"), "a") as fh:
            fh.writelines(_buf)
        _buf.clear()


if ON:
    atexit.register(flush)
