"""``$JS.API.STREAM.SNAPSHOT`` and ``STREAM.RESTORE``: a stream out as an archive and back.

Theory of operation
-------------------
SNAPSHOT.  The request is checked in nats-server's order (empty body or
``{}`` 10003, unknown stream 10059, Go-decoded JSON 10025, deliver subject
10015).  The stream is captured at one applied point (``snapshot_stream``:
the state machine's document and the store's state, publishing goes on),
the answer ``{config, state}`` goes out (``state.consumer_count`` counts the
live stream's consumers, also with ``no_consumers``, as nats-server's does),
and a transfer task streams the
archive (``cluster.stream_archive``) to ``deliver_subject`` in chunks of
``chunk_size`` bytes (default 128 KiB, clamped to 1 KiB..1 MiB).  Each full
chunk carries the reply subject ``$JS.SNAPSHOT.ACK.<stream>.<id>.<len>.<n>``;
the client acks it with any message, and at most ``window_size / chunk_size``
chunks (window default 8 MiB, clamped to 1 KiB..32 MiB) are unacknowledged.
The last, short chunk has no reply subject.  The end is an empty message
with header ``NATS/1.0 204`` -- or with no header at all when no full chunk
was sent, as nats-server does.  A transfer that waits ``ACK_TIMEOUT_S`` for
an ack ends with ``408 No Flow Response``; one whose receiver went away
(a chunk reached nobody) with ``408 No Interest``.  The answer is published
by the API task right after the handler returns, before the transfer task
first runs (trio runs a spawned task only when the spawner yields).

RESTORE.  The request ``{config, state}`` is checked in nats-server's order
(empty 10003, JSON 10025, name from the subject if absent, mismatch 10056,
path separators 10128, config 10052 & co., existing stream 10130).  A restore
session subscribes ``$JS.SNAPSHOT.RESTORE.<stream>.<id>`` and answers
``{deliver_subject}``.  The client sends the archive in chunks as requests;
each is answered with an empty message and fed to an ``ArchiveDecoder``.  An
empty chunk ends the upload: the archive is verified and the stream created
from it (``restore_stream``), and that last request is answered with a
``stream_create_response`` carrying the new stream's info (no ``cluster``,
no ``did_create``) or an error: 10062 ``restore failed: <reason>`` for a bad
archive (garbage and truncation read ``s2: corrupt input`` or ``unexpected
EOF``), or the 10130/10065/10074 error of the final checks.  A bad archive
creates nothing.  A chunk without a reply subject aborts the restore
silently; so does ``RESTORE_IDLE_S`` without a chunk (a stalled upload).
Upload bytes are bounded by the JetStream storage limit of the stream's
storage type (10047/10028 on the chunk that crosses it) and by
``RESTORE_BYTES_MAX``; at most ``RESTORES_MAX`` sessions run at once.

Consumers.  A snapshot carries every consumer of the stream -- durable,
named and ephemeral alike, as nats-server 2.15 does -- with its config and
state (``Consumer.archived``), captured just before the stream so that no
consumer is ahead of the messages archived; ``"no_consumers": true`` leaves
them out.  A restore recreates them after the stream, each going on from its
archived delivered sequence (not re-choosing a start from its deliver
policy), with its pending acks, their ack timers (a pending message is
redelivered once its ack wait, counted from the delivery, has passed) and
its redelivery counts; ``created`` is the restore's time, as nats-server
shows.  If a consumer cannot be recreated the restored stream is deleted
again and the restore fails (10062): a restore creates all or nothing.

Chunks reach the session through a bounded channel its task drains (router
callbacks must not block); every transfer runs in the JetStream nursery.

Known differences: the archive bytes are trijet's own (see
``cluster.stream_archive``); snapshot/restore advisories are not published;
a message redelivered after a ``-NAK`` is archived as due at once (nats-server
keeps its first delivery's time, which may still be within its ack wait);
``jsck`` is always in effect (every record is checksum-verified as it is read).
"""

from __future__ import annotations

import logging
import time
import weakref
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import trio

