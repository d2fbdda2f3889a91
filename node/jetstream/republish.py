"""Stream ``republish``: every stored message is published again on a mapped subject.

Theory of operation
-------------------
A stream with ``republish: {src, dest, headers_only}`` publishes each
message it stores to ``dest`` mapped from the stored subject (a
``cluster.transform`` from ``src``, default ``>``); subjects outside ``src``
are not republished, nor are duplicates or refused publishes.  The message
is republished only once it is durable: ``attach`` makes the republisher a
listener of the stream, and ``Stream`` calls listeners after the group has
applied *and* synced an entry, before the PubAcks go out (the reference also
republishes before acknowledging).

What is republished is exactly nats-server's (observed on 2.15.1): the
original header block with these lines appended, in this order::

    Nats-Stream: <stream>
    Nats-Subject: <stored subject>
    Nats-Sequence: <seq>
    Nats-Time-Stamp: <RFC 3339 with nanoseconds, UTC>
    Nats-Last-Sequence: <previous seq on that subject, 0 if none>
    Nats-Msg-Size: <payload bytes>          (headers_only only)

and the payload, or no payload with ``headers_only``.  The previous sequence
on the subject is looked up by the state machine before the append (its
``Stored`` effect; ``report_stored`` is on while the stream republishes), so
a per-subject limit that removes that message does not hide it.  A mapped
subject that is not a valid publish subject suppresses the republish, as in
nats-server.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cluster.stream_fsm import ApplyOutcome, Stored
from cluster.transform import cached
from node.jsapi.render import rfc3339_ns

if TYPE_CHECKING:
    from cluster.streams import Stream

__all__ = ["attach", "republish_headers"]

log = logging.getLogger(__name__)

#: publish(subject, payload, headers)
Publish = Callable[[bytes, bytes, bytes], Any]


def republish_headers(
    stream: str, msg: Stored, *, headers_only: bool, original: bytes | None = None
) -> bytes:
    """The header block nats-server republishes ``msg`` with.

    Args:
        stream: The stream's name.
        msg: The stored message.
        headers_only: Add ``Nats-Msg-Size`` (the body is not sent).
        original: The message's own header block (defaults to ``msg.headers``).
    """
    hdr = msg.headers if original is None else original
    lines = (
        f"Nats-Stream: {stream}\r\n"
        f"Nats-Subject: {msg.subject}\r\n"
        f"Nats-Sequence: {msg.seq}\r\n"
        f"Nats-Time-Stamp: {rfc3339_ns(msg.ts_ns)}\r\n"
        f"Nats-Last-Sequence: {msg.subject_last_seq}\r\n"
    )
    if headers_only:
        lines += f"Nats-Msg-Size: {len(msg.payload)}\r\n"
    base = hdr[:-2] if hdr else b"NATS/1.0\r\n"
    return base + lines.encode() + b"\r\n"


def _publishable(subject: str) -> bool:
    return all(t and t not in ("*", ">") for t in subject.split(".")) and not any(
        c in subject for c in " \t\r\n"
    )


class Republisher:
    """The stream listener that republishes ``Stored`` effects."""

    def __init__(self, stream: Stream, publish: Publish) -> None:
        self._stream = stream
        self._publish = publish

    def __call__(self, outcome: ApplyOutcome) -> None:
        stream = self._stream
        rp = stream.cfg.republish
        stream.fsm.report_stored = rp is not None
        if rp is None:
            return
        tr = cached(rp.src or ">", rp.dest)
        if tr is None:
            return
        name = stream.cfg.name
        for e in outcome.effects:
            if type(e) is not Stored:
                continue
            dest = tr.match(e.subject)
            if dest is None or not _publishable(dest):
                continue
            hdr = republish_headers(name, e, headers_only=rp.headers_only)
            self._publish(dest.encode(), b"" if rp.headers_only else e.payload, hdr)


def attach(stream: Stream, publish: Publish) -> Republisher:
    """Make ``stream`` republish through ``publish(subject, payload, headers)``.

    Call once per stream start; the listener follows config updates (the
    stream's current ``cfg.republish`` is read for every applied entry).
    """
    r = Republisher(stream, publish)
    stream.fsm.report_stored = stream.cfg.republish is not None
    stream.listeners.append(r)
    return r
