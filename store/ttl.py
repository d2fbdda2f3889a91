"""Per-message TTL (``Nats-TTL``): parsing and the stores' expiry index.

Theory of operation
-------------------
A message published with ``Nats-TTL`` to a stream with ``allow_msg_ttl``
expires ``ttl`` after its timestamp, whether or not the stream has a
``max_age``; with a ``max_age`` the earlier of the two deadlines wins, and
``Nats-TTL: never`` exempts the message from ``max_age`` altogether.  That
is what nats-server 2.11+ does (memstore/filestore ``expireMsgs``).

The TTL lives only in the message's header block, exactly as published, so
no store format carries it: a store derives it from the headers when a
message is appended, restored or (file store) found at open.  nats-server's
rules, kept here so the stream state machine and the stores agree:

* the value is ``never`` (any case), a Go duration (``90s``, ``1m30s``,
  ``+2s``) or integer seconds (``60``); the TTL is the whole seconds of it
  (Go's ``int64(d.Seconds())``: ``1.9s`` is one second);
* anything else, or less than one second (``500ms``, ``0``), is invalid;
  the state machine rejects such a publish (10165), and a store that meets
  one anyway (a mirrored message) treats it as "no TTL".

Positive TTLs are honoured only when the store's limits say so
(``StreamLimits.msg_ttl``, set from ``allow_msg_ttl``): a mirror without
``allow_msg_ttl`` keeps such messages like any other.  ``never`` is
honoured whenever ``max_age`` applies, as nats-server checks it there.

``TtlIndex`` is the bookkeeping both stores share: a min-heap of
``(deadline_ns, seq)`` with a ``seq -> deadline`` map as the source of truth
(heap entries that disagree with the map are stale and skipped), and the set
of sequences known to say ``never``.  Removal is lazy: the store tells the
index which sequences are still live when it asks for due ones, so deletes,
purges and limits need no hook.  A sequence re-used after a truncate is
re-registered by ``note`` on append, which replaces whatever was known.
Pure: no clock, no I/O.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

__all__ = [
    "MSG_TTL_HEADER",
    "NEVER",
    "TtlIndex",
    "header_value",
    "msg_ttl_s",
    "parse_ttl_s",
]

MSG_TTL_HEADER = b"Nats-TTL"
NEVER = -1
"""``parse_ttl_s`` result for ``never``."""

_SEC_NS = 1_000_000_000
_INT64_MAX = (1 << 63) - 1

_GO_UNITS_NS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "μs": 1_000,
    "ms": 1_000_000,
    "s": _SEC_NS,
    "m": 60 * _SEC_NS,
    "h": 3600 * _SEC_NS,
}


def _go_duration_ns(v: str) -> int | None:
    """Go ``time.ParseDuration``: ``[-+]?(<decimal><unit>)+`` or ``0``."""
    i, n = 0, len(v)
    neg = False
    if i < n and v[i] in "+-":
        neg = v[i] == "-"
        i += 1
    if v[i:] == "0":
        return 0
    if i >= n:
        return None
    total = 0.0
    while i < n:
        j = i
        while j < n and (v[j] in "0123456789."):
            j += 1
        num = v[i:j]
        if not num or num == "." or num.count(".") > 1:
            return None
        k = j
        while k < n and v[k] not in "0123456789.":
            k += 1
        unit = _GO_UNITS_NS.get(v[j:k])
        if unit is None:
            return None
        total += float(num) * unit
        i = k
    if total > _INT64_MAX:
        return None
    return -int(total) if neg else int(total)


def parse_ttl_s(value: str) -> int | None:
    """Parse a ``Nats-TTL`` value as nats-server does.

    Returns:
        Whole seconds (>= 1), ``NEVER`` (-1) for ``never`` in any case, or
        ``None`` when the value is invalid (unparsable or below one second).
    """
    if value.lower() == "never":
        return NEVER
    ns = _go_duration_ns(value)
    if ns is None:
        if not value.isascii() or not value.isdigit() or len(value.lstrip("0")) > 19:
            return None  # (past int64: invalid, and int() would refuse 4,300+ digits)
        secs = int(value)
        return secs if 1 <= secs <= _INT64_MAX // _SEC_NS else None
    if ns < _SEC_NS:
        return None
    return ns // _SEC_NS


def header_value(headers: bytes, name: bytes) -> bytes | None:
    """The first value of header ``name`` (case-sensitive) in a NATS header
    block, trimmed of blanks, or ``None`` if absent.

    Cheap on purpose (a substring search, then one line); the full parser
    lives with the state machine.
    """
    key = b"\r\n" + name + b":"
    i = headers.find(key)
    if i < 0:
        return None
    start = i + len(key)
    end = headers.find(b"\r\n", start)
    if end < 0:
        end = len(headers)
    return headers[start:end].strip(b" \t")


def msg_ttl_s(headers: bytes) -> int:
    """The TTL a stored message's headers ask for.

    Returns:
        Seconds (> 0), ``NEVER``, or 0 for no (or an invalid) ``Nats-TTL``.
    """
    if not headers:
        return 0
    raw = header_value(headers, MSG_TTL_HEADER)
    if raw is None:
        return 0
    ttl = parse_ttl_s(raw.decode("utf-8", "replace"))
    return 0 if ttl is None else ttl


class TtlIndex:
    """Deadlines of messages with a positive TTL, and ``never`` messages."""

    def __init__(self) -> None:
        self._deadline: dict[int, int] = {}
        self._heap: list[tuple[int, int]] = []
        self._never: set[int] = set()

    def clear(self) -> None:
        """Forget everything (the store was reset)."""
        self._deadline.clear()
        self._heap.clear()
        self._never.clear()

    def note(self, seq: int, headers: bytes, ts_ns: int, *, honour_ttl: bool) -> None:
        """Register message ``seq`` (replacing anything known about ``seq``).

        Args:
            seq: The message's sequence.
            headers: Its header block.
            ts_ns: Its timestamp.
            honour_ttl: Positive TTLs count (``StreamLimits.msg_ttl``).
        """
        if MSG_TTL_HEADER not in headers and not self._deadline and not self._never:
            return  # no TTL, nothing known to replace: the common block (a msg id)
        self.note_ttl(seq, msg_ttl_s(headers), ts_ns, honour_ttl=honour_ttl)

    def note_ttl(self, seq: int, ttl: int, ts_ns: int, *, honour_ttl: bool) -> None:
        """``note`` with the TTL already read (``msg_ttl_s``) from the headers."""
        self._deadline.pop(seq, None)
        self._never.discard(seq)
        if ttl == NEVER:
            self._never.add(seq)
        elif ttl > 0 and honour_ttl:
            due = ts_ns + ttl * _SEC_NS
            self._deadline[seq] = due
            heapq.heappush(self._heap, (due, seq))

    def mark_never(self, seq: int) -> None:
        """Remember that ``seq`` says ``never`` (found lazily by a store)."""
        self._never.add(seq)

    def is_never(self, seq: int) -> bool:
        """True if ``seq`` is known to say ``never``."""
        return seq in self._never

    def forget_above(self, seq: int) -> None:
        """Forget every sequence above ``seq`` (the log was truncated there)."""
        for s in [s for s in self._deadline if s > seq]:
            del self._deadline[s]
        self._never = {s for s in self._never if s <= seq}

    def _top(self, live: Callable[[int], bool]) -> tuple[int, int] | None:
        h = self._heap
        while h:
            due, seq = h[0]
            if self._deadline.get(seq) == due and live(seq):
                return due, seq
            heapq.heappop(h)
            if self._deadline.get(seq) == due:
                del self._deadline[seq]
        return None

    def next_deadline(self, live: Callable[[int], bool]) -> int | None:
        """The earliest deadline of a live message (``live(seq)`` says which)."""
        top = self._top(live)
        return None if top is None else top[0]

    def due(self, now_ns: int, live: Callable[[int], bool]) -> list[int]:
        """Live sequences whose deadline is ``<= now_ns``, in sequence order.

        They are forgotten: the caller removes them.
        """
        out = []
        while True:
            top = self._top(live)
            if top is None or top[0] > now_ns:
                break
            heapq.heappop(self._heap)
            del self._deadline[top[1]]
            out.append(top[1])
        out.sort()
        return out

    def peek_due(self, now_ns: int, live: Callable[[int], bool]) -> list[int]:
        """Like ``due`` but forgets nothing (a read)."""
        out = [
            seq
            for due, seq in self._heap
            if due <= now_ns and self._deadline.get(seq) == due and live(seq)
        ]
        out.sort()
        return out

    def __len__(self) -> int:
        return len(self._deadline)
