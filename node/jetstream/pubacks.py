"""PubAck senders of a stream's capture: one publish's answer, or a batch's.

Theory of operation: the PubAck of a stored message is ``render.pub_ack`` up
to the sequence number (computed once per stream), the decimal sequence and
``}``; it goes to the publisher's reply inbox, a subject used once
(``Router.publish_once``: no cached match, no delivery plan).  A batch of
plain stored results goes out through ``Router.publish_once_many`` (one
match per inbox family, one buffer append per client); anything else --
a duplicate, an error, a publish during an election (503 no responders) --
is answered one by one.  Acks handed out inside a router ``flush()`` (a
drained batch) are woken with it; otherwise each sender flushes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cluster.stream_fsm import ApiErrorResult, PubResult
from cluster.streams import NOT_COMMITTED
from node.jetstream.common import dumps
from node.jsapi import render

NO_RESPONDERS_STATUS = b"NATS/1.0 503\r\n\r\n"
"""The status message a publish during an election gets (no stream leader)."""


def make_acker(
    client: Any, router: Any, stream: str, domain: str | None
) -> Callable[[bytes, Any], None]:
    """The PubAck sender of ``stream``: ``ack(reply, result)``.

    The PubAck of a stored message is ``render.pub_ack`` up to the
    sequence number (computed once here), the decimal sequence and ``}``.
    The reply inbox is used once: ``Router.publish_once`` (no cached
    match, no delivery plan), flushed at once unless the acks are handed
    out inside a ``flush()`` (a drained batch), which wakes them all.
    """
    publish_once = router.publish_once

    def publish(reply: bytes, body: bytes) -> None:
        client.out_msgs += 1
        publish_once(reply, body)
        if not router.flushing:
            router.flush()

    prefix = render.pub_ack(stream, 0, domain=domain).removesuffix("0}").encode()

    def ack(reply: bytes, result: Any) -> None:
        if type(result) is PubResult and not result.duplicate and result.stream == stream:
            client.out_msgs += 1  # the common case, inline
            publish_once(reply, prefix + b"%d}" % result.seq)
            if not router.flushing:
                router.flush()
        elif isinstance(result, PubResult):
            text = render.pub_ack(
                result.stream, result.seq, duplicate=result.duplicate, domain=domain
            )
            publish(reply, text.encode())
        elif isinstance(result, ApiErrorResult):
            publish(reply, pub_error(stream, result.code, result.err_code, result.description))
        elif result is NOT_COMMITTED:  # what a publish during an election gets
            client.out_msgs += 1
            client.publish(reply, b"", headers=NO_RESPONDERS_STATUS)
            if not router.flushing:
                router.flush()

    return ack


def make_reply_acker(
    client: Any,
    router: Any,
    stream: str,
    domain: str | None,
    ack: Callable[[bytes, Any], None],
) -> Callable[[list[bytes], list[Any]], None]:
    """The PubAck sender of ``stream`` for a batch: ``acks(replies, results)``
    (``Stream.reply_acks``).  When every result is a stored message of
    this stream, the bodies are built as in ``make_acker`` and handed to
    ``Router.publish_once_many`` (one match per inbox family, one buffer
    append per client); otherwise ``ack`` each."""
    publish_once_many = router.publish_once_many
    prefix = render.pub_ack(stream, 0, domain=domain).removesuffix("0}").encode()

    def acks(replies: list[bytes], results: list[Any]) -> None:
        bodies = []
        for result in results:
            if type(result) is not PubResult or result[2] or result[0] != stream:
                for reply, r in zip(replies, results, strict=True):
                    ack(reply, r)
                return
            bodies.append(prefix + b"%d}" % result[1])  # (stream, seq, duplicate)
        client.out_msgs += len(replies)
        publish_once_many(replies, bodies)
        if not router.flushing:
            router.flush()

    return acks


def pub_error(stream: str, code: int, err_code: int, description: str) -> bytes:
    d = {
        "error": {"code": code, "err_code": err_code, "description": description},
        "stream": stream,
        "seq": 0,
    }
    return dumps(d).encode()