from cluster.api import StreamExists, StreamNotFound
from cluster.meta import (
    Assigned,
    MetaError,
    add_stream_entry,
    delete_stream_entry,
    update_stream_entry,
)
from cluster.model import Storage, StreamConfig
from cluster.naming import fresh_group_name
from cluster.stream_archive import (
    Archive,
    ArchivedConsumer,
    ArchiveDecoder,
    ArchiveError,
    chunked,
    encode_archive,
)
from cluster.stream_fsm import StreamSnapshotError
from node.jetstream.common import TYPE, ApiAnswer, ApiRequest, dumps, error
from node.jetstream.solo_meta import SoloMeta
from node.jetstream.streams_api import stream_of
from node.jsapi import render
from node.jsapi.errors import (
    BAD_REQUEST,
    INVALID_JSON,
    MEMORY_RESOURCES_EXCEEDED,
    RESTORE_SUBSCRIBE_FAILED,
    SNAPSHOT_DELIVER_SUBJECT_INVALID,
    STORAGE_RESOURCES_EXCEEDED,
    STREAM_MISMATCH,
    STREAM_NAME_CONTAINS_PATH_SEPARATORS,
    STREAM_NAME_EXIST_RESTORE_FAILED,
    STREAM_NOT_FOUND,
    STREAM_REPLICAS_NOT_SUPPORTED,
    STREAM_RESTORE,
    STREAM_SNAPSHOT,
    STREAM_SUBJECT_OVERLAP,
    JSApiError,
)
from node.jsapi.godecode import (
    _SKIP,
    INT,
    UINT64,
    GoJSONError,
    Schema,
    _Ctx,
    _Obj,
    _raw,
    d_bool,
    d_list,
    d_str,
    decode_struct,
    new_ctx,
    scan_go,
)
from node.jsapi.streamconfig import check_overlap, check_stream_config
from node.jsapi.streamrequest import _STREAM_REQUEST, _d_time, _typed_struct, decode_request
from node.protocol.boundedjson import loads as bounded_loads
from node.subjects import valid_literal_subject
from raft.errors import RaftError
from store.errors import StoreError

if TYPE_CHECKING:
    from node.jetstream.service import JetStreamService

log = logging.getLogger(__name__)

SNAPSHOT_RESPONSE = TYPE + "stream_snapshot_response"
RESTORE_RESPONSE = TYPE + "stream_restore_response"

CHUNK_BYTES_DEFAULT = 128 * 1024
CHUNK_BYTES_MIN = 1024
CHUNK_BYTES_MAX = 1024 * 1024
WINDOW_BYTES_DEFAULT = 8 * 1024 * 1024
WINDOW_BYTES_MIN = 1024
WINDOW_BYTES_MAX = 32 * 1024 * 1024
ACK_TIMEOUT_S = 5.0
"""A snapshot transfer waiting this long for a flow-control ack gives up."""
INTEREST_WAIT_S = 2.0
"""How long a snapshot transfer waits for a subscriber on ``deliver_subject``."""
INTEREST_POLL_S = 0.05
RESTORE_IDLE_S = 5.0
"""A restore session without a chunk for this long is abandoned (stalled)."""
RESTORE_BYTES_MAX = 4 * 1024**3
"""Upper bound on one upload (it is held in memory until the restore)."""
RESTORES_MAX = 64
"""Restore sessions open at once (per server)."""
RESTORE_QUEUE_CHUNKS = 16
"""Chunks waiting for a restore session's task (clients send one at a time)."""

SNAPSHOT_ACK_PREFIX = "$JS.SNAPSHOT.ACK."
RESTORE_DELIVER_PREFIX = "$JS.SNAPSHOT.RESTORE."
HDR_END = b"NATS/1.0 204\r\n\r\n"
HDR_NO_INTEREST = b"NATS/1.0 408 No Interest\r\n\r\n"
HDR_NO_FLOW = b"NATS/1.0 408 No Flow Response\r\n\r\n"

_ID_DIGITS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_ID_LEN = 22

#: open restore sessions per service (bounded by RESTORES_MAX)
_sessions: weakref.WeakKeyDictionary[JetStreamService, set[_RestoreSession]] = (
    weakref.WeakKeyDictionary()
)


# --------------------------------------------------------------------------- request decoding


def is_empty_request(body: bytes) -> bool:
    """nats-server's ``isEmptyRequest``: no bytes, or a JSON object with no keys."""
    if not body:
        return True
    try:
        value = bounded_loads(body)
    except ValueError:
        return False
    return isinstance(value, dict) and not value


