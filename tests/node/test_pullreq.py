"""``node.jetstream.pullreq``: MSG.NEXT bodies read as nats-server 2.15.1 reads them
(texts checked against the reference in tests/compat/test_js_consumer_pull_compat.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cluster.consumer_model import ConsumerConfig
from node.jetstream.pullreq import PullSpec, decode_pull, priority_refusal


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b'{"batch":"2"}', "json: cannot unmarshal string into Go struct field .batch of type int"),
        (
            b'{"batch":1.5}',
            "json: cannot unmarshal number 1.5 into Go struct field .batch of type int",
        ),
        (
            b'{"expires":"1s"}',
            "json: cannot unmarshal string into Go struct field .expires of type time.Duration",
        ),
        (
            b'{"no_wait":"yes"}',
            "json: cannot unmarshal string into Go struct field .no_wait of type bool",
        ),
        (b"{not json", "invalid character 'n' looking for beginning of object key string"),
        (b'{"batch":1', "unexpected end of JSON input"),
        (b'{"batch":1} x', "invalid character 'x' after top-level value"),
        (b'{"expires":10,"idle_heartbeat":6}', "heartbeat value too large"),
    ],
)
def test_refusals_carry_go_texts(body: bytes, reason: str) -> None:
    assert decode_pull(body) == reason


def test_forms_and_fields() -> None:
    assert decode_pull(b"") == PullSpec()
    assert decode_pull(b" 7 ") == PullSpec(batch=7)
    assert decode_pull(b"[1]") == PullSpec()
    assert decode_pull(b"abc") == PullSpec()
    spec = decode_pull(b'{"Batch":3,"EXPIRES":-5,"no_wait":true,"max_bytes":9,"whatever":[1]}')
    assert spec == PullSpec(batch=3, expires_ns=-5, no_wait=True, max_bytes=9, formal=True)


def test_priority_fields_on_a_plain_consumer() -> None:
    cfg = ConsumerConfig()
    for body, reason in (
        (b'{"min_pending":1}', "Not a Overflow Priority consumer"),
        (b'{"id":"x"}', "Not a Pinned Client Priority consumer"),
        (b'{"priority":10}', "Priority must be between 0 and 9"),
        (b'{"group":"g"}', None),
    ):
        spec = decode_pull(body)
        assert isinstance(spec, PullSpec)
        assert priority_refusal(spec, cfg) == reason
    assert priority_refusal(PullSpec(min_pending=1), replace(cfg)) is None  # not a JSON request
