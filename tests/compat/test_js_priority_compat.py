"""Differential: priority groups (ADR-42) on one node, trijet against nats-server.

The same nats-py session runs against one reference server and one trijet
server (each ``-js``, fresh store): consumer creates with priority configs
(accepted, or the error), a ``pinned_client`` consumer's pulls (the pin on
every message, 423 ``Nats-Pin-Id mismatch`` at request time, 423
``Nats-Wrong-Pin-Id`` with the pending headers after an UNPIN, the pin
released after ``priority_timeout``), UNPIN's answers and errors, the
PINNED/UNPINNED advisories, ConsumerInfo ``priority_groups``, and an
``overflow`` consumer's minimums.  Pin ids, NUIDs and times are masked; the
rest must be equal.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import nats
import pytest

from tests.support.aio import run
from tests.support.prio import Advisories, Puller, api, shape
from tests.support.servers import ServerProcess, reference_binary, start_server

pytestmark = pytest.mark.skipif(
    reference_binary() is None, reason="reference nats-server not installed"
)

TTL_NS = 1_000_000_000
EXPIRES_NS = 300_000_000
S = "$JS.API.CONSUMER.CREATE.S"

CONFIGS: list[dict[str, Any]] = [
    {"durable_name": "a", "priority_policy": "overflow", "priority_groups": ["A", "b-1"]},
    {"durable_name": "b", "priority_policy": "pinned_client", "priority_groups": ["A"]},
    {"durable_name": "c", "priority_policy": "prioritized", "priority_groups": ["A"]},
    {"durable_name": "d", "priority_policy": "overflow"},
    {"durable_name": "e", "priority_groups": ["A"]},
    {"durable_name": "f", "priority_policy": "overflow", "priority_groups": [""]},
    {"durable_name": "g", "priority_policy": "overflow", "priority_groups": ["A\n"]},
    {"durable_name": "h", "priority_policy": "overflow", "priority_groups": ["x" * 17]},
    {"durable_name": "i", "priority_timeout": 5_000_000_000},
    {
        "durable_name": "j",
        "priority_policy": "overflow",
        "priority_timeout": 5,
        "priority_groups": ["A"],
    },
    {
        "durable_name": "k",
        "priority_policy": "pinned_client",
        "priority_groups": ["A"],
        "deliver_subject": "d.x",
    },
    {"durable_name": "l", "priority_policy": "often", "priority_groups": ["A"]},
    {
        "durable_name": "m",
        "priority_policy": "pinned_client",
        "priority_groups": ["A"],
        "priority_timeout": -1,
    },
]


def _config_outcome(doc: dict[str, Any]) -> Any:
    if "error" in doc:
        return doc["error"]
    cfg = doc["config"]
    keys = ("priority_groups", "priority_policy", "priority_timeout")
    return {k: cfg.get(k) for k in keys}, doc.get("priority_groups")


async def session(port: int) -> dict[str, Any]:
    nc = await nats.connect(f"nats://127.0.0.1:{port}")
    adv = Advisories()
    await adv.start(nc)
    seen: dict[str, Any] = {}
    pins: dict[str, str] = {}
    try:
        await api(nc, "$JS.API.STREAM.CREATE.S", {"name": "S", "subjects": ["s.>"]})
        for i in range(8):
            await nc.request(f"s.{i}", b"m%d" % i, timeout=2)
        seen["configs"] = [
            _config_outcome(
                await api(nc, f"{S}.{cfg['durable_name']}", {"stream_name": "S", "config": cfg})
            )
            for cfg in CONFIGS
        ]

        # -- pinned_client ----------------------------------------------------------
        cfg = {
            "durable_name": "P",
            "ack_policy": "explicit",
            "priority_policy": "pinned_client",
            "priority_groups": ["A"],
            "priority_timeout": TTL_NS,
        }
        await api(nc, f"{S}.P", {"stream_name": "S", "config": cfg})
        p = Puller(nc, "S", "P")
        req = {"batch": 1, "expires": EXPIRES_NS, "group": "A"}
        first = await p.pull(req)
        pin = first[0].headers["Nats-Pin-Id"]
        assert len(pin) == 22
        seen["pinned_first"] = shape(first, pins)
        seen["bad_group"] = shape(await p.pull({**req, "group": "Z"}), pins)
        seen["no_group"] = shape(await p.pull({"batch": 1, "expires": EXPIRES_NS}), pins)
        seen["wrong_id"] = shape(await p.pull({**req, "id": "bogus"}), pins)
        seen["no_id_waits"] = shape(await p.pull(req), pins)
        seen["right_id"] = shape(await p.pull({**req, "id": pin, "batch": 2}, want=2), pins)
        info = await api(nc, "$JS.API.CONSUMER.INFO.S.P")
        seen["info_pinned"] = [
            {k: (pins.get(v, v) if k == "pinned_client_id" else k) for k, v in g.items()}
            for g in info["priority_groups"]
        ]
        assert info["priority_groups"][0]["pinned_ts"] != "0001-01-01T00:00:00Z"
        seen["unpin_errors"] = [
            await api(nc, "$JS.API.CONSUMER.UNPIN.S.P", body)
            for body in ({"group": "Z"}, {}, b"", b"[1]", {"group": "bad group"}, {"group": 5})
        ] + [
            await api(nc, "$JS.API.CONSUMER.UNPIN.S.NOPE", {"group": "A"}),
            await api(nc, "$JS.API.CONSUMER.UNPIN.T.NOPE", {"group": "A"}),
        ]
        lvl = await nc.request(
            "$JS.API.CONSUMER.UNPIN.S.P",
            b"garbage",
            headers={"Nats-Required-Api-Level": "99"},
            timeout=2,
        )
        seen["unpin_level"] = json.loads(lvl.data)
        seen["unpin"] = await api(nc, "$JS.API.CONSUMER.UNPIN.S.P", b'{"Group":"A","x":1}')
        seen["info_unpinned"] = (await api(nc, "$JS.API.CONSUMER.INFO.S.P"))["priority_groups"]
        seen["old_id"] = shape(await p.pull({**req, "id": pin}), pins)
        again = await p.pull(req)
        seen["new_pin"] = shape(again, pins)
        await adv.wait_for(lambda d: d.get("reason") == "timeout", 10 * TTL_NS / 1e9)
        seen["info_after_ttl"] = (await api(nc, "$JS.API.CONSUMER.INFO.S.P"))["priority_groups"]
        big = await p.pull({**req, "max_bytes": 1})
        seen["pinned_too_big"] = shape(big, pins)
        info = await api(nc, "$JS.API.CONSUMER.INFO.S.P")
        seen["info_after_too_big"] = [
            {k: v for k, v in g.items() if k != "pinned_client_id"}
            | {"pinned": "pinned_client_id" in g}
            for g in info["priority_groups"]
        ]
        seen["advisories"] = [
            {
                k: (pins.get(v, "unseen") if k == "pinned_id" else v)
                for k, v in d.items()
                if k not in ("id", "timestamp")
            }
            for d in adv.docs
        ]

        # -- overflow -----------------------------------------------------------------
        cfg = {
            "durable_name": "O",
            "ack_policy": "explicit",
            "priority_policy": "overflow",
            "priority_groups": ["A"],
        }
        await api(nc, f"{S}.O", {"stream_name": "S", "config": cfg})
        o = Puller(nc, "S", "O")
        req = {"batch": 8, "expires": EXPIRES_NS, "group": "A"}
        seen["o_pin_id"] = shape(await o.pull({**req, "id": "x"}), pins)
        seen["o_min_high"] = shape(await o.pull({**req, "min_pending": 9}), pins)
        seen["o_min_6"] = shape(await o.pull({**req, "min_pending": 6}, want=8), pins)
        seen["o_min_ack"] = shape(await o.pull({**req, "min_ack_pending": 3}, want=8), pins)
        seen["o_plain"] = shape(await o.pull({**req, "min_ack_pending": 9}), pins)
        seen["o_info"] = (await api(nc, "$JS.API.CONSUMER.INFO.S.O"))["num_pending"]
        b = Puller(nc, "S", "b")
        seen["overflow_field_on_pinned"] = shape(await b.pull({**req, "min_pending": 1}), pins)
        seen["prio_range"] = shape(await Puller(nc, "S", "c").pull({**req, "priority": 10}), pins)
        seen["prioritized"] = await _prioritized(nc)
    finally:
        await nc.close()
    return seen


async def _num_waiting(nc: Any, consumer: str, n: int) -> None:
    """Until ``consumer`` has ``n`` waiting requests (bounded)."""
    for _ in range(100):
        if (await api(nc, f"$JS.API.CONSUMER.INFO.S.{consumer}"))["num_waiting"] == n:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{consumer}: never {n} waiting")


async def _prioritized(nc: Any) -> list[Any]:
    """Two waiting requests, priority 5 then 1: each message goes to the lower number first."""
    cfg = {
        "durable_name": "Q",
        "filter_subject": "s.q",
        "priority_policy": "prioritized",
        "priority_groups": ["A"],
    }
    await api(nc, f"{S}.Q", {"stream_name": "S", "config": cfg})
    q = Puller(nc, "S", "Q")
    req = {"batch": 1, "expires": 5_000_000_000, "group": "A"}
    five = asyncio.create_task(q.pull({**req, "priority": 5}))
    await _num_waiting(nc, "Q", 1)
    one = asyncio.create_task(q.pull({**req, "priority": 1}))
    await _num_waiting(nc, "Q", 2)
    await nc.request("s.q", b"first", timeout=2)
    got_one = await one
    await nc.request("s.q", b"second", timeout=2)
    got_five = await five
    return [shape(got_one, {}), shape(got_five, {})]


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, dict[str, Any]]]:
    out: dict[str, dict[str, Any]] = {}
    for kind in ("reference", "trijet"):
        srv: ServerProcess = start_server(kind, ["-js", "-sd", str(tmp_path_factory.mktemp(kind))])
        try:
            out[kind] = run(lambda srv=srv: session(srv.port), timeout=90)
        finally:
            srv.stop()
    yield out


@pytest.mark.parametrize(
    "key",
    [
        "configs",
        "pinned_first",
        "bad_group",
        "no_group",
        "wrong_id",
        "no_id_waits",
        "right_id",
        "info_pinned",
        "unpin_errors",
        "unpin",
        "unpin_level",
        "pinned_too_big",
        "info_after_too_big",
        "prioritized",
        "info_unpinned",
        "old_id",
        "new_pin",
        "info_after_ttl",
        "advisories",
        "o_pin_id",
        "o_min_high",
        "o_min_6",
        "o_min_ack",
        "o_plain",
        "o_info",
        "overflow_field_on_pinned",
        "prio_range",
    ],
)
def test_same_as_reference(outcomes: dict[str, dict[str, Any]], key: str) -> None:
    assert outcomes["trijet"][key] == outcomes["reference"][key]


def test_expected_shapes(outcomes: dict[str, dict[str, Any]]) -> None:
    """What the reference shows (so the comparison is not of two empty lists)."""
    ref = outcomes["reference"]
    assert ref["wrong_id"] == [("423", "Nats-Pin-Id mismatch", [])]
    assert ref["old_id"] == [
        (
            "423",
            "Nats-Wrong-Pin-Id",
            [("Nats-Pending-Bytes", "0"), ("Nats-Pending-Messages", "1")],
        )
    ]
    assert ref["pinned_first"][0][2] == [("Nats-Pin-Id", "pin1")]
    assert ref["new_pin"][0][2] == [("Nats-Pin-Id", "pin2")]
    assert [g[0] for g in ref["o_min_6"]] == ["msg", "msg", "msg", "408"]
    assert {d["type"].rsplit(".", 1)[1] for d in ref["advisories"]} == {
        "consumer_group_pinned",
        "consumer_group_unpinned",
    }
    assert ref["prioritized"] == [
        [("msg", "first", [])],
        [("msg", "second", [])],
    ]
    assert ref["pinned_too_big"][0][:2] == ("409", "Message Size Exceeds MaxBytes")
    assert ref["info_after_ttl"] == [{"group": "A", "pinned_ts": "0001-01-01T00:00:00Z"}]