_SNAPSHOT_REQUEST = Schema(
    "server.JSApiStreamSnapshotRequest",
    {
        "deliver_subject": d_str,
        "no_consumers": d_bool,
        "chunk_size": INT,
        "window_size": INT,
        "jsck": d_bool,
    },
)


def _d_uint64_map(v: Any, ctx: _Ctx) -> Any:
    if v is None:
        return _SKIP
    if not isinstance(v, _Obj):
        ctx.type_error(v, "map[string]uint64")
        return _SKIP
    for key, item in v:
        ctx.path.append(key)
        try:
            UINT64(item, ctx)
        finally:
            ctx.path.pop()
    return _SKIP


_STREAM_STATE = Schema(
    "StreamState",
    {
        "messages": UINT64,
        "bytes": UINT64,
        "first_seq": UINT64,
        "first_ts": _d_time,
        "last_seq": UINT64,
        "last_ts": _d_time,
        "num_subjects": INT,
        "subjects": _d_uint64_map,
        "num_deleted": INT,
        "deleted": d_list(UINT64, "[]uint64"),
        "lost": _typed_struct(
            Schema("LostStreamData", {"msgs": d_list(UINT64, "[]uint64"), "bytes": UINT64}),
            "server.LostStreamData",
        ),
        "consumer_count": INT,
    },
)

# A restore request's config is a plain Go ``StreamConfig`` (no ``pedantic``).
_STREAM_CONFIG = Schema(
    "StreamConfig", {k: v for k, v in _STREAM_REQUEST.fields.items() if k != "pedantic"}
)

_RESTORE_REQUEST = Schema(
    "server.JSApiStreamRestoreRequest",
    {
        "config": _typed_struct(_STREAM_CONFIG, "server.StreamConfig"),
        "state": _typed_struct(_STREAM_STATE, "server.StreamState"),
    },
)


def _go_decode(body: bytes, schema: Schema, root: str) -> tuple[list[Any], dict[str, Any]]:
    """Decode ``body`` as nats-server's strict ``json.Decoder`` loop does.

    Returns:
        The scanned top-level values and the decoded fields (later values win).

    Raises:
        JSApiError: 10025 ``invalid JSON: <Go message>``.
    """
    try:
        values = scan_go(body)
    except GoJSONError as exc:
        raise JSApiError(INVALID_JSON, err=str(exc)) from None
    out: dict[str, Any] = {}
    for value in values:
        ctx = new_ctx(root)
        decode_struct(value, schema, ctx, out)
        if ctx.first is not None:
            raise JSApiError(INVALID_JSON, err=str(ctx.first))
    return values, out


@dataclass(frozen=True, slots=True)
class SnapshotOptions:
    """A decoded SNAPSHOT request (Go zero values where absent)."""

    deliver_subject: str = ""
    no_consumers: bool = False
    chunk_size: int = 0
    window_size: int = 0
    jsck: bool = False

    def chunk_bytes(self) -> int:
        """Chunk size as nats-server clamps it."""
        size = self.chunk_size or CHUNK_BYTES_DEFAULT
        return min(max(CHUNK_BYTES_MIN, size), CHUNK_BYTES_MAX)

    def window_chunks(self) -> int:
        """Unacknowledged chunks allowed (window clamped, at least one chunk)."""
        window = self.window_size or WINDOW_BYTES_DEFAULT
        window = min(max(WINDOW_BYTES_MIN, window), WINDOW_BYTES_MAX)
        return max(window, self.chunk_bytes()) // self.chunk_bytes()


def decode_snapshot_request(body: bytes) -> SnapshotOptions:
    """Decode a SNAPSHOT body.

    Raises:
        JSApiError: 10025.
    """
    _, fields = _go_decode(body, _SNAPSHOT_REQUEST, "JSApiStreamSnapshotRequest")
    return SnapshotOptions(**fields)


def decode_restore_request(body: bytes, subject_name: str) -> StreamConfig:
    """Decode a RESTORE body into its config (Go zero values, not normalised);
    an absent name is the subject's.  The ``state`` is checked, not used.

    Raises:
        JSApiError: 10025.
    """
    values, _ = _go_decode(body, _RESTORE_REQUEST, "JSApiStreamRestoreRequest")
    pairs = _Obj()
    for value in values:
        for key, item in value or ():
            if key.lower() == "config" and isinstance(item, _Obj):
                pairs.extend(item)
    cfg = decode_request(_raw(pairs).encode()).config
    return cfg if cfg.name else replace(cfg, name=subject_name)


