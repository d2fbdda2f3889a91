"""The small value parsers of the config file: Go durations (``parse_duration``, ``v_s``),
``host:port``, subjects, user nkeys, and how a value is named in an error (``describe``).

Pure functions with no dependency on the config tree, shared by :mod:`node.conftree` and the
modules it delegates blocks to (:mod:`node.confaccounts`, :mod:`node.confleaf`).
"""

from __future__ import annotations

import re
from typing import Any

from cluster.stream_fsm.markers import go_duration_s

__all__ = [
    "describe",
    "is_user_nkey",
    "parse_duration",
    "split_host_port",
    "v_s",
    "valid_subject",
]


_DURATION_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_DURATION_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def parse_duration(text: str) -> float:
    """Parse a Go duration (``"1h2m3.5s"``, ``"500ms"``, ``"-1s"``, ``"0"``) into seconds.

    Raises:
        ValueError: with Go's wording, ``time: invalid duration "x"``.
    """
    s = text.strip()
    sign = 1.0
    if s[:1] in ("+", "-"):
        sign = -1.0 if s[0] == "-" else 1.0
        s = s[1:]
    if s == "0":
        return 0.0
    if not s:
        raise ValueError(f'time: invalid duration "{text}"')
    total = 0.0
    pos = 0
    while pos < len(s):
        m = _DURATION_PART.match(s, pos)
        if m is None:
            if re.match(r"\d+\.?\d*$", s[pos:]):
                raise ValueError(f'time: missing unit in duration "{text}"')
            raise ValueError(f'time: invalid duration "{text}"')
        total += float(m.group(1)) * _DURATION_UNITS[m.group(2)]
        pos = m.end()
    return sign * total


def split_host_port(text: str) -> tuple[str, int]:
    """Go ``net.SplitHostPort`` + ``Atoi``: ``"h:p"``, ``"[::1]:p"``, ``":p"``."""
    if text.startswith("["):
        end = text.find("]")
        if end == -1 or text[end + 1 : end + 2] != ":":
            raise ValueError(f"could not parse address string {text!r}")
        host, port = text[1:end], text[end + 2 :]
    else:
        if text.count(":") != 1:
            raise ValueError(f"could not parse address string {text!r}")
        host, port = text.split(":")
    try:
        return host, int(port)
    except ValueError:
        raise ValueError(f"could not parse port {port!r}") from None


def valid_subject(subject: str) -> bool:
    if not subject or any(c.isspace() for c in subject):
        return False
    tokens = subject.split(".")
    for i, tok in enumerate(tokens):
        if not tok or (tok == ">" and i != len(tokens) - 1):
            return False
    return True


def is_user_nkey(key: str) -> bool:
    return len(key) == 56 and key.startswith("U") and key.isalnum() and key.isupper()


def describe(v: Any) -> str:
    if isinstance(v, bool):
        return f"boolean {str(v).lower()}"
    if isinstance(v, int):
        return f"integer {v}"
    if isinstance(v, float):
        return f"float {v}"
    if isinstance(v, str):
        return f"string {v!r}"
    if isinstance(v, list):
        return "an array"
    if isinstance(v, dict):
        return "a map"
    return type(v).__name__


def v_s(seconds: float) -> str:
    """Render seconds like Go's ``time.Duration.String`` for whole values (``1m0s``, ``10s``)."""
    whole = int(seconds)
    if whole != seconds:
        return f"{seconds}s"
    return go_duration_s(whole)
