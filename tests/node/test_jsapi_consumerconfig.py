"""ConsumerConfig encoding, create parsing, pull-request and ack parsing (pure)."""

from __future__ import annotations

import pytest

from cluster.consumer_model import AckPolicy, ConsumerConfig, DeliverPolicy, PriorityPolicy
from cluster.model import StreamConfig
from cluster.ops import AckKind
from node.jetstream.delivery import _ack_item, parse_go_duration, parse_pull, status
from node.jsapi.consumerconfig import (
    Action,
    apply_defaults,
    check_update,
    decide_create,
    go_duration,
    parse_create,
)
from node.jsapi.errors import JSApiError

STREAM = StreamConfig(name="S", subjects=("s.>",))


def test_config_round_trip_and_key_order() -> None:
    cfg = ConsumerConfig(
        durable_name="d",
        name="d",
        deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
        opt_start_seq=3,
        ack_policy=AckPolicy.EXPLICIT,
        ack_wait_ns=5,
        backoff_ns=(1, 2),
        filter_subjects=("a", "b"),
        metadata=(("k", "v"),),
        priority_policy=PriorityPolicy.OVERFLOW,
        priority_groups=("A",),
    )
    d = cfg.to_dict()
    assert list(d)[:6] == [
        "durable_name",
        "name",
        "deliver_policy",
        "opt_start_seq",
        "ack_policy",
        "ack_wait",
    ]
    assert "num_replicas" in d and "max_waiting" not in d
    assert ConsumerConfig.from_dict(d) == cfg
    assert "priority_policy" not in ConsumerConfig().to_dict()


def test_defaults_and_pedantic() -> None:
    cfg = apply_defaults(ConsumerConfig(ack_policy=AckPolicy.EXPLICIT), STREAM, pedantic=False)
    assert (cfg.max_deliver, cfg.max_waiting, cfg.ack_wait_ns, cfg.max_ack_pending) == (
        -1,
        512,
        30_000_000_000,
        1000,
    )
    with pytest.raises(JSApiError) as e:
        apply_defaults(ConsumerConfig(max_deliver=-3), STREAM, pedantic=True)
    assert e.value.err_code == 10157


@pytest.mark.parametrize(
    ("op", "body", "err_code"),
    [
        (("CONSUMER", "CREATE", "S"), b'{"stream_name":"S","config":{"durable_name":"x"}}', 10020),
        (("CONSUMER", "CREATE", "S", "n"), b'{"stream_name":"T","config":{}}', 10056),
        (("CONSUMER", "DURABLE", "CREATE", "S", "d"), b'{"stream_name":"S","config":{}}', 10018),
        (("CONSUMER", "CREATE", "S", "n", "s", "a"), b'{"stream_name":"S","config":{}}', 10131),
        (
            ("CONSUMER", "CREATE", "S", "n"),
            b'{"stream_name":"S","config":{"num_replicas":3}}',
            10074,
        ),
        (("CONSUMER", "CREATE", "S", "n"), b"{", 10025),
    ],
)
def test_parse_create_errors(op: tuple[str, ...], body: bytes, err_code: int) -> None:
    with pytest.raises(JSApiError) as e:
        parse_create(op, body)
    assert e.value.err_code == err_code


def test_decide_create_update_and_actions() -> None:
    req = parse_create(("CONSUMER", "CREATE", "S", "n"), b'{"stream_name":"S","config":{}}')
    name, cfg, created = decide_create(req, STREAM, {}, new_name=lambda: "x")
    assert (name, created, cfg.inactive_threshold_ns) == ("n", True, 5_000_000_000)
    again = parse_create(
        ("CONSUMER", "CREATE", "S", "n"),
        b'{"stream_name":"S","config":{"deliver_policy":"new"},"action":"update"}',
    )
    assert again.action is Action.UPDATE
    with pytest.raises(JSApiError) as e:
        decide_create(again, STREAM, {"n": cfg}, new_name=lambda: "x")
    assert e.value.description == "deliver policy can not be updated"
    with pytest.raises(JSApiError) as e:
        decide_create(again, STREAM, {}, new_name=lambda: "x")
    assert e.value.err_code == 10149
    with pytest.raises(JSApiError):
        check_update(cfg, ConsumerConfig(deliver_subject="x", max_deliver=-1), deliver_bound=False)


def test_go_duration() -> None:
    assert [
        go_duration(n) for n in (0, 4_000_000_000, 90_000_000_000, 1_500_000, 3_600_000_000_000)
    ] == [
        "0s",
        "4s",
        "1m30s",
        "1.5ms",
        "1h0m0s",
    ]
    assert parse_go_duration("1m30s") == 90_000_000_000
    assert parse_go_duration("bogus") is None


def test_parse_pull_requests() -> None:
    assert parse_pull(b"") == (1, 0, False, 0, 0)
    assert parse_pull(b"7") == (7, 0, False, 0, 0)
    assert parse_pull(b"garbage") == (1, 0, False, 0, 0)
    assert parse_pull(b'{"batch":3,"expires":10,"no_wait":true,"max_bytes":5}') == (
        3,
        10,
        True,
        5,
        0,
    )
    assert parse_pull(b'{"expires":10,"idle_heartbeat":6}') == "heartbeat value too large"
    assert isinstance(parse_pull(b'{"batch":"x"}'), str)


def test_status_bytes() -> None:
    assert status(404, "No Messages") == b"NATS/1.0 404 No Messages\r\n\r\n"
    hdr = status(408, "Request Timeout", ("Nats-Pending-Messages", 1), ("Nats-Pending-Bytes", 0))
    assert (
        hdr
        == b"NATS/1.0 408 Request Timeout\r\nNats-Pending-Messages: 1\r\nNats-Pending-Bytes: 0\r\n\r\n"
    )


@pytest.mark.parametrize(
    ("body", "kind", "delay", "reason"),
    [
        (b"", AckKind.ACK, -1, ""),
        (b"+ACK", AckKind.ACK, -1, ""),
        (b"+OK", AckKind.ACK, -1, ""),
        (b"-NAK", AckKind.NAK, -1, ""),
        (b'-NAK {"delay":5000}', AckKind.NAK, 5000, ""),
        (b"-NAK 2s", AckKind.NAK, 2_000_000_000, ""),
        (b"-NAK nonsense", AckKind.NAK, -1, ""),
        (b"+WPI", AckKind.PROGRESS, -1, ""),
        (b"+TERM", AckKind.TERM, -1, ""),
        (b"+TERM broken input", AckKind.TERM, -1, "broken input"),
    ],
)
def test_ack_bodies(body: bytes, kind: AckKind, delay: int, reason: str) -> None:
    item, nxt = _ack_item(body, 4, 7)
    assert item is not None and nxt is None
    assert (item.kind, item.sseq, item.dseq, item.delay_ns, item.reason) == (
        kind,
        4,
        7,
        delay,
        reason,
    )


def test_ack_next_and_unknown_bodies() -> None:
    item, nxt = _ack_item(b"+NXT 5", 1, 1)
    assert item is not None and item.kind is AckKind.ACK and nxt == b" 5"
    assert _ack_item(b"whatever", 1, 1) == (None, None)