# --------------------------------------------------------------------------- SNAPSHOT


async def snapshot(svc: JetStreamService, req: ApiRequest) -> str:
    """``$JS.API.STREAM.SNAPSHOT.<stream>``."""
    name = req.op[2]
    if is_empty_request(req.body):
        raise error(SNAPSHOT_RESPONSE, JSApiError(BAD_REQUEST))
    stream_of(svc, name, SNAPSHOT_RESPONSE)
    try:
        opts = decode_snapshot_request(req.body)
    except JSApiError as err:
        raise error(SNAPSHOT_RESPONSE, err) from None
    if not valid_literal_subject(opts.deliver_subject.encode()):
        raise error(SNAPSHOT_RESPONSE, JSApiError(SNAPSHOT_DELIVER_SUBJECT_INVALID))
    consumers: list[ArchivedConsumer] = []
    if not opts.no_consumers and svc.consumers is not None:
        consumers = [c.archived() for c in svc.consumers.of(name).values()]
    try:
        snap = await svc.api.snapshot_stream(name, consumers)
    except StreamNotFound:
        raise error(SNAPSHOT_RESPONSE, JSApiError(STREAM_NOT_FOUND)) from None
    except (StoreError, OSError) as exc:
        log.warning("event=snapshot_failed stream=%s error=%r", name, exc)
        raise error(SNAPSHOT_RESPONSE, JSApiError(STREAM_SNAPSHOT, err=exc)) from None
    log.info("event=snapshot_start stream=%s bytes=%d", name, snap.state.bytes)
    transfer = _SnapshotTransfer(svc, snap.archive, opts)
    svc.api.nursery.start_soon(transfer.run)
    body = {
        "type": SNAPSHOT_RESPONSE,
        "config": render.config_dict(snap.archive.config),
        "state": render.state_dict(snap.state, consumer_count=svc.consumer_count(name)),
    }
    return dumps(body)


def _new_id(svc: JetStreamService) -> str:
    rng = svc.server.rng
    return "".join(_ID_DIGITS[rng.randrange(len(_ID_DIGITS))] for _ in range(_ID_LEN))


def _interested(svc: JetStreamService, subject: bytes) -> bool:
    router = svc.router
    if router.sublist.has_interest(subject):
        return True
    remote = router.route_sublist
    return bool(remote.count) and remote.has_interest(subject)


class _SnapshotTransfer:
    """Streams one archive to ``deliver_subject`` with windowed flow control."""

    def __init__(self, svc: JetStreamService, archive: Archive, opts: SnapshotOptions) -> None:
        self.svc = svc
        self.archive = archive
        self.deliver = opts.deliver_subject.encode()
        self.chunk_bytes = opts.chunk_bytes()
        self.credit = opts.window_chunks()
        self.ack_prefix = f"{SNAPSHOT_ACK_PREFIX}{archive.config.name}.{_new_id(svc)}"
        self._acked = trio.Event()
        self.sent_chunks = 0
        self.sent_bytes = 0

    def _on_ack(self, *_: Any) -> None:
        self.credit += 1
        self._acked.set()

    async def _take_credit(self) -> bool:
        while self.credit <= 0:
            self._acked = trio.Event()
            with trio.move_on_after(ACK_TIMEOUT_S) as scope:
                await self._acked.wait()
            if scope.cancelled_caught:
                return False
        self.credit -= 1
        return True

    async def run(self) -> None:
        """Send every chunk, then the end-of-snapshot message.

        Cancellation: stops sending (server shutdown); the client sees no end.
        """
        client = self.svc.client
        sub = client.subscribe((self.ack_prefix + ".>").encode(), self._on_ack)
        start = time.monotonic()
        try:
            end = await self._send_chunks()
            client.publish(self.deliver, b"", headers=end)
        finally:
            client.unsubscribe(sub)
        log.info(
            "event=snapshot_done stream=%s chunks=%d bytes=%d end=%r elapsed_s=%.3f",
            self.archive.config.name,
            self.sent_chunks,
            self.sent_bytes,
            (end or b"").strip(),
            time.monotonic() - start,
        )

    async def _send_chunks(self) -> bytes | None:
        """The chunks; returns the end message's header block (None: no header)."""
        client = self.svc.client
        # Clients (jsm.go) subscribe to the deliver subject only after the
        # answer; the sublist has no interest notifications, so look briefly.
        with trio.move_on_after(INTEREST_WAIT_S):
            while not _interested(self.svc, self.deliver):  # noqa: ASYNC110
                await trio.sleep(INTEREST_POLL_S)
        end: bytes | None = None
        index = 1
        for piece in chunked(encode_archive(self.archive), self.chunk_bytes):
            if not await self._take_credit():
                return HDR_NO_FLOW
            if len(piece) < self.chunk_bytes:
                delivered = client.publish(self.deliver, piece)
            else:
                ack = f"{self.ack_prefix}.{len(piece)}.{index}".encode()
                delivered = client.publish(self.deliver, piece, reply=ack)
                end = HDR_END
                index += 1
            if not delivered:
                return HDR_NO_INTEREST
            self.sent_chunks += 1
            self.sent_bytes += len(piece)
            await trio.lowlevel.checkpoint()
        return end


