"""node.jetstream.noaccount: nats-server's answers in accounts without JetStream (pure table)."""

from __future__ import annotations

import json

from node.jetstream.noaccount import NO_RESPONDERS, UNPIN, not_enabled_answer, unpin_answer


def _doc(text: str | None) -> dict:
    assert text is not None
    return json.loads(text)


def test_normal_account_types_and_fields() -> None:
    doc = _doc(not_enabled_answer(("STREAM", "NAMES"), system=False, clustered=False))
    assert doc["type"].endswith("stream_names_response")
    assert doc["error"]["err_code"] == 10039 and doc["streams"] is None and doc["limit"] == 0
    doc = _doc(not_enabled_answer(("STREAM", "PURGE", "S"), system=False, clustered=False))
    assert doc["purged"] == 0
    assert not_enabled_answer(("STREAM", "INFO"), system=False, clustered=False) is None
    assert not_enabled_answer(("BOGUS",), system=False, clustered=False) is None
    assert (
        not_enabled_answer(("CONSUMER", "MSG", "NEXT", "S", "C"), system=False, clustered=False)
        == NO_RESPONDERS
    )
    assert (
        not_enabled_answer(("DIRECT", "GET", "S"), system=False, clustered=False) == NO_RESPONDERS
    )
    assert (
        not_enabled_answer(("CONSUMER", "UNPIN", "S", "C"), system=False, clustered=False) == UNPIN
    )


def test_clustering_checked_first_for_group_requests() -> None:
    op = ("STREAM", "LEADER", "STEPDOWN", "S")
    assert _doc(not_enabled_answer(op, system=False, clustered=False))["error"]["err_code"] == 10010
    assert _doc(not_enabled_answer(op, system=False, clustered=True))["error"]["err_code"] == 10059
    op = ("STREAM", "PEER", "REMOVE", "S")
    assert _doc(not_enabled_answer(op, system=False, clustered=True))["error"]["err_code"] == 10039


def test_system_account() -> None:
    doc = _doc(not_enabled_answer(("STREAM", "NAMES"), system=True, clustered=False))
    assert doc == {
        "type": "io.nats.jetstream.api.v1.system_response",
        "error": {
            "code": 503,
            "err_code": 10039,
            "description": "JetStream not enabled for account",
        },
    }
    assert _doc(not_enabled_answer(("INFO",), system=True, clustered=False))["type"].endswith(
        "account_info_response"
    )
    assert _doc(not_enabled_answer(("BOGUS",), system=True, clustered=False))["type"].endswith(
        "system_response"
    )
    for op in (("META", "LEADER", "STEPDOWN"), ("SERVER", "REMOVE")):
        assert not_enabled_answer(op, system=True, clustered=True) is None


def test_unpin_reads_the_body_first() -> None:
    assert "unexpected end of JSON input" in unpin_answer(b"")
    assert "consumer group not specified" in unpin_answer(b"{}")
    assert _doc(unpin_answer(b'{"group":"g"}'))["error"]["err_code"] == 10039


def test_cluster_differences() -> None:
    """Observed on a three-node nats-server 2.15.1 cluster."""
    unpin = ("CONSUMER", "UNPIN", "S", "C")
    assert (
        _doc(not_enabled_answer(unpin, system=False, clustered=True))["error"]["err_code"] == 10059
    )
    assert not_enabled_answer(("STREAM", "SNAPSHOT", "S"), system=False, clustered=True) is None
    assert (
        not_enabled_answer(("STREAM", "SNAPSHOT", "S"), system=False, clustered=False) is not None
    )


def test_account_purge_only_from_the_system_account() -> None:
    op = ("ACCOUNT", "PURGE", "B")
    doc = _doc(not_enabled_answer(op, system=True, clustered=False))
    assert doc == {"type": "io.nats.jetstream.api.v1.account_purge_response", "initiated": True}
    assert (
        not_enabled_answer(op, system=True, clustered=True) is None
    )  # the meta leader's (MetaOps)
    assert not_enabled_answer(("ACCOUNT", "PURGE"), system=True, clustered=False) is None
    assert not_enabled_answer(op, system=False, clustered=False) is None
