"""cluster.sourcing: header helpers and feeds over in-memory streams (trio, in process).

The feeds run inside a ``JetStreamApi`` with no store directory; tests wait
for a stream to reach a sequence through its listeners (no sleeps).
"""

from __future__ import annotations

from collections.abc import Callable

import trio

from cluster.api import JetStreamApi
from cluster.headers import encode_headers, parse_headers
from cluster.model import ExternalStream, Storage, StreamConfig, StreamSource, SubjectTransform
from cluster.source_headers import (
    mirror_headers,
    parse_rfc3339_ns,
    source_header_maker,
    source_header_value,
    sourced_headers,
    stream_identity,
)
from cluster.stream_fsm import ApplyOutcome
from cluster.streams import Stream

WAIT_S = 5.0


def test_identity_is_nats_servers_hash_of_the_creation_time() -> None:
    # observed on nats-server 2.15.1: created 2026-11-22T03:50:00.423572666Z
    created = parse_rfc3339_ns("2026-11-22T03:50:00.423572666Z")
    assert stream_identity(created) == "MvVWJkyd"
    assert parse_rfc3339_ns("2024-01-02T03:04:05+01:00") == parse_rfc3339_ns("2024-01-02T02:04:05Z")


def test_source_header_value_forms() -> None:
    plain = StreamSource(name="O")
    assert source_header_value(plain, 5, "o.z", "ID") == "O 5 > > o.z ID"
    filt = StreamSource(name="O", filter_subject="o.a")
    assert source_header_value(filt, 1, "o.a", "ID") == "O 1 o.a > o.a ID"
    trs = StreamSource(
        name="O",
        subject_transforms=(SubjectTransform("o.a", "x.a"), SubjectTransform("o.b", "")),
    )
    # observed on nats-server 2.15.1 (transforms joined by form feeds)
    assert source_header_value(trs, 1, "o.a", "ID") == "O 1 o.a\fo.b x.a\f> o.a ID"
    # the per-batch form gives the same values
    ext = StreamSource(name="O", external=ExternalStream(api="$JS.hub.API"))
    for src in (plain, filt, trs, ext):
        for ident in ("ID", ""):
            make = source_header_maker(src, ident)
            for seq, subj in ((1, "o.a"), (12345, "o.b.c")):
                assert make(seq, subj) == source_header_value(src, seq, subj, ident).encode()


def test_header_stripping() -> None:
    h = encode_headers(
        [
            ("Nats-Msg-Id", "1"),
            ("Nats-Expected-Stream", "O"),
            ("X", "y"),
            ("Nats-Stream-Source", "Q 1 > > q"),
            ("Nats-Batch-Id", "b"),
        ]
    )
    assert mirror_headers(h) == encode_headers(
        [("Nats-Msg-Id", "1"), ("X", "y"), ("Nats-Stream-Source", "Q 1 > > q")]
    )
    assert mirror_headers(b"") is None
    out = sourced_headers(h, "O 3 > > o.a ID")
    assert out == encode_headers(
        [("Nats-Msg-Id", "1"), ("X", "y"), ("Nats-Stream-Source", "O 3 > > o.a ID")]
    )
    assert sourced_headers(b"", "V") == b"NATS/1.0\r\nNats-Stream-Source: V\r\n\r\n"
    assert sourced_headers(b"", b"V") == sourced_headers(b"", "V")
    assert sourced_headers(h, b"O 3 > > o.a ID") == out


async def _reach(stream: Stream, last_seq: int) -> None:
    """Wait until ``stream`` holds ``last_seq`` (woken by its listeners)."""
    changed = trio.Event()

    def on(outcome: ApplyOutcome) -> None:
        changed.set()

    stream.listeners.append(on)
    try:
        with trio.fail_after(WAIT_S):
            while stream.store.state().last_seq < last_seq:
                await changed.wait()
                changed = trio.Event()
    finally:
        stream.listeners.remove(on)


def _watch(stream: Stream, pred: Callable[[ApplyOutcome], bool]) -> trio.Event:
    """An event set by the first outcome of ``stream`` that satisfies ``pred``."""
    seen = trio.Event()

    def on(outcome: ApplyOutcome) -> None:
        if pred(outcome):
            seen.set()

    stream.listeners.append(on)
    return seen


def _cfg(name: str, **kw: object) -> StreamConfig:
    return StreamConfig(name=name, storage=Storage.MEMORY, **kw)  # type: ignore[arg-type]


async def test_mirror_and_sources_copy_with_headers_and_dedupe() -> None:
    async with trio.open_nursery() as nursery:
        api = JetStreamApi(None, nursery)
        origin = await api.create_stream(_cfg("O", subjects=("o.>",)))
        other = await api.create_stream(_cfg("P", subjects=("p.>",)))
        mirror = await api.create_stream(
            _cfg(
                "M",
                duplicate_window_ns=0,
                mirror=StreamSource(
                    name="O", subject_transforms=(SubjectTransform("o.*", "m.$1"),)
                ),
            )
        )
        src = await api.create_stream(
            _cfg("S", sources=(StreamSource(name="O", filter_subject="o.a"), StreamSource("P")))
        )
        hdr = encode_headers([("Nats-Msg-Id", "same"), ("Nats-Expected-Last-Sequence", "0")])
        api.publish("O", "o.a", hdr, b"one", None)
        api.publish("O", "o.b", None, b"two", None)
        await _reach(src, 1)
        deduped = _watch(src, lambda o: any(getattr(r, "duplicate", False) for r in o.results))
        api.publish("P", "p.a", encode_headers([("Nats-Msg-Id", "same")]), b"dup", None)
        with trio.fail_after(WAIT_S):
            await deduped.wait()
        api.publish("O", "o.a", None, b"three", None)
        await _reach(mirror, 3)
        await _reach(src, 2)
        m1 = mirror.store.load(1)
        o1 = origin.store.load(1)
        assert (m1.subject, m1.ts_ns, m1.payload) == ("m.a", o1.ts_ns, b"one")
        assert parse_headers(m1.headers).get("Nats-Expected-Last-Sequence") is None
        assert mirror.store.load(2).subject == "m.b"
        # S: o.a 1, o.a 3 from O; P's message carries the same Nats-Msg-Id: deduped
        ident = stream_identity(origin.created_ns)
        got = [src.store.load(s) for s in (1, 2)]
        assert [m.payload for m in got] == [b"one", b"three"]
        assert parse_headers(got[0].headers).get("Nats-Stream-Source") == f"O 1 o.a > o.a {ident}"
        assert parse_headers(got[1].headers).get("Nats-Stream-Source") == f"O 3 o.a > o.a {ident}"
        assert src.store.state().msgs == 2
        infos = api.sourcing.sources_info("S")
        assert [(i["name"], i.get("seq")) for i in infos] == [("O", 3), ("P", 1)]
        minfo = api.sourcing.mirror_info("M")
        assert minfo is not None and 0 <= minfo.pop("active") <= 1_000_000_000
        assert minfo == {
            "name": "O",
            "lag": 0,
            "subject_transforms": [{"src": "o.*", "dest": "m.$1"}],
        }
        assert other.store.state().msgs == 1
        # promoting the mirror (removing the mirror config) stops its feed
        await api.update_stream(_cfg("M", duplicate_window_ns=0))
        assert api.sourcing.mirror_info("M") is None
        api.publish("O", "o.c", None, b"four", None)
        await _reach(origin, 4)
        await api.delete_stream("S")
        assert api.sourcing.sources_info("S") == []
        nursery.cancel_scope.cancel()
