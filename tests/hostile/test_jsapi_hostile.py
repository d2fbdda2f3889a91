"""Hostile JetStream API requests: deep and huge JSON, big subject lists.

Every JSON-taking API request gets bodies nested 1,000 / 10,001 / 20,000
deep (Go's decoder allows 10,000 levels: past that nats-server answers
10025 ``invalid JSON: exceeded max depth at offset N``), and huge flat ones;
the answers must be the reference's, error texts included.  Streams with
10,000 subjects and consumers with 10,000 filter subjects must be created
(or refused with the reference's error) while another client is served.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.hostile.conftest import (
    LIVENESS_S,
    REPLY_S,
    Observer,
    api,
    api_client,
    read_msg,
    send_api,
    strip_volatile,
)
from tests.support import ServerProcess

BIG = 10_000


def deep(n: int) -> bytes:
    return b"[" * n + b"]" * n


@pytest.fixture(scope="module")
def with_stream(pair: dict[str, ServerProcess]) -> dict[str, ServerProcess]:
    """Stream H (subjects h.>) and durable consumer D exist on both servers."""
    for kind, sp in pair.items():
        made = api(sp, "$JS.API.STREAM.CREATE.H", b'{"name":"H","subjects":["h.>"]}')
        assert "error" not in made, (kind, made)
        cfg = b'{"stream_name":"H","config":{"durable_name":"D","ack_policy":"explicit"}}'
        made = api(sp, "$JS.API.CONSUMER.CREATE.H.D", cfg)
        assert "error" not in made, (kind, made)
    return pair


# (subject, body with {} standing for the hostile value)
JSON_PLACES: list[tuple[str, bytes]] = [
    ("$JS.API.INFO", b'{"x":{}}'),
    ("$JS.API.STREAM.CREATE.S", b'{"name":"S","subjects":["s"],"x":{}}'),
    ("$JS.API.STREAM.CREATE.S", b'{"name":"S","subjects":{}}'),
    ("$JS.API.STREAM.UPDATE.H", b'{"name":"H","subjects":["h.>"],"metadata":{}}'),
    ("$JS.API.STREAM.NAMES", b'{"subject":{}}'),
    ("$JS.API.STREAM.LIST", b'{"offset":{}}'),
    ("$JS.API.STREAM.INFO.H", b'{"subjects_filter":{}}'),
    ("$JS.API.STREAM.MSG.GET.H", b'{"seq":{}}'),
    ("$JS.API.STREAM.MSG.DELETE.H", b'{"seq":{}}'),
    ("$JS.API.STREAM.PURGE.H", b'{"filter":{}}'),
    ("$JS.API.CONSUMER.CREATE.H.C", b'{"stream_name":"H","config":{}}'),
    ("$JS.API.CONSUMER.DURABLE.CREATE.H.C", b'{"stream_name":"H","config":{"x":{}}}'),
    ("$JS.API.CONSUMER.NAMES.H", b'{"offset":{}}'),
    ("$JS.API.CONSUMER.LIST.H", b'{"offset":{}}'),
    ("$JS.API.CONSUMER.PAUSE.H.D", b'{"pause_until":{}}'),
    ("$JS.API.STREAM.SNAPSHOT.H", b'{"deliver_subject":{}}'),
]


def _places() -> list[Any]:
    out = []
    for depth in (1000, 10_001, 20_000):
        for subject, body in JSON_PLACES:
            out.append(
                pytest.param(
                    subject,
                    body.replace(b"{}", deep(depth), 1),
                    id=f"{subject.split('API.')[1]}-{depth}",
                )
            )
    return out


@pytest.mark.parametrize(("subject", "body"), _places())
def test_deep_json_answered_as_reference(
    with_stream: dict[str, ServerProcess], subject: str, body: bytes
) -> None:
    answers = {}
    for kind, sp in with_stream.items():
        with Observer(sp) as obs:
            answers[kind] = api(sp, subject, body)
            obs.assert_serving()
    ref, tj = (strip_volatile(answers[k]) for k in ("reference", "trijet"))
    assert tj == ref


HUGE_BODIES = [
    pytest.param(
        "$JS.API.STREAM.CREATE.S",
        b'{"name":"S","subjects":["s"],"description":"' + b"d" * 900_000 + b'"}',
        id="create-900KB-description",
    ),
    pytest.param(
        "$JS.API.STREAM.NAMES",
        b'{"subject":"' + b"a." * 400_000 + b'a"}',
        id="names-400k-token-subject",
    ),
    pytest.param(
        "$JS.API.STREAM.INFO.H",
        b'{"subjects_filter":"' + b".".join([b"*"] * 100_000) + b'"}',
        id="info-100k-star-filter",
    ),
    pytest.param(
        "$JS.API.STREAM.CREATE.S",
        b'{"name":"S","x":[' + b",".join([b"1"] * 200_000) + b"]}",
        id="create-200k-element-array",
    ),
    pytest.param(
        "$JS.API.CONSUMER.MSG.NEXT.H.D",
        b'{"batch":1,"expires":' + b"9" * 5000 + b"}",
        id="next-5000-digit-number",
    ),
]


@pytest.mark.parametrize(("subject", "body"), HUGE_BODIES)
def test_huge_json_answered_as_reference(
    with_stream: dict[str, ServerProcess], subject: str, body: bytes
) -> None:
    answers = {}
    for kind, sp in with_stream.items():
        with Observer(sp) as obs:
            answers[kind] = api(sp, subject, body, timeout=LIVENESS_S)
            obs.assert_serving()
        api(sp, "$JS.API.STREAM.DELETE.S", b"")
    ref, tj = (strip_volatile(answers[k]) for k in ("reference", "trijet"))
    if isinstance(ref, dict) and "error" not in ref:  # created: compare what matters
        assert tj is not None and "error" not in tj, tj
        assert tj.get("config", {}).get("subjects") == ref.get("config", {}).get("subjects")
    else:
        assert tj == ref


def _big_request(sp: ServerProcess, subject: str, doc: dict[str, Any]) -> Any:
    """Send a big request and, before its answer, prove another client is served."""
    with Observer(sp) as obs, api_client(sp) as c:
        send_api(c, subject, json.dumps(doc).encode())
        obs.assert_serving()
        got = read_msg(c, timeout=REPLY_S)
    return json.loads(got) if got else None


def _summary(answer: Any) -> Any:
    if not isinstance(answer, dict):
        return answer
    if "error" in answer:
        return answer["error"]
    cfg = answer.get("config", {})
    return {
        "subjects": len(cfg.get("subjects") or []),
        "filters": len(cfg.get("filter_subjects") or []),
    }


SUBJECTS = [f"big.{i}.x" for i in range(BIG)]


@pytest.mark.parametrize(
    ("case_id", "subjects"),
    [
        ("distinct", SUBJECTS),
        ("last_overlaps_first", [*SUBJECTS[:-1], "big.0.*"]),
        ("duplicate_at_end", [*SUBJECTS, "big.5.x"]),
        ("wildcard_overlaps_many", ["big.*.x", *SUBJECTS]),
        ("one_invalid_at_end", [*SUBJECTS[:-1], "big..x"]),
    ],
)
def test_stream_with_many_subjects(
    pair: dict[str, ServerProcess], case_id: str, subjects: list[str]
) -> None:
    answers = {}
    for kind, sp in pair.items():
        doc = {"name": "BIG", "subjects": subjects}
        answers[kind] = _summary(_big_request(sp, "$JS.API.STREAM.CREATE.BIG", doc))
        api(sp, "$JS.API.STREAM.DELETE.BIG", b"")
    assert answers["trijet"] == answers["reference"], case_id


def test_stream_overlapping_another_with_many_subjects(pair: dict[str, ServerProcess]) -> None:
    answers = {}
    for kind, sp in pair.items():
        assert "error" not in api(
            sp, "$JS.API.STREAM.CREATE.ONE", b'{"name":"ONE","subjects":["big.9999.*"]}'
        )
        doc = {"name": "BIG", "subjects": SUBJECTS}
        answers[kind] = _summary(_big_request(sp, "$JS.API.STREAM.CREATE.BIG", doc))
        api(sp, "$JS.API.STREAM.DELETE.ONE", b"")
        api(sp, "$JS.API.STREAM.DELETE.BIG", b"")
    assert answers["trijet"] == answers["reference"]


@pytest.mark.parametrize(
    ("case_id", "filters"),
    [
        ("distinct", SUBJECTS),
        ("subset_at_end", [*SUBJECTS, "big.17.*"]),
        ("duplicate", [*SUBJECTS, "big.3.x"]),
        ("invalid_at_end", [*SUBJECTS, "big.>.x"]),
    ],
)
def test_consumer_with_many_filters(
    with_stream: dict[str, ServerProcess], case_id: str, filters: list[str]
) -> None:
    answers = {}
    for kind, sp in with_stream.items():
        if "error" in (api(sp, "$JS.API.STREAM.INFO.F", b"") or {"error": 1}):
            made = api(sp, "$JS.API.STREAM.CREATE.F", b'{"name":"F","subjects":["big.>"]}')
            assert "error" not in made, (kind, made)
        doc = {"stream_name": "F", "config": {"name": "C", "filter_subjects": filters}}
        answers[kind] = _summary(_big_request(sp, "$JS.API.CONSUMER.CREATE.F.C", doc))
        api(sp, "$JS.API.CONSUMER.DELETE.F.C", b"")
    assert answers["trijet"] == answers["reference"], case_id


HEADER_CASES = [
    pytest.param(b"".join(b"X-%d: v\r\n" % i for i in range(10_000)), id="10k-header-lines"),
    pytest.param(b"Nats-Msg-Id: " + b"m" * 60_000 + b"\r\n", id="msg-id-60KB"),
    pytest.param(b"".join(b"Nats-Msg-Id: %d\r\n" % i for i in range(3000)), id="3000-msg-ids"),
    pytest.param(
        b"Nats-Expected-Last-Sequence: " + b"9" * 5000 + b"\r\n", id="exp-seq-5000-digits"
    ),
    pytest.param(b"Nats-Expected-Last-Sequence: -1\r\n", id="exp-seq-negative"),
    pytest.param(b"Nats-Expected-Last-Subject-Sequence: abc\r\n", id="exp-subj-seq-garbage"),
    pytest.param(b"Nats-TTL: 1000000000000000h\r\n", id="ttl-huge-duration"),
    pytest.param(b"Nats-TTL: " + b"9" * 5000 + b"\r\n", id="ttl-5000-digits"),
    pytest.param(b"Nats-Rollup: " + b"x" * 1000 + b"\r\n", id="rollup-garbage"),
    pytest.param(b"NoColonHere\r\n", id="line-without-colon"),
    pytest.param(b"Nats-Expected-Stream: " + b"s" * 50_000 + b"\r\n", id="expected-stream-50KB"),
]


@pytest.mark.parametrize("headers", HEADER_CASES)
def test_publish_with_hostile_headers(pair: dict[str, ServerProcess], headers: bytes) -> None:
    """HPUB into a stream with hostile headers: the PubAck (or its error) is
    the reference's; nothing escapes as an internal error."""
    answers = {}
    for kind, sp in pair.items():
        if "error" in (api(sp, "$JS.API.STREAM.INFO.HD", b"") or {"error": 1}):
            cfg = b'{"name":"HD","subjects":["hd.>"],"allow_msg_ttl":true,"allow_rollup_hdrs":true}'
            assert "error" not in api(sp, "$JS.API.STREAM.CREATE.HD", cfg), kind
        block = b"NATS/1.0\r\n" + headers + b"\r\n"
        with Observer(sp) as obs, api_client(sp) as c:
            c.send(b"HPUB hd.x r.1 %d %d\r\n%shi\r\n" % (len(block), len(block) + 2, block))
            got = read_msg(c, timeout=LIVENESS_S)
            obs.assert_serving()
        answers[kind] = json.loads(got) if got else None
    for sp in pair.values():
        api(sp, "$JS.API.STREAM.DELETE.HD", b"")
    assert answers["trijet"] == answers["reference"]


def test_huge_numbers_in_strings(with_stream: dict[str, ServerProcess]) -> None:
    """Numbers past int64 inside strings (a consumer's sample_freq, the
    required API level header): refused as the reference refuses them."""
    huge = "9" * 5000
    answers: dict[str, list[Any]] = {}
    for kind, sp in with_stream.items():
        cfg = {"stream_name": "H", "config": {"name": "SF", "sample_freq": huge}}
        got = [_summary(api(sp, "$JS.API.CONSUMER.CREATE.H.SF", json.dumps(cfg).encode()))]
        with api_client(sp) as c:
            hdr = b"NATS/1.0\r\nNats-Required-Api-Level: " + huge.encode() + b"\r\n\r\n"
            c.send(b"HPUB $JS.API.INFO r.1 %d %d\r\n%s\r\n" % (len(hdr), len(hdr), hdr))
            raw = read_msg(c, timeout=LIVENESS_S)
        got.append(json.loads(raw).get("error") if raw else None)
        answers[kind] = got
    assert answers["trijet"] == answers["reference"]
