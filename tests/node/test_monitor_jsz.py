"""``/jsz`` documents from the pure data function, on a ``Server`` built but
not run (the fakes are in ``tests.support.monitor``)."""

from __future__ import annotations

from typing import Any

import pytest

from node.monitor import (
    MonitorError,
    Query,
    jsz,
)
from node.monitor.jsz import AccountView, JetStreamView, StreamView
from node.server import Server
from store.api import StreamState
from tests.support.monitor import T0


def test_jsz_disabled_shape(populated: Server) -> None:
    doc = jsz(populated, now=T0)
    assert list(doc) == [
        "memory", "storage", "reserved_memory", "reserved_storage", "accounts", "ha_assets",
        "api", "server_id", "now", "disabled", "config", "streams", "consumers", "messages",
        "bytes", "total",
    ]  # fmt: skip
    assert doc["disabled"] is True
    assert doc["config"] == {"max_memory": 0, "max_storage": 0}


def _stream_view(name: str, msgs: int, nbytes: int, **kw: Any) -> StreamView:
    state = StreamState(msgs=msgs, bytes=nbytes, first_seq=1, last_seq=msgs, num_subjects=1)
    return StreamView(
        name=name,
        created_ns=1_700_000_000_123_456_789,
        state=state,
        config=lambda: {"name": name, "subjects": [name.lower()]},
        cluster={"leader": "srv"},
        **kw,
    )


def _js_view() -> JetStreamView:
    consumer = {
        "stream_name": "B",
        "name": "c1",
        "created": "x",
        "config": {"ack_policy": "explicit"},
    }
    b = _stream_view("B", 3, 30, consumer_count=1, consumers=[consumer], raft_group="S-R3F-b")
    a = _stream_view("A", 1, 10, leader=False)
    return JetStreamView(
        memory=10,
        storage=30,
        reserved_memory=1000,
        api_total=7,
        api_errors=2,
        accounts=(
            AccountView("ZED", storage=30, api_total=5, api_errors=1, streams=(b,)),
            AccountView("$G", memory=10, api_total=2, api_errors=1, streams=(a,)),
        ),
    )


def test_jsz_enabled_uses_view(populated: Server) -> None:
    populated.cfg.jetstream.enabled = True
    doc = jsz(populated, now=T0)
    assert "disabled" not in doc and doc["streams"] == 0 and "store_dir" in doc["config"]
    assert (doc["accounts"], doc["total"]) == (1, 1)  # $G is JetStream-enabled
    populated.jetstream_view = _js_view  # type: ignore[attr-defined]
    doc = jsz(populated, now=T0)
    assert list(doc) == [
        "memory", "storage", "reserved_memory", "reserved_storage", "accounts", "ha_assets",
        "api", "server_id", "now", "config", "limits", "streams", "consumers", "messages",
        "bytes", "total",
    ]  # fmt: skip
    assert (doc["memory"], doc["reserved_memory"], doc["accounts"], doc["total"]) == (
        10,
        1000,
        2,
        2,
    )
    assert doc["api"] == {"level": 0, "total": 7, "errors": 2}
    assert (doc["streams"], doc["consumers"], doc["messages"], doc["bytes"]) == (2, 1, 4, 40)


def test_jsz_accounts_paging_and_acc(populated: Server) -> None:
    populated.cfg.jetstream.enabled = True
    populated.jetstream_view = _js_view  # type: ignore[attr-defined]

    def names(params: dict[str, str]) -> list[str]:
        doc = jsz(populated, Query(params), now=T0)
        return [a["name"] for a in doc.get("account_details", [])]

    assert names({}) == []
    assert names({"accounts": "true"}) == ["$G", "ZED"]  # sorted by name
    assert names({"accounts": "1", "offset": "1"}) == ["ZED"]
    assert names({"accounts": "1", "offset": "9"}) == []
    assert names({"accounts": "1", "limit": "1"}) == ["$G"]
    assert names({"accounts": "1", "limit": "-1"}) == ["ZED", "$G"]  # no paging, view order
    assert names({"acc": "ZED", "offset": "5"}) == ["ZED"]
    assert names({"acc": "NOPE", "streams": "1"}) == []  # streams imply accounts only without acc
    assert names({"streams": "1"}) == ["$G", "ZED"]
    detail = jsz(populated, Query({"accounts": "1"}), now=T0)["account_details"][0]
    assert detail == {
        "name": "$G", "id": "$G", "memory": 10, "storage": 0,
        "reserved_memory": 2**64 - 1, "reserved_storage": 2**64 - 1, "accounts": 0,
        "ha_assets": 0, "api": {"level": 0, "total": 2, "errors": 1},
    }  # fmt: skip


def test_jsz_stream_and_consumer_detail(populated: Server) -> None:
    populated.cfg.jetstream.enabled = True
    populated.jetstream_view = _js_view  # type: ignore[attr-defined]
    doc = jsz(populated, Query({"acc": "ZED", "streams": "1"}), now=T0)
    (sd,) = doc["account_details"][0]["stream_detail"]
    assert list(sd) == ["name", "created", "cluster", "state"]
    assert sd["created"] == "2023-11-14T22:13:20.123456789Z"
    assert sd["state"]["num_subjects"] == 1 and sd["state"]["consumer_count"] == 1
    doc = jsz(populated, Query({"acc": "ZED", "consumers": "1"}), now=T0)
    (sd,) = doc["account_details"][0]["stream_detail"]
    assert sd["consumer_detail"] == [{"stream_name": "B", "name": "c1", "created": "x"}]
    doc = jsz(
        populated, Query({"acc": "ZED", "consumers": "1", "config": "1", "raft": "1"}), now=T0
    )
    (sd,) = doc["account_details"][0]["stream_detail"]
    assert list(sd) == ["name", "created", "cluster", "config", "state", "consumer_detail",
                        "stream_raft_group"]  # fmt: skip
    assert sd["config"] == {"name": "B", "subjects": ["b"]}
    assert sd["consumer_detail"][0]["config"] == {"ack_policy": "explicit"}
    assert doc["streams_leader"] == 1 and "consumers_leader" not in doc
    # stream-leader-only drops streams another server leads
    populated.server_name = "other"
    doc = jsz(populated, Query({"streams": "1", "stream-leader-only": "1"}), now=T0)
    assert all("stream_detail" not in a for a in doc["account_details"])


def test_jsz_errors(populated: Server) -> None:
    with pytest.raises(MonitorError) as exc:
        jsz(populated, Query({"leader-only": "true"}), now=T0)  # JetStream off
    assert (exc.value.status, exc.value.text) == (400, "filtered response: not leader")
    populated.cfg.jetstream.enabled = True
    assert "account_details" not in jsz(populated, Query({"leader-only": "1"}), now=T0)
    with pytest.raises(MonitorError) as exc:
        jsz(populated, Query({"accounts": "x"}), now=T0)
    assert exc.value.text == (
        "Error decoding boolean for 'accounts': strconv.ParseBool: parsing \"x\": invalid syntax"
    )
