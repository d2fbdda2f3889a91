"""Subject delete markers (``subject_delete_marker_ttl``), as nats-server 2.11+ leaves them.

Theory of operation
-------------------
With a stream's ``subject_delete_marker_ttl`` set, expiry (``max_age`` or a
per-message ``Nats-TTL``) does not silently take the last message of a
subject away: a *marker* takes its place, so watchers (KV ``keys``/``watch``)
see the subject go.  nats-server's rules, all observed on 2.15.1:

* Expiry walks the due sequences in order.  A due message is the *last* of
  its subject when no other live message of that subject remains once the
  due ones before it are counted out.  The last one is replaced by a marker
  unless it is a marker itself (it has a non-empty ``Nats-Marker-Reason``,
  or ``KV-Operation: PURGE``); every other due message is just removed.
* A marker is a new message at the next sequence on that subject, with an
  empty body and the header block ``Nats-Marker-Reason: MaxAge``,
  ``Nats-TTL: <marker ttl as a Go duration>`` (``2s``, ``1m0s``),
  ``Nats-Rollup: sub`` -- the rollup is what removes the expired message.
  Its time is the expiry's ``now`` (the ``Expire`` op's, never a clock).
  It has no ``Nats-Msg-Id``, so after it the stream's last msg id is "".
* Only expiry leaves markers (nats-server defines the reasons ``Purge`` and
  ``Remove`` but a purge or a delete leaves none).
* A publish whose ``Nats-TTL`` is shorter than the marker TTL is stored
  with ``Nats-TTL: <marker ttl in whole seconds>`` instead (the header moves
  to the end of the block), unless ``max_msgs_per_subject`` is 1: otherwise
  an expired message could outlive its own marker's purpose.

This module holds the pure parts (header forms and the plan of one expiry);
the state machine performs the plan on its store.
"""

from __future__ import annotations

from dataclasses import dataclass

from store.api import StreamStore
from store.errors import MsgNotFound
from store.ttl import MSG_TTL_HEADER, header_value

__all__ = [
    "MARKER_REASON",
    "ExpiryStep",
    "go_duration_s",
    "is_marker",
    "marker_headers",
    "plan_expiry",
    "raise_msg_ttl",
]

MARKER_REASON = "Nats-Marker-Reason"
KV_OPERATION = b"KV-Operation"
KV_PURGE = b"PURGE"
_EMPTY_HDR_LEN = len(b"NATS/1.0\r\n\r\n")
_SEC_NS = 1_000_000_000


@dataclass(frozen=True, slots=True)
class ExpiryStep:
    """What expiry does with one due message.

    Attributes:
        seq: The due message.
        subject: Its subject.
        marker: Replace it with a marker (else just remove it).
    """

    seq: int
    subject: str
    marker: bool


def go_duration_s(secs: int) -> str:
    """Go's ``time.Duration.String()`` of whole seconds (``2s``, ``1m0s``, ``1h0m0s``)."""
    if secs == 0:
        return "0s"
    sign = "-" if secs < 0 else ""
    secs = abs(secs)
    h, rest = divmod(secs, 3600)
    m, s = divmod(rest, 60)
    if h:
        return f"{sign}{h}h{m}m{s}s"
    if m:
        return f"{sign}{m}m{s}s"
    return f"{sign}{s}s"


def marker_headers(ttl_s: int) -> bytes:
    """The header block of a marker left by expiry."""
    return (
        b"NATS/1.0\r\n"
        b"Nats-Marker-Reason: MaxAge\r\n"
        b"Nats-TTL: " + go_duration_s(ttl_s).encode() + b"\r\n"
        b"Nats-Rollup: sub\r\n\r\n"
    )


def is_marker(headers: bytes) -> bool:
    """nats-server's ``isSubjectDeleteMarker``: a non-empty ``Nats-Marker-Reason``
    or ``KV-Operation: PURGE``."""
    if not headers:
        return False
    if header_value(headers, MARKER_REASON.encode()):
        return True
    return header_value(headers, KV_OPERATION) == KV_PURGE


def raise_msg_ttl(headers: bytes, ttl_s: int) -> bytes:
    """Replace every ``Nats-TTL`` line with ``Nats-TTL: <ttl_s>`` at the end of
    the block (nats-server's ``removeHeaderIfPresent`` then ``genHeader``)."""
    key = b"\r\n" + MSG_TTL_HEADER + b":"
    while True:
        i = headers.find(key)
        if i < 0:
            break
        start = i + 2
        end = headers.find(b"\r\n", start)
        if end < 0:
            break
        headers = headers[:start] + headers[end + 2 :]
    base = headers[:-2] if len(headers) > _EMPTY_HDR_LEN else b"NATS/1.0\r\n"
    return base + MSG_TTL_HEADER + b": %d\r\n\r\n" % ttl_s


def min_ttl_s(marker_ttl_ns: int) -> int:
    """The marker TTL in whole seconds (Go's ``int64(d.Seconds())``)."""
    return marker_ttl_ns // _SEC_NS


PER_SUBJECT_LOOKUPS_MAX = 16
"""Up to this many distinct subjects are counted one by one; more at once."""


def plan_expiry(store: StreamStore, due: list[int]) -> list[ExpiryStep]:
    """Decide, for each due sequence in order, whether a marker replaces it.

    A read of ``store`` only.  Sequences no longer live are left out.
    """
    msgs = []
    for seq in due:
        try:
            msgs.append(store.load(seq))
        except MsgNotFound:
            continue
    subjects = {m.subject for m in msgs}
    if len(subjects) <= PER_SUBJECT_LOOKUPS_MAX:
        counts = {s: st.msgs for s in subjects for st in (store.subject_state(s).get(s),) if st}
    else:
        counts = {s: st.msgs for s, st in store.subject_state(">").items() if s in subjects}
    steps: list[ExpiryStep] = []
    for m in msgs:
        left = counts.get(m.subject, 1)  # live messages of the subject not yet counted out
        counts[m.subject] = left - 1
        steps.append(ExpiryStep(m.seq, m.subject, left == 1 and not is_marker(m.headers)))
    return steps
