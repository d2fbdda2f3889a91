"""cluster.api_origin: a remote origin read through a consumer, over a fake bus (trio, in process).

``FakeBus`` is the ``Messaging`` capability with a scripted far side: it
answers consumer creates and ``STREAM.INFO`` as a test tells it and lets the
test deliver messages, heartbeats and flow-control requests to the deliver
subject the origin subscribed.  Timeouts run under trio's ``MockClock``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
import trio
import trio.testing

from cluster.api_origin import (
    ApiOrigin,
    MsgHandler,
    OriginRecreated,
    OriginRetry,
    OriginUnavailable,
    consumer_request,
    parse_ack_reply,
)
from cluster.model import ExternalStream, StreamSource, SubjectTransform
from cluster.origins import StartAt

Answer = Callable[[str, bytes, bytes | None], tuple[bytes | None, bytes] | None]


class FakeBus:
    """``Messaging`` with a scripted far side."""

    def __init__(self) -> None:
        self.subs: dict[str, MsgHandler] = {}
        self.sent: list[tuple[str, bytes, str | None, bytes | None]] = []
        self.answer: Answer = lambda subject, body, hdr: None

    def subscribe(self, subject: str, handler: MsgHandler) -> object:
        self.subs[subject] = handler
        return subject

    def unsubscribe(self, handle: object) -> None:
        self.subs.pop(str(handle), None)

    def publish(
        self,
        subject: str,
        payload: bytes,
        *,
        reply: str | None = None,
        headers: bytes | None = None,
    ) -> None:
        self.sent.append((subject, payload, reply, headers))
        got = self.answer(subject, payload, headers)
        if got is not None and reply is not None and reply in self.subs:
            self.subs[reply](reply, None, got[0], got[1])

    def deliver_subject(self) -> str:
        (subject,) = [s for s in self.subs if not s.startswith("$JSC.R.")]
        return subject

    def deliver(self, subject: str, reply: str | None, hdr: bytes | None, payload: bytes) -> None:
        self.subs[self.deliver_subject()](subject, reply, hdr, payload)


def _created(name_from: bytes, stream_seq: int) -> bytes:
    cfg = json.loads(name_from)["config"]
    return json.dumps(
        {
            "type": "io.nats.jetstream.api.v1.consumer_create_response",
            "stream_name": "O",
            "name": cfg["name"],
            "config": cfg,
            "delivered": {"consumer_seq": 0, "stream_seq": stream_seq},
        }
    ).encode()


def _ack(consumer: str, sseq: int, dseq: int, pending: int, dc: int = 1) -> str:
    return f"$JS.ACK.O.{consumer}.{dc}.{sseq}.{dseq}.{1_700_000_000_000_000_000 + sseq}.{pending}"


def _source(**kw: Any) -> StreamSource:
    return StreamSource(name="O", external=ExternalStream("$JS.hub.API", "dlv.hub"), **kw)


def _origin(bus: FakeBus, *, mirror: bool = False, identity: str = "") -> ApiOrigin:
    import random

    return ApiOrigin(
        bus,
        _source(),
        target="T",
        mirror=mirror,
        domain="spoke",
        identity=identity,
        rng=random.Random(7),
    )


def _accepting(bus: FakeBus, stream_seq: int, identity: str = "IDENT") -> None:
    def answer(subject: str, body: bytes, hdr: bytes | None) -> tuple[bytes | None, bytes] | None:
        if ".CONSUMER.CREATE." in subject:
            rh = f"NATS/1.0\r\nNats-Stream-Identity: {identity}\r\n\r\n".encode()
            return rh, _created(body, stream_seq)
        return None

    bus.answer = answer


# -------------------------------------------------------------------- wire helpers


def test_ack_reply_forms() -> None:
    a = parse_ack_reply("$JS.ACK.O.C.1.5.3.1700000000000000000.7")
    assert a is not None
    assert (a.stream, a.consumer, a.delivered, a.stream_seq, a.consumer_seq, a.pending) == (
        "O",
        "C",
        1,
        5,
        3,
        7,
    )
    v2 = parse_ack_reply("$JS.ACK.hub.ACCHASH.O.C.2.9.4.1700000000000000000.0.TOKEN")
    assert v2 is not None and (v2.stream, v2.delivered, v2.stream_seq) == ("O", 2, 9)
    assert parse_ack_reply("$JS.ACK.O.C.x.5.3.1.0") is None
    assert parse_ack_reply("_INBOX.a.b") is None


def test_consumer_request_is_nats_servers() -> None:
    # key order and values as nats-server 2.15.1 sends them (observed on the wire)
    subject, body = consumer_request(
        StreamSource(name="O", filter_subject="o.>"),
        mirror=False,
        name="JS_SRC_x",
        deliver="$JS.S.tok",
        at=StartAt(),
        metadata={"_nats.src.stream": "S", "_nats.src.acc": "$G", "_nats.src.domain": "spoke"},
    )
    assert subject == "CONSUMER.CREATE.O.JS_SRC_x.o.>"
    assert json.dumps(body, separators=(",", ":")) == (
        '{"stream_name":"O","config":{"name":"JS_SRC_x","deliver_policy":"all",'
        '"ack_policy":"none","ack_wait":79200000000000,"max_deliver":1,'
        '"filter_subject":"o.>","replay_policy":"instant","flow_control":true,'
        '"deliver_subject":"$JS.S.tok","idle_heartbeat":1000000000,'
        '"inactive_threshold":10000000000,"num_replicas":0,"direct":true,'
        '"metadata":{"_nats.src.acc":"$G","_nats.src.domain":"spoke","_nats.src.stream":"S"}},'
        '"action":""}'
    )
    trs = StreamSource(
        name="O",
        subject_transforms=(SubjectTransform("o.a", "x"), SubjectTransform("o.b", "y")),
    )
    subject, body = consumer_request(
        trs, mirror=True, name="N", deliver="d", at=StartAt(seq=4), metadata={}
    )
    assert subject == "CONSUMER.CREATE.O"
    cfg = body["config"]
    assert cfg["filter_subjects"] == ["o.a", "o.b"] and "filter_subject" not in cfg
    assert (cfg["deliver_policy"], cfg["opt_start_seq"]) == ("by_start_sequence", 4)
    one = StreamSource(name="O", subject_transforms=(SubjectTransform("o.a", "x"),))
    subject, body = consumer_request(
        one, mirror=True, name="N", deliver="d", at=StartAt(time_ns=1_500_000_000), metadata={}
    )
    assert subject == "CONSUMER.CREATE.O.N.o.a"
    assert body["config"]["opt_start_time"] == "1970-01-01T00:00:01.5Z"


# -------------------------------------------------------------------- setup


async def test_start_creates_the_consumer_and_reads_in_order() -> None:
    bus = FakeBus()
    _accepting(bus, stream_seq=2)
    origin = _origin(bus, mirror=True)
    assert await origin.start(StartAt(seq=3)) == 2
    assert origin.identity == "IDENT"
    create = bus.sent[0]
    assert create[0] == "$JS.hub.API.CONSUMER.CREATE.O"
    assert create[3] == b"NATS/1.0\r\nNats-Required-Api-Level: 4\r\n\r\n"
    cfg = json.loads(create[1])["config"]
    assert cfg["deliver_subject"].startswith("dlv.hub.M.")
    assert cfg["name"].startswith("JS_MIRROR_") and cfg["metadata"]["_nats.mirror.stream"] == "T"
    name = cfg["name"]
    bus.deliver("o.a", _ack(name, 3, 1, 2), b"NATS/1.0\r\nX: 1\r\n\r\n", b"a")
    bus.deliver("o.b", _ack(name, 5, 2, 1), None, b"b")
    msgs = await origin.read(2, 10)
    assert [(m.seq, m.subject, m.headers, m.payload) for m in msgs] == [
        (3, "o.a", b"NATS/1.0\r\nX: 1\r\n\r\n", b"a"),
        (5, "o.b", b"", b"b"),
    ]
    assert origin.lag(5) == 0  # pending 1 -> lag 0, as nats-server reports
    # an older consumer's delivery and a redelivery are ignored
    bus.deliver("o.c", _ack("OLD", 6, 3, 0), None, b"old")
    bus.deliver("o.c", _ack(name, 6, 3, 0, dc=2), None, b"again")
    bus.deliver("o.c", _ack(name, 6, 3, 0), None, b"c")
    assert [m.payload for m in await origin.read(5, 10)] == [b"c"]
    origin.close()
    assert not bus.subs


async def test_identity_from_stream_info_when_the_origin_does_not_say() -> None:
    bus = FakeBus()
    created = "2026-11-22T03:50:00.423572666Z"

    def answer(subject: str, body: bytes, hdr: bytes | None) -> tuple[bytes | None, bytes] | None:
        if ".CONSUMER.CREATE." in subject:
            return None, _created(body, 0)
        if subject == "$JS.hub.API.STREAM.INFO.O":
            return None, json.dumps({"created": created}).encode()
        return None

    bus.answer = answer
    origin = _origin(bus)
    await origin.start(StartAt())
    assert origin.identity == "MvVWJkyd"


async def test_source_sends_its_known_identity() -> None:
    bus = FakeBus()
    _accepting(bus, 0, identity="NEW")
    origin = _origin(bus, identity="OLD")
    await origin.start(StartAt(seq=5))
    assert bus.sent[0][3] == (
        b"NATS/1.0\r\nNats-Required-Api-Level: 5\r\nNats-Stream-Identity: OLD\r\n\r\n"
    )
    assert origin.identity == "NEW"  # the feed compares and starts over


async def test_error_answers_and_silence() -> None:
    bus = FakeBus()
    err = {"code": 404, "err_code": 10059, "description": "stream not found"}
    bus.answer = lambda s, b, h: (None, json.dumps({"type": "x", "error": err}).encode())
    with pytest.raises(OriginUnavailable) as exc:
        await _origin(bus).start(StartAt())
    assert exc.value.error == err
    assert not bus.subs  # the deliver subscription is dropped again

    mismatch = {"code": 400, "err_code": 10225, "description": "consumer's stream identity …"}
    bus.answer = lambda s, b, h: (None, json.dumps({"error": mismatch}).encode())
    with pytest.raises(OriginRecreated):
        await _origin(bus, identity="OLD").start(StartAt(seq=9))


async def test_no_answer_is_unavailable_without_error(mock_clock: trio.testing.MockClock) -> None:
    mock_clock.autojump_threshold = 0
    bus = FakeBus()
    with pytest.raises(OriginUnavailable) as exc:
        await _origin(bus).start(StartAt())
    assert exc.value.error is None


# -------------------------------------------------------------------- delivery checks


async def _started(bus: FakeBus, stream_seq: int = 0) -> tuple[ApiOrigin, str]:
    _accepting(bus, stream_seq)
    origin = _origin(bus)
    await origin.start(StartAt())
    return origin, origin.consumer


async def test_consumer_sequence_gap_restarts() -> None:
    bus = FakeBus()
    origin, name = await _started(bus)
    bus.deliver("o.a", _ack(name, 1, 1, 5), None, b"1")
    bus.deliver("o.a", _ack(name, 4, 3, 3), None, b"lost one")
    assert [m.seq for m in await origin.read(0, 10)] == [1]
    with pytest.raises(OriginRetry):
        await origin.read(1, 10)


async def test_heartbeat_checks_the_consumer_sequence_and_answers_stalls() -> None:
    bus = FakeBus()
    origin, name = await _started(bus)
    bus.deliver("o.a", _ack(name, 1, 1, 0), None, b"1")
    stalled = b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 1\r\nNats-Last-Stream: 1\r\n"
    bus.deliver("d", None, stalled + b"Nats-Consumer-Stalled: $JS.FC.O.x.AB12\r\n\r\n", b"")
    bus.deliver("o.a", _ack(name, 2, 2, 0), None, b"2")
    assert [m.seq for m in await origin.read(0, 10)] == [1, 2]
    assert bus.sent[-1][:2] == ("$JS.FC.O.x.AB12", b"")
    ahead = b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 5\r\nNats-Last-Stream: 9\r\n\r\n"
    bus.deliver("d", None, ahead, b"")
    with pytest.raises(OriginRetry):
        await origin.read(2, 10)


async def test_flow_control_is_answered_after_the_batch_before_it() -> None:
    bus = FakeBus()
    origin, name = await _started(bus)
    fc = b"NATS/1.0 100 FlowControl Request\r\n\r\n"
    bus.deliver("o.a", _ack(name, 1, 1, 1), None, b"1")
    bus.deliver("d", "$JS.FC.O.c.ZZ", fc, b"")
    bus.deliver("o.a", _ack(name, 2, 2, 0), None, b"2")
    assert [m.seq for m in await origin.read(0, 10)] == [1]
    assert not any(s == "$JS.FC.O.c.ZZ" for s, *_ in bus.sent)  # batch not yet proposed
    assert [m.seq for m in await origin.read(1, 10)] == [2]
    answers = [h for s, _, _, h in bus.sent if s == "$JS.FC.O.c.ZZ"]
    assert answers == [b"NATS/1.0\r\nNats-Last-Consumer: 1\r\nNats-Last-Stream: 1\r\n\r\n"]


async def test_silence_is_a_stall(mock_clock: trio.testing.MockClock) -> None:
    mock_clock.autojump_threshold = 0
    bus = FakeBus()
    origin, _ = await _started(bus)
    before = trio.current_time()
    with pytest.raises(OriginRetry):
        await origin.read(0, 10)
    assert trio.current_time() - before == pytest.approx(10.0)


async def test_api_level_is_lowered_when_the_origin_does_not_take_it() -> None:
    bus = FakeBus()
    too_high = {
        "code": 412,
        "err_code": 10185,
        "description": "JetStream minimum api level required",
    }

    def answer(subject: str, body: bytes, hdr: bytes | None) -> tuple[bytes | None, bytes] | None:
        if hdr is not None:  # this origin takes no level requirement at all
            return None, json.dumps({"error": too_high}).encode()
        return b"NATS/1.0\r\nNats-Stream-Identity: I\r\n\r\n", _created(body, 0)

    bus.answer = answer
    origin = _origin(bus)
    await origin.start(StartAt())
    assert [h for _, _, _, h in bus.sent] == [
        b"NATS/1.0\r\nNats-Required-Api-Level: 5\r\nNats-Stream-Identity: \r\n\r\n",
        b"NATS/1.0\r\nNats-Required-Api-Level: 4\r\n\r\n",
        None,
    ]
    bus.sent.clear()
    await _origin(bus, mirror=True).start(StartAt())
    assert [h for _, _, _, h in bus.sent] == [
        b"NATS/1.0\r\nNats-Required-Api-Level: 4\r\n\r\n",
        None,
    ]
