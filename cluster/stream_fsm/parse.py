"""Parsing of JetStream publish header values, as nats-server does it.

Theory of operation
-------------------
Sequence headers (``Nats-Expected-Last-Sequence`` ...) are parsed like Go's
``parseInt64`` in nats-server: ASCII digits only, fitting int64; anything else
is "unparsable", which the caller treats as a mismatch.  ``Nats-TTL`` takes
``never``, a Go duration (``1s``, ``1m30s``) or integer seconds, at least 1 s;
its grammar lives in ``store.ttl`` because the stores read it too.
"""

from __future__ import annotations

from store.ttl import NEVER, parse_ttl_s

__all__ = ["parse_msg_ttl_ns", "parse_seq"]


def parse_seq(value: str) -> int | None:
    """nats-server's ``parseInt64`` of a header: digits only, fits int64."""
    if not value or not value.isascii() or not value.isdigit():
        return None
    if len(value.lstrip("0")) > 19:  # past int64 (and past int()'s digit limit)
        return None
    n = int(value)
    return n if n < (1 << 63) else None


def parse_msg_ttl_ns(value: str) -> int | None:
    """``Nats-TTL``: ``never`` (any case; -1), a Go duration or integer
    seconds, at least 1 s, truncated to whole seconds as nats-server does
    (``store.ttl.parse_ttl_s``, which the stores use too).

    Returns:
        The TTL in ns, -1 for ``never``, or None if invalid.
    """
    secs = parse_ttl_s(value)
    if secs is None or secs == NEVER:
        return secs
    return secs * 1_000_000_000
