"""The sink's publisher: pipelined publishes with a ``Nats-Msg-Id`` each, every PubAck awaited.

Theory of operation: ``Publisher`` publishes with a ``Nats-Msg-Id`` each (headers as a block from
``encode_headers``, so a repeated name goes out with all its values), at most
``max_inflight`` unacknowledged, and ``flush()`` returns only when every PubAck arrived
(``duplicate`` counted).  When no PubAck at all arrives for the timeout, the unacknowledged messages are sent again with the
same ids (safe: the stream drops what it has; needed after a reconnect lost them); five
such rounds fail the task.  An error PubAck fails the task.  The sink sends each Arrow
batch with ``publish_many``: the batch's ``HPUB`` frames are built here (subjects and sizes
checked as nats-py checks them) and queued on nats-py's connection in one write per window
of ``max_inflight``; the PubAcks reach ``Publisher`` by a direct call from nats-py's parser
(``RawHeadersClient.direct``: no ``Msg``, queue or task per ack) and the common PubAck is
read without a JSON decode.  Ids and the wait for every PubAck are unchanged, so a re-run
is still dropped by the duplicate window.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from nats import errors as nats_errors
from nats.aio.client import Client
from nats.aio.msg import Msg

from pipeline.natsio import JetStreamError, RawHeadersClient

log = logging.getLogger(__name__)


_DUPLICATE = re.compile(rb'"duplicate"\s*:\s*true')
"""A PubAck's duplicate flag (nats-server writes ``"duplicate": true``)."""

_BAD_SUBJECT = re.compile(r"[ \t\r\n]")
"""What nats-py refuses in a publish subject (white space and CR/LF; token shape is the
server's business)."""


@dataclass
class PublishResult:
    """What a task's publishes came to."""

    published: int = 0
    duplicates: int = 0
    retries: int = 0