# --------------------------------------------------------------------------- RESTORE


def _restore_error(err: JSApiError) -> ApiAnswer:
    body = {"type": RESTORE_RESPONSE, "error": err.to_dict(), "deliver_subject": ""}
    return ApiAnswer(dumps(body))


async def restore(svc: JetStreamService, req: ApiRequest) -> str:
    """``$JS.API.STREAM.RESTORE.<stream>``."""
    name = req.op[2]
    try:
        if is_empty_request(req.body):
            raise JSApiError(BAD_REQUEST)
        requested = decode_restore_request(req.body, name)
        if requested.name != name:
            raise JSApiError(STREAM_MISMATCH)
        if "\\" in name or "/" in name:
            raise JSApiError(STREAM_NAME_CONTAINS_PATH_SEPARATORS)
        cfg = check_stream_config(requested, lookup=svc.all_configs().get)
        if name in svc.all_configs():
            raise JSApiError(STREAM_NAME_EXIST_RESTORE_FAILED)
        sessions = _sessions.setdefault(svc, set())
        subject = f"{RESTORE_DELIVER_PREFIX}{name}.{_new_id(svc)}"
        if len(sessions) >= RESTORES_MAX:
            raise JSApiError(
                RESTORE_SUBSCRIBE_FAILED, subject=subject, err="too many restores in progress"
            )
    except JSApiError as err:
        raise _restore_error(err) from None
    session = _RestoreSession(svc, cfg, subject, sessions)
    svc.api.nursery.start_soon(session.run)
    log.info("event=restore_start stream=%s subject=%s", name, subject)
    return dumps({"type": RESTORE_RESPONSE, "deliver_subject": subject})


def _restore_bytes_max(svc: JetStreamService, cfg: StreamConfig) -> tuple[int, int]:
    """``(bytes allowed, err_code when exceeded)`` for an upload of ``cfg``."""
    js = svc.server.cfg.jetstream
    if cfg.storage is Storage.MEMORY:
        limit, code = js.max_memory_store, MEMORY_RESOURCES_EXCEEDED
    else:
        limit, code = js.max_file_store, STORAGE_RESOURCES_EXCEEDED
    if limit is None or limit < 0:
        return RESTORE_BYTES_MAX, code
    return min(limit, RESTORE_BYTES_MAX), code


