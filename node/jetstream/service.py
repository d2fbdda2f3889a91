"""JetStream on one node: API requests in, captured messages to streams, PubAcks out.

Theory of operation: one internal client subscribes to ``$JS.API.>`` (and
``$JS.<domain>.API.>`` when a domain is set).  The router hands each request
over synchronously; it is queued (bounded) and one API task answers requests
in order through the handler table ``ROUTES`` (the handlers live in
``streams_api``, ``msgs_api``, ``snapshot_api``, … and talk to the cluster
facade ``cluster.api``).  Each stream's subjects are internal subscriptions
too: a captured message is offered to its stream together with a callback
that publishes the PubAck on the message's reply subject once the stream's
group says the message is applied and durable.  An unknown API subject gets
no reply, as nats-server does.  Streams found on disk are recreated at start.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import trio

from cluster.api import JetStreamApi
from cluster.stream_fsm import ApiErrorResult, PubResult
from cluster.streams import Stream
from node.internal import InternalClient
from node.jetstream import msgs_api, snapshot_api, streams_api
from node.jetstream.advisories import Advisories
from node.jetstream.common import TYPE, ApiAnswer, ApiRequest, dumps
from node.jsapi import render
from node.session import Subscription

if TYPE_CHECKING:
    from node.jetstream.common import Handler
    from node.server import Server

log = logging.getLogger(__name__)

API_QUEUE_MAX = 10_000

#: op prefix -> (handler, min and max count of tokens after the prefix)
ROUTES: dict[tuple[str, ...], tuple[Handler, int, int]] = {
    ("STREAM", "CREATE"): (streams_api.create, 1, 1),
    ("STREAM", "UPDATE"): (streams_api.update, 1, 1),
    ("STREAM", "INFO"): (streams_api.info, 1, 1),
    ("STREAM", "DELETE"): (streams_api.delete, 1, 1),
    ("STREAM", "NAMES"): (streams_api.names, 0, 0),
    ("STREAM", "LIST"): (streams_api.list_, 0, 0),
    ("STREAM", "PURGE"): (streams_api.purge, 1, 1),
    ("STREAM", "MSG", "GET"): (msgs_api.get, 1, 1),
    ("STREAM", "MSG", "DELETE"): (msgs_api.delete, 1, 1),
    ("DIRECT", "GET"): (msgs_api.direct_get, 1, 1_000),
    ("STREAM", "SNAPSHOT"): (snapshot_api.snapshot, 1, 1),
    ("STREAM", "RESTORE"): (snapshot_api.restore, 1, 1),
}


def route(op: tuple[str, ...]) -> Handler | None:
    """The handler for an op (tokens after ``API``), or None (no reply)."""
    for n in range(min(3, len(op)), 0, -1):
        entry = ROUTES.get(op[:n])
        if entry is not None:
            handler, lo, hi = entry
            return handler if lo <= len(op) - n <= hi else None
    return None


class JetStreamService:
    """JetStream for one server (single node, R1 streams).

    Args:
        server: the server (config, router, sublist).
    """

    def __init__(self, server: Server) -> None:
        self.server = server
        js = server.cfg.jetstream
        self.domain = js.domain or ""
        self.store_dir = js.jetstream_dir
        self.client = InternalClient(server, "jetstream")
        self.api: JetStreamApi = None  # type: ignore[assignment]  # set in run()
        self.advisories = Advisories(self)
        self._subs: dict[str, list[Subscription]] = {}
        self._send, self._recv = trio.open_memory_channel[ApiRequest](API_QUEUE_MAX)
        self.api_total = 0
        self.api_errors = 0

    # -- lifecycle ----------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Recover streams, subscribe the API, answer requests until cancelled."""
        async with trio.open_nursery() as nursery:
            self.api = JetStreamApi(self.store_dir, nursery)
            self.api.on_stream_started.append(self._capture)
            await self.api.recover()
            self.client.subscribe(b"$JS.API.>", self._on_api)
            if self.domain:
                self.client.subscribe(b"$JS." + self.domain.encode() + b".API.>", self._on_api)
            task_status.started()
            async for req in self._recv:
                try:
                    await self._handle(req)
                except Exception:
                    log.exception("event=jsapi_failure subject=%r", req.subject)

    def _on_api(
        self, sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, body: bytes
    ) -> None:
        if not reply:
            return  # no reply subject: ignored, as nats-server does
        tokens = subject.decode(errors="replace").split(".")
        op = tuple(tokens[2:] if tokens[1] == "API" else tokens[3:])
        try:
            self._send.send_nowait(ApiRequest(subject, op, reply, hdr, body))
        except trio.WouldBlock:
            log.warning("event=jsapi_queue_full subject=%r", subject)

    # -- capture --------------------------------------------------------------

    def _capture(self, stream: Stream) -> None:
        name = stream.cfg.name

        def on_msg(
            sub: Subscription,
            subject: bytes,
            reply: bytes | None,
            hdr: bytes | None,
            payload: bytes,
        ) -> None:
            cb = None if (stream.cfg.no_ack or not reply) else self._acker(name, reply)
            if not stream.offer(subject.decode(), hdr, payload, cb) and reply:
                self.client.publish(reply, _pub_error(name, 503, 10077, "stream is busy"))

        self._subs[name] = [self.client.subscribe(s.encode(), on_msg) for s in stream.cfg.subjects]

    def recapture(self, stream: Stream) -> None:
        """Subscribe the stream's (changed) subjects afresh."""
        self.release(stream.cfg.name)
        self._capture(stream)

    def release(self, name: str) -> None:
        """Stop capturing for stream ``name``."""
        for sub in self._subs.pop(name, []):
            self.client.unsubscribe(sub)

    def _acker(self, stream: str, reply: bytes) -> Any:
        def ack(result: Any) -> None:
            if isinstance(result, PubResult):
                text = render.pub_ack(
                    result.stream, result.seq, duplicate=result.duplicate, domain=self.domain
                )
                self.client.publish(reply, text.encode())
            elif isinstance(result, ApiErrorResult):
                err = _pub_error(stream, result.code, result.err_code, result.description)
                self.client.publish(reply, err)

        return ack

    # -- API ------------------------------------------------------------------

    async def _handle(self, req: ApiRequest) -> None:
        if req.op == ("INFO",):
            handler: Handler | None = _account_info
        else:
            handler = route(req.op)
        if handler is None:
            return
        self.api_total += 1
        answer: str | bytes | None
        try:
            answer = await handler(self, req)
        except ApiAnswer as a:
            self.api_errors += 1
            answer = a.text
        if answer is not None:
            self.client.publish(req.reply, answer.encode() if isinstance(answer, str) else answer)
        self.advisories.api_audit(req, answer)

    def consumer_count(self, stream: str) -> int:
        """Consumers on ``stream`` (none until consumers exist)."""
        return 0

    def usage(self) -> tuple[int, int]:
        """Bytes stored ``(memory, file)``."""
        memory = storage = 0
        for s in self.api.streams.values():
            st = s.store.state()
            if s.cfg.storage.value == "memory":
                memory += st.bytes
            else:
                storage += st.bytes
        return memory, storage

    def stats(self) -> dict[str, Any]:
        """Counters for ``/jsz`` and ``/varz``."""
        streams = list(self.api.streams.values()) if self.api else []
        states = [s.store.state() for s in streams]
        return {
            "streams": len(streams),
            "consumers": 0,
            "messages": sum(st.msgs for st in states),
            "bytes": sum(st.bytes for st in states),
            "api": {"total": self.api_total, "errors": self.api_errors},
        }


async def _account_info(svc: JetStreamService, req: ApiRequest) -> str:
    memory, storage = svc.usage()
    js = svc.server.cfg.jetstream
    body: dict[str, Any] = {
        "type": TYPE + "account_info_response",
        "memory": memory,
        "storage": storage,
        "reserved_memory": 0,
        "reserved_storage": 0,
        "streams": len(svc.api.streams),
        "consumers": sum(svc.consumer_count(n) for n in svc.api.streams),
        "limits": {
            "max_memory": js.max_memory_store,
            "max_storage": js.max_file_store,
            "max_streams": -1,
            "max_consumers": -1,
            "max_ack_pending": -1,
            "memory_max_stream_bytes": -1,
            "storage_max_stream_bytes": -1,
            "max_bytes_required": False,
        },
    }
    if svc.domain:
        body["domain"] = svc.domain
    body["api"] = {"total": svc.api_total, "errors": svc.api_errors}
    return dumps(body)


def _pub_error(stream: str, code: int, err_code: int, description: str) -> bytes:
    d = {
        "error": {"code": code, "err_code": err_code, "description": description},
        "stream": stream,
        "seq": 0,
    }
    return dumps(d).encode()
