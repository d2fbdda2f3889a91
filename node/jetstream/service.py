"""JetStream on one node: API requests in, captured messages to streams, PubAcks out.

Theory of operation: one internal client subscribes to ``$JS.API.>`` (and
``$JS.<domain>.API.>`` when a domain is set).  The router hands each request
over synchronously; it is queued (bounded) and one API task answers requests
in order, awaiting stream creation and purges as needed.  Each stream's
subjects are internal subscriptions too: a captured message is offered to its
``Stream`` (``cluster.streams``) together with a callback that publishes the
PubAck on the message's reply subject once the stream's group says the
message is applied and durable.  An unknown API subject gets no reply, as
nats-server does.  Streams found on disk are recreated at start.
"""

from __future__ import annotations

import json
import logging
import time
from typing import TYPE_CHECKING, Any

import trio

from cluster.stream_fsm import ApiErrorResult, PubResult, PurgeResult
from cluster.streams import Stream, StreamRegistry
from node.internal import InternalClient
from node.jsapi import render
from node.jsapi.errors import (
    BAD_REQUEST,
    INVALID_JSON,
    NOT_EMPTY_REQUEST,
    STREAM_NOT_FOUND,
    JSApiError,
)
from node.jsapi.streamconfig import check_overlap, check_recreate, parse_create
from node.session import Subscription

if TYPE_CHECKING:
    from node.server import Server

log = logging.getLogger(__name__)

API_QUEUE_MAX = 10_000
NAMES_PAGE = 1024
LIST_PAGE = 256
TYPE = render.API_TYPE_PREFIX