class _RestoreSession:
    """One upload: chunks in, the restored stream (or an error) out."""

    def __init__(
        self,
        svc: JetStreamService,
        cfg: StreamConfig,
        subject: str,
        sessions: set[_RestoreSession],
    ) -> None:
        self.svc = svc
        self.cfg = cfg
        self.subject = subject
        self.decoder = ArchiveDecoder()
        self.bytes_max, self.limit_code = _restore_bytes_max(svc, cfg)
        self._sessions = sessions
        self._send, self._recv = trio.open_memory_channel[tuple[bytes, bytes]](RESTORE_QUEUE_CHUNKS)
        self._closed = False
        self._abort_reason = ""
        sessions.add(self)
        self._sub = svc.client.subscribe(subject.encode(), self._on_chunk)

    def _on_chunk(
        self, sub: Any, subject: bytes, reply: bytes | None, hdr: bytes | None, payload: bytes
    ) -> None:
        # Runs in the router: queue, never block.  A chunk without a reply
        # subject ends the session here and now, as does the final empty
        # chunk (later chunks reach nobody, as with nats-server).
        if self._closed:
            return
        if not reply:
            self._abort_reason = "chunk without reply subject"
            self._close()
            return
        try:
            self._send.send_nowait((reply, payload))
        except trio.WouldBlock:
            self._abort_reason = "too many chunks queued"
            self._close()
            return
        if not payload:
            self._close()

    def _close(self) -> None:
        if not self._closed:
            self._closed = True
            self.svc.client.unsubscribe(self._sub)
            self._send.close()
        self._sessions.discard(self)

    async def run(self) -> None:
        """Take chunks until the end, a stall or an abort.

        Cancellation: the upload is abandoned; nothing is created.
        """
        name = self.cfg.name
        try:
            while True:
                with trio.move_on_after(RESTORE_IDLE_S) as idle:
                    try:
                        reply, payload = await self._recv.receive()
                    except trio.EndOfChannel:
                        log.warning(
                            "event=restore_aborted stream=%s reason=%r", name, self._abort_reason
                        )
                        return
                if idle.cancelled_caught:
                    log.warning("event=restore_stalled stream=%s", name)
                    return
                if not payload:
                    answer = await self._finish()
                    self.svc.client.publish(reply, answer.encode())
                    return
                if not self._take(reply, payload):
                    return
        finally:
            self._close()

    def _take(self, reply: bytes, payload: bytes) -> bool:
        """Feed one chunk and answer it; False when the upload is over its limit."""
        try:
            self.decoder.feed(payload)
        except ArchiveError:
            pass  # reported when the upload ends, as nats-server does
        if self.decoder.received > self.bytes_max:
            err = JSApiError(self.limit_code)
            log.warning(
                "event=restore_too_large stream=%s bytes=%d", self.cfg.name, self.decoder.received
            )
            self.svc.client.publish(
                reply, render.error_response(render.STREAM_CREATE_RESPONSE, err).encode()
            )
            return False
        self.svc.client.publish(reply, b"")
        return True

    async def _finish(self) -> str:
        """Verify the archive and create the stream; the final answer."""
        svc, cfg = self.svc, self.cfg
        try:
            archive = self.decoder.finish()
            if archive.config.name != cfg.name:
                raise ArchiveError("stream names do not match")
        except ArchiveError as exc:
            return _restore_failed(cfg.name, str(exc))
        try:
            if cfg.num_replicas > 1 and svc.meta is None:
                raise JSApiError(STREAM_REPLICAS_NOT_SUPPORTED)
            existing = svc.all_configs()
            if cfg.name in svc.api.streams or cfg.name in existing:
                raise JSApiError(STREAM_NAME_EXIST_RESTORE_FAILED)
            check_overlap(cfg, existing.values())
            # in a cluster the upload lands here (the meta leader): the stream is
            # restored as R1 where its data is, then scaled to its replicas (the
            # new members catch up from this store)
            local = replace(cfg, num_replicas=1)
            stream = await svc.api.restore_stream(local, archive)
            await _restore_consumers(svc, stream, archive.consumers)
            await _assign_restored(svc, stream)
            if cfg.num_replicas > 1:
                await _scale_restored(svc, cfg)
        except JSApiError as err:
            return render.error_response(render.STREAM_CREATE_RESPONSE, err)
        except StreamExists:
            err = JSApiError(STREAM_NAME_EXIST_RESTORE_FAILED)
            return render.error_response(render.STREAM_CREATE_RESPONSE, err)
        except (StreamSnapshotError, StoreError, OSError, _ConsumerRestoreError) as exc:
            return _restore_failed(cfg.name, str(exc))
        state = stream.store.state()
        log.info(
            "event=restore_done stream=%s bytes=%d msgs=%d",
            cfg.name,
            self.decoder.received,
            state.msgs,
        )
        info = render.stream_info_dict(
            cfg,  # as configured (a cluster's is restored as R1, then scaled)
            state,
            created_ns=stream.created_ns,
            ts_ns=time.time_ns(),
            consumer_count=svc.consumer_count(cfg.name),
        )
        return dumps({"type": render.STREAM_CREATE_RESPONSE, **info})


class _ConsumerRestoreError(Exception):
    """A consumer of the archive could not be recreated (the stream is gone again)."""


