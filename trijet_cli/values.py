"""Parsing command-line values as natscli does: durations, sizes, policies, subject lists."""

from __future__ import annotations

import re

from trijet_cli.conn import fatal

NS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
NS["m"] = 60 * NS["s"]
NS["h"] = 60 * NS["m"]
NS["d"] = 24 * NS["h"]
NS["w"] = 7 * NS["d"]
NS["M"] = 30 * NS["d"]
NS["y"] = 365 * NS["d"]
_DUR = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h|d|w|M|y)")
_SIZE = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")
_SIZE_UNITS = {
    "": 1,
    "b": 1,
    "k": 1024,
    "kb": 1024,
    "kib": 1024,
    "m": 1024**2,
    "mb": 1024**2,
    "mib": 1024**2,
    "g": 1024**3,
    "gb": 1024**3,
    "gib": 1024**3,
    "t": 1024**4,
    "tb": 1024**4,
    "tib": 1024**4,
}


def duration_ns(text: str, what: str = "duration") -> int:
    """``1h30m``, ``90s``, ``2d``, ``1w``, ``1M``, ``1y`` → nanoseconds; ``-1``/``0`` → 0."""
    t = text.strip()
    if t in ("-1", "0", ""):
        return 0
    pos, total = 0, 0
    for m in _DUR.finditer(t):
        if m.start() != pos:
            break
        total += int(float(m.group(1)) * NS[m.group(2)])
        pos = m.end()
    if pos != len(t) or pos == 0:
        fatal(f"invalid {what} format: {text!r}")
    return total


def size_bytes(text: str, what: str = "size") -> int:
    """``256MB``, ``1GiB``, ``1024`` → bytes (natscli's units are powers of 1024); ``-1`` kept."""
    m = _SIZE.match(text)
    if not m or m.group(2).lower() not in _SIZE_UNITS:
        fatal(f"invalid {what}: {text!r}")
    n = float(m.group(1))
    return -1 if n < 0 else int(n * _SIZE_UNITS[m.group(2).lower()])


def split_subjects(items: list[str] | None) -> list[str]:
    """Subjects given space- or comma-separated, in one flag or many."""
    out: list[str] = []
    for item in items or []:
        out += [s for s in re.split(r"[\s,]+", item) if s]
    return out


STORAGE = {"file": "file", "f": "file", "memory": "memory", "m": "memory"}
RETENTION = {
    "limits": "limits",
    "interest": "interest",
    "work queue": "workqueue",
    "workq": "workqueue",
    "work": "workqueue",
    "workqueue": "workqueue",
}
DISCARD = {"old": "old", "new": "new"}
ACK = {"explicit": "explicit", "all": "all", "none": "none"}
REPLAY = {"instant": "instant", "original": "original"}


def choice(table: dict[str, str], value: str, what: str) -> str:
    v = table.get(value.lower())
    if v is None:
        fatal(f"invalid {what} {value}")
    return v


# how natscli's api types print themselves (String())
STORAGE_NAME = {"file": "File", "memory": "Memory"}
RETENTION_NAME = {"limits": "Limits", "interest": "Interest", "workqueue": "WorkQueue"}
DISCARD_NAME = {"old": "Old", "new": "New"}
ACK_NAME = {"none": "None", "all": "All", "explicit": "Explicit"}
REPLAY_NAME = {"instant": "Instant", "original": "Original"}