class JetStreamService:
    """JetStream for one server (single node, R1 streams).

    Args:
        server: the server (config, router, sublist).
    """

    def __init__(self, server: Server) -> None:
        self.server = server
        js = server.cfg.jetstream
        self.domain = js.domain or ""
        self.store_dir = js.jetstream_dir if js.store_dir else None
        self.client = InternalClient(server, "jetstream")
        self.registry: StreamRegistry | None = None
        self._subs: dict[str, list[Subscription]] = {}
        self._send, self._recv = trio.open_memory_channel[tuple[bytes, bytes, bytes]](API_QUEUE_MAX)
        self.api_total = 0
        self.api_errors = 0

    # -- lifecycle ----------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Recover streams, subscribe the API, answer requests until cancelled."""
        async with trio.open_nursery() as nursery:
            self.registry = StreamRegistry(self.store_dir, nursery)
            for cfg, created_ns in await trio.to_thread.run_sync(self.registry.saved):
                stream = await self.registry.create(cfg, created_ns)
                self._capture(stream)
            self.client.subscribe(b"$JS.API.>", self._on_api)
            if self.domain:
                self.client.subscribe(b"$JS." + self.domain.encode() + b".API.>", self._on_api)
            task_status.started()
            async for subject, reply, body in self._recv:
                try:
                    await self._handle(subject, reply, body)
                except Exception:
                    log.exception("event=jsapi_failure subject=%r", subject)

    def _on_api(
        self, sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, body: bytes
    ) -> None:
        if not reply:
            return  # no reply subject: ignored, as nats-server does
        try:
            self._send.send_nowait((subject, reply, body))
        except trio.WouldBlock:
            log.warning("event=jsapi_queue_full subject=%r", subject)

    # -- capture --------------------------------------------------------------

    def _capture(self, stream: Stream) -> None:
        name = stream.cfg.name
        no_ack = stream.cfg.no_ack

        def on_msg(
            sub: Subscription,
            subject: bytes,
            reply: bytes | None,
            hdr: bytes | None,
            payload: bytes,
        ) -> None:
            cb = None if (no_ack or not reply) else self._acker(name, reply)
            if not stream.offer(subject.decode(), hdr, payload, cb) and reply:
                self.client.publish(reply, _pub_error(name, 503, 10077, "stream is busy"))

        self._subs[name] = [self.client.subscribe(s.encode(), on_msg) for s in stream.cfg.subjects]

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

    async def _handle(self, subject: bytes, reply: bytes, body: bytes) -> None:
        tokens = subject.decode(errors="replace").split(".")
        if tokens[1] != "API":  # $JS.<domain>.API.…
            tokens = tokens[:1] + tokens[2:]
        op = tokens[2:]
        answer: str | None = None
        self.api_total += 1
        try:
            if op == ["INFO"]:
                answer = self._account_info()
            elif op[:2] == ["STREAM", "CREATE"] and len(op) == 3:
                answer = await self._stream_create(op[2], body)
            elif op[:2] == ["STREAM", "INFO"] and len(op) == 3:
                answer = self._stream_info(op[2])
            elif op[:2] == ["STREAM", "DELETE"] and len(op) == 3:
                answer = await self._stream_delete(op[2], body)
            elif op == ["STREAM", "NAMES"]:
                answer = self._stream_names(body)
            elif op == ["STREAM", "LIST"]:
                answer = self._stream_list(body)
            elif op[:2] == ["STREAM", "PURGE"] and len(op) == 3:
                answer = await self._stream_purge(op[2], body)
        except _Answer as a:
            self.api_errors += 1
            answer = a.text
        if answer is not None:
            self.client.publish(reply, answer.encode())

    def _stream(self, name: str, type_: str) -> Stream:
        assert self.registry is not None
        stream = self.registry.streams.get(name)
        if stream is None:
            raise _Answer(render.error_response(type_, JSApiError(STREAM_NOT_FOUND)))
        return stream

    def _info(
        self, stream: Stream, *, paging: tuple[int, int, int] | None = None
    ) -> dict[str, Any]:
        return render.stream_info_dict(
            stream.cfg,
            stream.store.state(),
            created_ns=stream.created_ns,
            ts_ns=time.time_ns(),
            cluster={"leader": self.server.server_name},
            domain=self.domain,
            paging=paging,
        )

    def _account_info(self) -> str:
        assert self.registry is not None
        memory = storage = 0
        for s in self.registry.streams.values():
            st = s.store.state()
            if s.cfg.storage.value == "memory":
                memory += st.bytes
            else:
                storage += st.bytes
        js = self.server.cfg.jetstream
        body: dict[str, Any] = {
            "type": TYPE + "account_info_response",
            "memory": memory,
            "storage": storage,
            "reserved_memory": 0,
            "reserved_storage": 0,
            "streams": len(self.registry.streams),
            "consumers": 0,
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
        if self.domain:
            body["domain"] = self.domain
        body["api"] = {"total": self.api_total, "errors": self.api_errors}
        return json.dumps(body, separators=(",", ":"))

    async def _stream_create(self, name: str, body: bytes) -> str:
        assert self.registry is not None
        type_ = render.STREAM_CREATE_RESPONSE
        existing = {n: s.cfg for n, s in self.registry.streams.items()}
        try:
            cfg = parse_create(name, body, clustered=False, lookup=existing.get)
            if cfg.name in existing:
                check_recreate(cfg, existing[cfg.name])
                return render.stream_create_response(self._info(self.registry.streams[cfg.name]))
            check_overlap(cfg, [c for n, c in existing.items() if n != cfg.name])
        except JSApiError as err:
            raise _Answer(render.error_response(type_, err)) from None
        stream = await self.registry.create(cfg)
        self._capture(stream)
        log.info("event=stream_created stream=%s subjects=%s", cfg.name, list(cfg.subjects))
        return render.stream_create_response(self._info(stream))

    def _stream_info(self, name: str) -> str:
        stream = self._stream(name, render.STREAM_INFO_RESPONSE)
        return render.stream_info_response(self._info(stream, paging=(0, 0, 0)))

    async def _stream_delete(self, name: str, body: bytes) -> str:
        assert self.registry is not None
        type_ = TYPE + "stream_delete_response"
        if body.strip():
            raise _Answer(render.error_response(type_, JSApiError(NOT_EMPTY_REQUEST)))
        self._stream(name, type_)
        for sub in self._subs.pop(name, []):
            self.client.unsubscribe(sub)
        await self.registry.delete(name)
        return json.dumps({"type": type_, "success": True}, separators=(",", ":"))

    def _paging(self, body: bytes, type_: str) -> tuple[int, str]:
        if not body.strip():
            return 0, ""
        try:
            req = json.loads(body)
            if not isinstance(req, dict):
                raise ValueError("not an object")
        except ValueError:
            raise _Answer(render.error_response(type_, JSApiError(INVALID_JSON))) from None
        offset = req.get("offset", 0)
        subject = req.get("subject", "")
        if not isinstance(offset, int) or not isinstance(subject, str):
            raise _Answer(render.error_response(type_, JSApiError(INVALID_JSON)))
        return max(offset, 0), subject

    def _matching(self, subject: str) -> list[Stream]:
        assert self.registry is not None
        from node.subjects import overlaps

        streams = [self.registry.streams[n] for n in sorted(self.registry.streams)]
        if not subject:
            return streams
        return [
            s
            for s in streams
            if any(overlaps(subject.encode(), x.encode()) for x in s.cfg.subjects)
        ]

    def _stream_names(self, body: bytes) -> str:
        type_ = TYPE + "stream_names_response"
        offset, subject = self._paging(body, type_)
        streams = self._matching(subject)
        page = [s.cfg.name for s in streams[offset : offset + NAMES_PAGE]]
        out = {
            "type": type_,
            "total": len(streams),
            "offset": min(offset, len(streams)),
            "limit": NAMES_PAGE,
            "streams": page or None,
        }
        return json.dumps(out, separators=(",", ":"))

    def _stream_list(self, body: bytes) -> str:
        offset, subject = self._paging(body, render.STREAM_LIST_RESPONSE)
        streams = self._matching(subject)
        infos = [self._info(s) for s in streams[offset : offset + LIST_PAGE]]
        return render.stream_list_response(
            infos, total=len(streams), offset=min(offset, len(streams)), limit=LIST_PAGE
        )

    async def _stream_purge(self, name: str, body: bytes) -> str:
        type_ = TYPE + "stream_purge_response"
        stream = self._stream(name, type_)
        filt: str | None = None
        seq: int | None = None
        keep: int | None = None
        if body.strip():
            try:
                req = json.loads(body)
                if not isinstance(req, dict):
                    raise ValueError("not an object")
            except ValueError:
                raise _Answer(_purge_error(JSApiError(INVALID_JSON))) from None
            filt = req.get("filter") or None
            seq = req.get("seq") or None
            keep = req.get("keep") or None
            if seq is not None and keep is not None:
                raise _Answer(_purge_error(JSApiError(BAD_REQUEST)))
        result = await stream.purge(filt, seq, keep)
        if isinstance(result, PurgeResult):
            return json.dumps(
                {"type": type_, "success": True, "purged": result.purged}, separators=(",", ":")
            )
        assert isinstance(result, ApiErrorResult)
        err = {"code": result.code, "err_code": result.err_code, "description": result.description}
        return json.dumps(
            {"type": type_, "error": err, "success": False, "purged": 0}, separators=(",", ":")
        )

    def stats(self) -> dict[str, Any]:
        """Counters for ``/jsz`` and ``/varz``."""
        streams = list(self.registry.streams.values()) if self.registry else []
        states = [s.store.state() for s in streams]
        return {
            "streams": len(streams),
            "consumers": 0,
            "messages": sum(st.msgs for st in states),
            "bytes": sum(st.bytes for st in states),
            "api": {"total": self.api_total, "errors": self.api_errors},
        }


class _Answer(Exception):
    """An error answer, ready to send."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


def _pub_error(stream: str, code: int, err_code: int, description: str) -> bytes:
    d = {
        "error": {"code": code, "err_code": err_code, "description": description},
        "stream": stream,
        "seq": 0,
    }
    return json.dumps(d, separators=(",", ":")).encode()


def _purge_error(err: JSApiError) -> str:
    return json.dumps(
        {
            "type": TYPE + "stream_purge_response",
            "error": err.to_dict(),
            "success": False,
            "purged": 0,
        },
        separators=(",", ":"),
    )