class Publisher:
    """Pipelined publishes with every PubAck awaited (see the module doc).

    Cancellation: messages already sent may be stored; a re-run republishes them with the same
    ``Nats-Msg-Id`` and the stream drops them within its duplicate window.
    """

    def __init__(self, nc: Client, *, max_inflight: int = 2048, timeout_s: float = 10.0) -> None:
        self.nc = nc
        self.max_inflight = max_inflight
        self.timeout_s = timeout_s
        self.result = PublishResult()
        self._prefix = nc.new_inbox() + "."
        self._next = 0
        self._inflight: dict[str, tuple[str, bytes, bytes | dict[str, str] | None]] = {}
        self._room = asyncio.Event()
        self._room.set()
        self._drained = asyncio.Event()
        self._error: BaseException | None = None
        self._sub: Any = None
        self._acked = 0
        self._checked_subjects: set[str] = set()

    async def start(self) -> None:
        self._sub = await self.nc.subscribe(self._prefix + "*", cb=self._on_ack)
        if isinstance(self.nc, RawHeadersClient):
            self.nc.direct(self._sub._id, self._on_ack_raw)

    async def _on_ack(self, msg: Msg) -> None:
        status = (msg.headers or {}).get("Status")
        self._ack(msg.subject[len(self._prefix) :], msg.data, status)

    def _on_ack_raw(self, subject: bytes, data: bytes, header: bytes | None) -> None:
        status = header[9:12].decode() if header and len(header) >= 12 else None
        self._ack(subject[len(self._prefix) :].decode(), data, status)

    def _ack(self, token: str, data: bytes, status: str | None) -> None:
        if token not in self._inflight:
            return  # an ack of an earlier attempt that was retried
        if status == "503":
            # no responders: the stream is not there (yet/any more): retry then fail
            return
        ack: dict[str, Any]
        if data.startswith(b'{"stream":') and b'"error"' not in data:
            # the common PubAck without JSON decoding (a stream name holds no quote)
            ack = {"duplicate": _DUPLICATE.search(data) is not None}
        else:
            try:
                ack = json.loads(data) if data else {}
            except ValueError:
                ack = {}
        if "error" in ack or not ack:
            err = ack.get("error") or {"description": f"status {status}"}
            self._error = JetStreamError(
                f"publish to {self._inflight[token][0]}: {err.get('code')} {err.get('err_code')} "
                f"{err.get('description')}"
            )
            self._room.set()
            self._drained.set()
            return
        del self._inflight[token]
        self._acked += 1
        if ack.get("duplicate"):
            self.result.duplicates += 1
        else:
            self.result.published += 1
        if len(self._inflight) < self.max_inflight:
            self._room.set()
        if not self._inflight:
            self._drained.set()

    async def publish(
        self, subject: str, data: bytes, headers: bytes | dict[str, str] | None
    ) -> None:
        """Send one message (waits while ``max_inflight`` are unacknowledged).

        ``headers``: nats-py's dict, or a block from ``encode_headers`` (multi-valued; needs a
        connection from ``connect(raw_headers=True)``)."""
        if isinstance(headers, bytes) and not isinstance(self.nc, RawHeadersClient):
            raise TypeError("a header block needs a connect(raw_headers=True) connection")
        while len(self._inflight) >= self.max_inflight:
            if self._error:
                raise self._error
            self._room.clear()
            try:
                await asyncio.wait_for(self._room.wait(), self.timeout_s)
            except TimeoutError:
                await self._resend()
        if self._error:
            raise self._error
        token = str(self._next)
        self._next += 1
        self._inflight[token] = (subject, data, headers)
        self._drained.clear()
        await self._send(token, subject, data, headers)

    async def publish_many(self, items: Sequence[tuple[str, bytes, bytes | None]]) -> None:
        """Send ``(subject, payload, header block or None)`` messages, as many per write as
        ``max_inflight`` leaves room for (needs a ``connect(raw_headers=True)`` connection).

        The frames are built here, so subjects and sizes are checked here as nats-py would."""
        nc = self.nc
        if not isinstance(nc, RawHeadersClient):
            raise TypeError("publish_many needs a connect(raw_headers=True) connection")
        prefix, inflight, max_payload = self._prefix, self._inflight, nc.max_payload
        checked = self._checked_subjects
        i = 0
        while i < len(items):
            while len(inflight) >= self.max_inflight:
                if self._error:
                    raise self._error
                self._room.clear()
                try:
                    await asyncio.wait_for(self._room.wait(), self.timeout_s)
                except TimeoutError:
                    await self._resend()
            if self._error:
                raise self._error
            part = items[i : i + self.max_inflight - len(inflight)]
            i += len(part)
            frames: list[bytes] = []
            nxt = self._next
            for subject, data, hdr in part:
                if subject not in checked:
                    if not subject or _BAD_SUBJECT.search(subject):
                        raise nats_errors.BadSubjectError(f"invalid subject {subject!r}")
                    checked.add(subject)
                size = len(data) + (len(hdr) if hdr else 0)
                if size > max_payload:
                    raise nats_errors.MaxPayloadError(f"{size} bytes > max_payload {max_payload}")
                token = str(nxt)
                nxt += 1
                inflight[token] = (subject, data, hdr)
                if hdr:
                    frames.append(
                        b"HPUB %s %s%s %d %d\r\n%s%s\r\n"
                        % (
                            subject.encode(),
                            prefix.encode(),
                            token.encode(),
                            len(hdr),
                            size,
                            hdr,
                            data,
                        )
                    )
                else:
                    frames.append(
                        b"PUB %s %s%s %d\r\n%s\r\n"
                        % (subject.encode(), prefix.encode(), token.encode(), size, data)
                    )
            self._next = nxt
            self._drained.clear()
            await nc.send_raw(b"".join(frames), len(frames))

    async def _send(
        self, token: str, subject: str, data: bytes, headers: bytes | dict[str, str] | None
    ) -> None:
        # a bytes block is sent as is by RawHeadersClient (nats-py's signature says dict)
        hdrs: Any = headers
        await self.nc.publish(subject, data, reply=self._prefix + token, headers=hdrs)

    async def _resend(self) -> None:
        self.result.retries += 1
        if self.result.retries > 5:
            raise JetStreamError(f"{len(self._inflight)} publishes unacknowledged after retries")
        log.warning("publish acks overdue count=%d: resending", len(self._inflight))
        for token, (subject, data, headers) in list(self._inflight.items()):
            await self._send(token, subject, data, headers)

    async def flush(self) -> PublishResult:
        """Wait until every publish is acknowledged (resending overdue ones); the totals."""
        while self._inflight:
            if self._error:
                raise self._error
            self._drained.clear()
            acked = self._acked
            try:
                await asyncio.wait_for(self._drained.wait(), self.timeout_s)
            except TimeoutError:
                if self._acked == acked:  # no ack at all for timeout_s: resend
                    await self._resend()
        if self._error:
            raise self._error
        return self.result

    async def close(self) -> None:
        if self._sub is not None:
            await self._sub.unsubscribe()
