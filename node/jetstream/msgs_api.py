"""``$JS.API.STREAM.MSG.GET``, ``STREAM.MSG.DELETE`` and ``DIRECT.GET``.

Theory of operation
-------------------
MSG.GET and MSG.DELETE are API calls answered with JSON, checked in
nats-server's order: an empty body (or ``{}``) is 10003; the strict Go
decoding gives 10025; bad field combinations 10003; then the stream (10059).
A MSG.GET answer is sent by the handler itself, outside the API layer, as
nats-server does: a successful get is neither counted in the API statistics
nor audited (its errors are).  MSG.DELETE goes through the stream's group;
its refusals are worded like nats-server's stores: the file store answers
500/10057 ``no message found`` below the first sequence and ``stream store
EOF`` past the last, and 400/10043 ``sequence N not found`` for a message
already deleted in between; the memory store answers 10043 for every
missing message.

DIRECT.GET is not an API call: it is served by per-stream subscriptions
(``$JS.API.DIRECT.GET.<stream>`` and ``….<stream>.>``) that exist only while
the stream has ``allow_direct`` (the service makes them), so a direct get of
any other stream finds no responder (503).  Its body is read with Go's
lenient ``json.Unmarshal``, its answers are messages: the stored message with
``Nats-Stream``, ``Nats-Subject``, ``Nats-Sequence`` and ``Nats-Time-Stamp``
appended to its headers, or a status (``404 Message Not Found``, ``408 Empty
Request`` / ``Malformed Request`` / ``Bad Request``).  Batches (``batch``) and
multi-last requests (``multi_last``) add ``Nats-Num-Pending`` and
``Nats-Last-Sequence`` and end with ``204 EOB``.  Direct gets are never
counted as API calls.

Reads go to the stream's local store (on R1 the leader's).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cluster.api import StreamNotFound
from cluster.consumer_fsm.select import count_pending
from cluster.model import Storage
from cluster.stream_fsm import ApiErrorResult, DeleteResult
from node.jetstream import apireq
from node.jetstream.common import TYPE, ApiAnswer, ApiRequest, dumps, error
from node.jsapi import render
from node.jsapi.errors import (
    BAD_REQUEST,
    NO_MESSAGE_FOUND,
    SEQUENCE_NOT_FOUND,
    STREAM_MSG_DELETE_FAILED,
    STREAM_NOT_FOUND,
    STREAM_SEALED,
    JSApiError,
)
from raft.errors import RaftError
from store.api import StoredMsg, StreamStore
from store.errors import StoreError

if TYPE_CHECKING:
    from node.jetstream.service import JetStreamService

MSG_GET_RESPONSE = render.STREAM_MSG_GET_RESPONSE
MSG_DELETE_RESPONSE = TYPE + "stream_msg_delete_response"
MULTI_LAST_RESULTS_MAX = 1024
"""Most messages one ``multi_last`` direct get answers (else ``413``)."""

_STATUS_EMPTY = b"NATS/1.0 408 Empty Request\r\n\r\n"
_STATUS_MALFORMED = b"NATS/1.0 408 Malformed Request\r\n\r\n"
_STATUS_BAD = b"NATS/1.0 408 Bad Request\r\n\r\n"
_STATUS_NOT_FOUND = b"NATS/1.0 404 Message Not Found\r\n\r\n"
_STATUS_NO_RESULTS = b"NATS/1.0 404 No Results\r\n\r\n"
_STATUS_TOO_MANY = b"NATS/1.0 413 Too Many Results\r\n\r\n"


# --------------------------------------------------------------------------- MSG.GET


async def get(svc: JetStreamService, req: ApiRequest) -> None:
    """STREAM.MSG.GET: ``seq``, ``last_by_subj``, ``seq``+``next_by_subj`` or
    ``start_time`` (+``next_by_subj``); ``no_hdr`` leaves the headers out.

    Raises:
        ApiAnswer: the error answers (counted as API errors).
    """
    type_ = MSG_GET_RESPONSE
    if apireq.is_empty_request(req.body):
        raise error(type_, JSApiError(BAD_REQUEST))
    try:
        r = apireq.decode(req.body, apireq.MSG_GET)
    except JSApiError as err:
        raise error(type_, err) from None
    seq, last, nxt = r.get("seq", 0), r.get("last_by_subj", ""), r.get("next_by_subj", "")
    start = r.get("start_time")
    if (
        r.get("batch", 0) > 0
        or r.get("max_bytes", 0) > 0
        or (seq > 0 and last)
        or (seq == 0 and not last and not nxt and start is None)
        or (seq > 0 and start is not None)
        or (start is not None and last)
        or (last and nxt)
    ):
        raise error(type_, JSApiError(BAD_REQUEST))
    try:
        stream = svc.api.stream(req.op[3])
    except StreamNotFound:
        raise error(type_, JSApiError(STREAM_NOT_FOUND)) from None
    rg = stream.replicated
    if rg is not None and not rg.current:
        return  # a replica with a hole answers no reads until it caught up
    if rg is not None:
        # linearizable: a leader that was deposed while it could not hear (a
        # paused process, a partition) must not answer from its stale store;
        # it finds out here and, like a non-leader, does not answer
        try:
            await rg.raft.read_barrier()
        except RaftError:
            # deposed meanwhile: the new leader answers (``node.jetstream.handover``)
            svc.handover.deposed(req)
            return
    store = stream.store
    if start is not None:
        seq = seq_from_time(store, start)
    msg: StoredMsg | None
    try:
        if seq > 0 and not nxt:
            msg = store.load(seq)
        elif nxt:
            msg = store.load_next(nxt, max(seq, 1))
        else:
            msg = store.load_last(last)
    except (StoreError, ValueError):
        msg = None
    if msg is None:
        raise error(type_, JSApiError(NO_MESSAGE_FOUND))
    if req.reply:
        text = render.stream_msg_get_response(msg, headers=not r.get("no_hdr", False))
        svc.client.publish(req.reply, text.encode())


def seq_from_time(store: StreamStore, ts_ns: int) -> int:
    """The first live sequence stored at or after ``ts_ns`` (``last_seq + 1``
    if none): a binary search, message timestamps growing with sequences.
    """
    state = store.state()
    lo, hi = state.first_seq, state.last_seq + 1
    found = hi
    while lo < hi:
        mid = (lo + hi) // 2
        m = store.load_next(">", mid)
        if m is None:
            hi = mid
        elif m.ts_ns >= ts_ns:
            found = m.seq
            hi = mid
        else:
            lo = m.seq + 1
    return found


# --------------------------------------------------------------------------- MSG.DELETE


async def delete(svc: JetStreamService, req: ApiRequest) -> str:
    """STREAM.MSG.DELETE: ``seq``, ``no_erase``; ``{"success":true}``.

    Raises:
        ApiAnswer: the error answers; nothing stored changes.
    """
    type_ = MSG_DELETE_RESPONSE
    if apireq.is_empty_request(req.body):
        raise error(type_, JSApiError(BAD_REQUEST))
    try:
        r = apireq.decode(req.body, apireq.MSG_DELETE)
    except JSApiError as err:
        raise error(type_, err) from None
    try:
        stream = svc.api.stream(req.op[3])
    except StreamNotFound:
        raise error(type_, JSApiError(STREAM_NOT_FOUND)) from None
    # nats-server refuses these before asking the store; apply decides them again
    if stream.cfg.sealed:
        raise error(type_, JSApiError(STREAM_SEALED))
    if stream.cfg.deny_delete:
        raise error(type_, JSApiError(STREAM_MSG_DELETE_FAILED, err="message delete not permitted"))
    seq = r.get("seq", 0)
    result = await svc.api.delete_msg(stream.cfg.name, seq, erase=not r.get("no_erase", False))
    if isinstance(result, DeleteResult):
        return dumps({"type": type_, "success": True})
    if not isinstance(result, ApiErrorResult):
        raise TypeError(f"unexpected delete result {result!r}")
    refusal = _store_refusal(stream.cfg.storage, stream.store, seq, result)
    if refusal is None:  # sealed or denied since the checks above: as those
        denied = {
            "code": result.code,
            "err_code": result.err_code,
            "description": result.description,
        }
        raise ApiAnswer(dumps({"type": type_, "error": denied}))
    # nats-server sends the store's refusals as plain answers (not API errors)
    return dumps({"type": type_, "error": refusal})


def _store_refusal(
    storage: Storage, store: StreamStore, seq: int, result: ApiErrorResult
) -> dict[str, Any] | None:
    """The store's refusal as nats-server words it (the store is unchanged),
    or None when ``result`` is not about a missing message.
    """
    if result.err_code != STREAM_MSG_DELETE_FAILED or result.description not in (
        "no message found",
        "stream store EOF",
    ):
        return None
    state = store.state()
    if storage is Storage.MEMORY or state.first_seq <= seq <= state.last_seq:
        return JSApiError(SEQUENCE_NOT_FOUND, seq=seq).to_dict()
    return {"code": result.code, "err_code": result.err_code, "description": result.description}


# --------------------------------------------------------------------------- DIRECT.GET


async def direct_get(svc: JetStreamService, req: ApiRequest) -> None:
    """DIRECT.GET ``<stream>`` (JSON body) or ``<stream>.<subject>`` (last for
    the subject); answers are messages on ``req.reply``, never counted.
    """
    if not req.reply:
        return
    try:
        stream = svc.api.stream(req.op[2])
    except StreamNotFound:
        return  # deleted since the request arrived: its subscription is gone too
    rg = stream.replicated
    if rg is not None and not rg.current:
        return  # a replica with a hole answers no reads until it caught up
    name = stream.cfg.name
    out = _Replies(svc, req.reply)
    if len(req.op) == 3:
        r = _direct_request(req.body, out)
    else:
        r = _last_by_subject_request(".".join(req.op[3:]), req.body, out)
    if r is None:
        return
    store = stream.store
    max_bytes = r.get("max_bytes", 0) or svc.server.cfg.max_pending
    if r.get("multi_last"):
        _multi_last(name, store, r, max_bytes, out)
    else:
        _direct(name, store, r, max_bytes, out)


class _Replies:
    """Publishes direct-get answers to one reply subject."""

    def __init__(self, svc: JetStreamService, reply: bytes) -> None:
        self.publish = svc.client.publish
        self.reply = reply

    def status(self, hdr: bytes) -> None:
        self.publish(self.reply, b"", headers=hdr)

    def msg(self, hdr: bytes | None, payload: bytes) -> None:
        self.publish(self.reply, payload, headers=hdr)


def _direct_request(body: bytes, out: _Replies) -> dict[str, Any] | None:
    if not body:
        out.status(_STATUS_EMPTY)
        return None
    r = apireq.decode_lenient(body, apireq.MSG_GET)
    if r is None:
        out.status(_STATUS_MALFORMED)
        return None
    seq, last, nxt = r.get("seq", 0), r.get("last_by_subj", ""), r.get("next_by_subj", "")
    multi, start = r.get("multi_last") or [], r.get("start_time")
    if seq == 0 and not last and not nxt and not multi and start is None:
        out.status(_STATUS_EMPTY)
        return None
    if (
        (seq > 0 and last)
        or (seq > 0 and start is not None)
        or (start is not None and last)
        or (last and nxt)
        or (last and r.get("batch", 0) > 0)
        or (last and multi)
        or (nxt and multi)
        or (r.get("up_to_seq", 0) > 0 and r.get("up_to_time") is not None)
    ):
        out.status(_STATUS_BAD)
        return None
    return r


def _last_by_subject_request(key: str, body: bytes, out: _Replies) -> dict[str, Any] | None:
    r: dict[str, Any] = {}
    if body:
        parsed = apireq.decode_lenient(body, apireq.MSG_GET)
        if parsed is None:
            out.status(_STATUS_MALFORMED)
            return None
        r = parsed
    if not key or any(
        r.get(f) for f in ("last_by_subj", "next_by_subj", "multi_last", "seq", "batch")
    ):
        out.status(_STATUS_BAD)
        return None
    if any(r.get(f) is not None for f in ("start_time", "up_to_time")) or r.get("up_to_seq"):
        out.status(_STATUS_BAD)
        return None
    r["last_by_subj"] = key
    return r


def _load(store: StreamStore, how: str, arg: str | int, seq: int = 0) -> StoredMsg | None:
    try:
        if how == "seq":
            return store.load(int(arg))
        if how == "next":
            return store.load_next(str(arg), max(seq, 1))
        return store.load_last(str(arg))
    except (StoreError, ValueError):
        return None


def _direct(
    name: str, store: StreamStore, r: dict[str, Any], max_bytes: int, out: _Replies
) -> None:
    """One message, or a batch ending with ``204 EOB``."""
    start = r.get("start_time")
    seq = seq_from_time(store, start) if start is not None else r.get("seq", 0)
    nxt, last = r.get("next_by_subj", ""), r.get("last_by_subj", "")
    headers = not r.get("no_hdr", False)
    batch = r.get("batch", 0)
    is_batch = batch > 0
    pending = num_pending(store, seq, nxt) if is_batch else 0
    lseq = sent_bytes = 0
    for i in range(max(batch, 1)):
        if seq > 0 and not nxt:
            msg = (
                _load(store, "seq", seq)
                if i == 0 and not is_batch
                else _load(store, "next", ">", seq)
            )
        elif nxt:
            msg = _load(store, "next", nxt, seq)
        else:
            msg = _load(store, "last", last)
        if msg is None:
            if batch > 1 and i > 0:
                break
            out.status(_STATUS_NOT_FOUND)
            return
        seq = msg.seq + 1
        hdr: bytes | None = None
        if headers:
            if is_batch:
                pending = max(pending - 1, 0)
                hdr = render.direct_get_headers(name, msg, pending=pending, last_seq=lseq)
            else:
                hdr = render.direct_get_headers(name, msg)
        lseq = msg.seq
        out.msg(hdr, msg.payload)
        sent_bytes += len(msg.subject) + len(msg.headers) + len(msg.payload)
        if sent_bytes >= max_bytes:
            break
    if is_batch:
        out.status(
            b"NATS/1.0 204 EOB\r\nNats-Num-Pending: %d\r\nNats-Last-Sequence: %d\r\n\r\n"
            % (pending, lseq)
        )


def num_pending(store: StreamStore, start_seq: int, filter: str) -> int:
    """Live messages at or after ``start_seq`` matching ``filter`` ("" = all), counted from
    the store's index (a walk over the messages made each batch request O(stream))."""
    return count_pending(store, (filter,) if filter else (), max(start_seq, 0))


