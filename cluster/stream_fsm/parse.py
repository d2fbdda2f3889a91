"""Parsing of JetStream publish header values, as nats-server does it.

Theory of operation
-------------------
Sequence headers (``Nats-Expected-Last-Sequence`` ...) are parsed like Go's
``parseInt64`` in nats-server: ASCII digits only, fitting int64; anything else
is "unparsable", which the caller treats as a mismatch.  ``Nats-TTL`` takes
``never``, a Go duration (``1s``, ``1m30s``) or integer seconds, at least 1 s.
"""

from __future__ import annotations

__all__ = ["parse_msg_ttl_ns", "parse_seq"]


def parse_seq(value: str) -> int | None:
    """nats-server's ``parseInt64`` of a header: digits only, fits int64."""
    if not value or not value.isascii() or not value.isdigit():
        return None
    n = int(value)
    return n if n < (1 << 63) else None


_GO_UNITS_NS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "μs": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}


def _parse_go_duration_ns(v: str) -> int | None:
    """A Go ``time.ParseDuration`` subset: ``[-+]?(<number><unit>)+``."""
    i, n, total = 0, len(v), 0.0
    sign = 1
    if i < n and v[i] in "+-":
        sign = -1 if v[i] == "-" else 1
        i += 1
    if i >= n:
        return None
    if v[i:] == "0":
        return 0
    while i < n:
        j = i
        while j < n and (v[j].isdigit() or v[j] == ".") and v[j].isascii():
            j += 1
        num = v[i:j]
        if not num or num == "." or num.count(".") > 1:
            return None
        k = j
        while k < n and not (v[k].isdigit() or v[k] == "."):
            k += 1
        unit = _GO_UNITS_NS.get(v[j:k])
        if unit is None:
            return None
        total += float(num) * unit
        i = k
    return int(sign * total)


def parse_msg_ttl_ns(value: str) -> int | None:
    """``Nats-TTL``: ``never`` (-1), a Go duration or integer seconds, >= 1 s.

    Returns:
        The TTL in ns, -1 for ``never``, or None if invalid.
    """
    if value == "never":
        return -1
    ns = _parse_go_duration_ns(value)
    if ns is None:
        secs = parse_seq(value)
        if secs is None:
            return None
        ns = secs * 1_000_000_000
    if ns < 1_000_000_000:
        return None
    return ns