async def _restore_consumers(
    svc: JetStreamService, stream: Any, consumers: tuple[ArchivedConsumer, ...]
) -> None:
    """Recreate the archived consumers on the restored ``stream``; if one
    fails, delete the stream (and the consumers made so far) again.

    Raises:
        _ConsumerRestoreError: a consumer failed (nothing is left behind).
    """
    if not consumers:
        return
    name = stream.cfg.name
    manager = svc.consumers
    try:
        if manager is None:
            raise _ConsumerRestoreError("consumers are not available")
        for c in consumers:
            # nats-server's restored config names the consumer (ephemerals too)
            cfg = c.config if c.config.name else replace(c.config, name=c.name)
            manager.registry.seed(name, c.name, c.state)
            try:
                await manager.start(stream, c.name, cfg)
            finally:
                manager.registry.seed(name, c.name, None)
    except Exception as exc:  # whatever failed, the restore leaves nothing behind
        log.warning("event=restore_consumers_failed stream=%s error=%r", name, exc)
        with trio.CancelScope(shield=True):
            if manager is not None:
                manager.drop_stream(name)
            await svc.api.delete_stream(name)
        raise _ConsumerRestoreError(f"consumer restore failed: {exc}") from exc


async def _assign_restored(svc: JetStreamService, stream: Any) -> None:
    """Make the restored (local) stream an assignment of the meta state, on
    this server where its data is; if the meta group refuses (a create won
    the name meanwhile, leadership lost), the stream is removed again.

    Raises:
        JSApiError: the assignment failed (nothing is left behind).
    """
    meta = svc.assignments
    if isinstance(meta, SoloMeta):
        meta.adopt(stream)
        return
    cfg = stream.cfg
    entry = add_stream_entry(
        cfg.to_dict(),
        group=fresh_group_name(
            "S", 1, cfg.storage is Storage.FILE, meta.rng, meta.machine.groups()
        ),
        created_ns=stream.created_ns,
        seed=meta.rng.getrandbits(63),
        online=meta.online(),
        unique_tag=meta.unique_tag,
        reply="",
        peers=[svc.server.server_name],
        account=svc.account.name,
    )
    try:
        result = await meta.propose(entry)
    except RaftError as exc:
        result = exc
    if isinstance(result, Assigned) and result.created:
        return
    log.warning("event=restore_assign_failed stream=%s result=%r", cfg.name, result)
    with trio.CancelScope(shield=True):
        if svc.consumers is not None:
            svc.consumers.drop_stream(cfg.name)
        await svc.api.delete_stream(cfg.name)
    if isinstance(result, MetaError) and result.err_code == 10058:
        raise JSApiError(STREAM_NAME_EXIST_RESTORE_FAILED)
    if isinstance(result, MetaError) and result.err_code == 10065:
        raise JSApiError(STREAM_SUBJECT_OVERLAP)
    raise JSApiError(STREAM_RESTORE, err=f"stream assignment failed: {result}")


async def _scale_restored(svc: JetStreamService, cfg: StreamConfig) -> None:
    """Scale a restored (R1, assigned) stream to its configured replicas; if the
    meta group refuses (no suitable peers), the stream is deleted again.

    Raises:
        JSApiError: the refusal (nothing is left behind).
    """
    from node.jetstream import scaling

    meta = svc.assignments
    sa = meta.assignment(cfg.name)
    assert sa is not None
    scale = await scaling.scale_request(svc, sa, cfg)
    entry = update_stream_entry(cfg.to_dict(), reply="", scale=scale, account=svc.account.name)
    try:
        result = await meta.propose(entry)
    except RaftError as exc:
        result = exc
    if isinstance(result, Assigned):
        return
    log.warning("event=restore_scale_failed stream=%s result=%r", cfg.name, result)
    with trio.CancelScope(shield=True):
        try:
            await meta.propose(delete_stream_entry(cfg.name, reply="", account=svc.account.name))
        except RaftError as exc:
            log.warning("event=restore_undo_failed stream=%s error=%r", cfg.name, exc)
    if isinstance(result, MetaError):
        raise JSApiError(STREAM_RESTORE, err=result.description)
    raise JSApiError(STREAM_RESTORE, err=f"stream scaling failed: {result}")


def _restore_failed(name: str, reason: str) -> str:
    log.warning("event=restore_failed stream=%s reason=%r", name, reason)
    err = JSApiError(STREAM_RESTORE, err=reason)
    return render.error_response(render.STREAM_CREATE_RESPONSE, err)