def _multi_last(
    name: str, store: StreamStore, r: dict[str, Any], max_bytes: int, out: _Replies
) -> None:
    """The last message of every subject matching ``multi_last`` (up to
    ``up_to_seq``/``up_to_time``, from ``seq``), ending with ``204 EOB``.
    """
    state = store.state()
    up_to = r.get("up_to_seq", 0)
    if r.get("up_to_time") is not None:
        up_to = seq_from_time(store, r["up_to_time"])
        if up_to <= state.first_seq:
            out.status(_STATUS_NO_RESULTS)
            return
        up_to -= 1
    if up_to == 0:
        up_to = state.last_seq
    seqs = _last_seqs(store, r["multi_last"], up_to)
    if len(seqs) > MULTI_LAST_RESULTS_MAX:
        out.status(_STATUS_TOO_MANY)
        return
    if not seqs:
        out.status(_STATUS_NO_RESULTS)
        return
    min_seq, batch, headers = r.get("seq", 0), r.get("batch", 0), not r.get("no_hdr", False)
    pending = len(seqs)
    lseq = sent = sent_bytes = 0
    for seq in seqs:
        pending = max(pending - 1, 0)
        if seq < min_seq:
            continue
        msg = _load(store, "seq", seq)
        if msg is None:
            out.status(_STATUS_NOT_FOUND)
            return
        hdr = (
            render.direct_get_headers(name, msg, pending=pending, last_seq=lseq)
            if headers
            else None
        )
        lseq = msg.seq
        out.msg(hdr, msg.payload)
        sent_bytes += len(msg.subject) + len(msg.headers) + len(msg.payload)
        if sent_bytes >= max_bytes:
            break
        sent += 1
        if batch > 0 and sent >= batch:
            break
    out.status(
        b"NATS/1.0 204 EOB\r\nNats-Num-Pending: %d\r\nNats-Last-Sequence: %d\r\n"
        b"Nats-UpTo-Sequence: %d\r\n\r\n" % (pending, lseq, up_to)
    )


def _last_seqs(store: StreamStore, filters: list[str], up_to: int) -> list[int]:
    """For each subject matching any filter, its last sequence ``<= up_to`` (sorted)."""
    seqs: set[int] = set()
    for filt in filters:
        try:
            subjects = store.subject_state(filt)
        except ValueError:
            continue
        for subject, ss in subjects.items():
            if ss.last_seq <= up_to:
                seqs.add(ss.last_seq)
                continue
            best, seq = 0, ss.first_seq
            while (m := store.load_next(subject, seq)) is not None and m.seq <= up_to:
                best, seq = m.seq, m.seq + 1
            if best:
                seqs.add(best)
    return sorted(seqs)
