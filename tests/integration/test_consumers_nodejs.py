"""JetStream through nats.js (npm ``nats`` v2 under node), on nats-server and on trijet.

Each test runs one scenario of ``tests/js/consumers.mjs`` against a server of
each kind and makes the same assertions on both; the reference nats-server
defines what is right.  Covered: the JetStreamManager (streams, consumers,
stored messages, purge), ``js.publish`` with ``msgID`` dedupe and the
``expect`` options, pull consumers (``fetch``, ``next``, ``consume`` and every
ack kind, redelivery after nak and after ack_wait), ordered consumers
(including the client's recreation of a consumer deleted under it), legacy
push subscriptions (flow control, heartbeats, queue groups) and consumer
pause/resume.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support import ServerProcess, start_server
from tests.support.node_js import error_message, error_of, requires_node, run_scenario

pytestmark = requires_node


@pytest.fixture(scope="module", params=("reference", "trijet"))
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """One server of each kind for the whole module (every scenario uses its own streams)."""
    tmp = tmp_path_factory.mktemp(f"consumers-js-{request.param}")
    srv = start_server(request.param, ["-js", "-sd", str(tmp / "store")], workdir=tmp / "srv")
    yield srv
    srv.stop()


def scenario(server: ServerProcess, name: str) -> dict[str, Any]:
    return run_scenario("consumers.mjs", server.url, name)


def api_error(observed: Any) -> tuple[Any, ...]:
    """(status, err_code, description) of a recorded JetStream error."""
    err = error_of(observed)
    assert err is not None, f"expected an error, got {observed!r}"
    return (err.get("status"), err.get("err_code"), err.get("description"))


def state(messages: int, nbytes: int, first: int, last: int, deleted: int = 0) -> dict[str, int]:
    return {
        "messages": messages,
        "bytes": nbytes,
        "first_seq": first,
        "last_seq": last,
        "num_deleted": deleted,
    }


def counters(
    name: str,
    delivered: tuple[int, int],
    ack_floor: tuple[int, int],
    *,
    ack_pending: int = 0,
    redelivered: int = 0,
    pending: int = 0,
) -> dict[str, Any]:
    """ConsumerInfo counters: delivered and ack floor as (consumer seq, stream seq)."""
    return {
        "name": name,
        "delivered": delivered[0],
        "delivered_stream": delivered[1],
        "ack_floor": ack_floor[0],
        "ack_floor_stream": ack_floor[1],
        "num_ack_pending": ack_pending,
        "num_redelivered": redelivered,
        "num_waiting": 0,
        "num_pending": pending,
    }


def msg(
    subject: str, data: str, seq: int, dseq: int, pending: int, count: int = 1
) -> dict[str, Any]:
    return {
        "subject": subject,
        "data": data,
        "seq": seq,
        "dseq": dseq,
        "redeliveryCount": count,
        "pending": pending,
    }


def puback(seq: int, duplicate: bool = False) -> dict[str, Any]:
    return {"stream": "PUB", "seq": seq, "duplicate": duplicate}


NOT_FOUND_CONSUMER = (404, 10014, "consumer not found")
NOT_FOUND_STREAM = (404, 10059, "stream not found")


def test_manager_streams_consumers_and_stored_messages(server: ServerProcess) -> None:
    r = scenario(server, "manage")
    assert r["stream_add"] == {
        "name": "JSM",
        "subjects": ["jsm.a.*"],
        "retention": "limits",
        "max_consumers": -1,
        "max_msgs": -1,
        "max_bytes": -1,
        "max_age": 0,
        "max_msgs_per_subject": 10,
        "max_msg_size": -1,
        "discard": "old",
        "storage": "memory",
        "num_replicas": 1,
        "duplicate_window": 120_000_000_000,
        "compression": "none",
        "allow_direct": False,
        "mirror_direct": False,
        "sealed": False,
        "deny_delete": False,
        "deny_purge": False,
        "allow_rollup_hdrs": False,
        "consumer_limits": {},
        "allow_msg_ttl": False,
    }
    assert api_error(r["stream_add_again_different"]) == (
        400,
        10058,
        "stream name already in use with a different configuration",
    )
    assert r["stream_update"] == {"subjects": ["jsm.a.*", "jsm.b"], "description": "updated"}
    assert api_error(r["stream_update_storage"]) == (
        500,
        10052,
        "stream configuration update can not change storage type",
    )
    assert api_error(r["stream_info_missing"]) == NOT_FOUND_STREAM
    assert r["stream_info"] == state(5, 123, 1, 5)
    assert r["stream_names"] == ["JSM"]
    assert r["stream_list"] == [state(5, 123, 1, 5)]
    assert r["get_seq"] == {"subject": "jsm.a.x", "seq": 3, "data": "x2"}
    assert r["get_last_by_subj"] == {"subject": "jsm.a.y", "seq": 5, "data": "y2"}
    assert r["get_next_by_subj"] == {"subject": "jsm.a.x", "seq": 3, "data": "x2"}
    assert r["delete_msg"] is True
    assert api_error(r["delete_msg_again"]) == (400, 10043, "sequence 2 not found")
    assert api_error(r["get_deleted"]) == (404, 10037, "no message found")
    assert r["delete_msg_noerase"] is True
    assert r["after_delete"] == state(3, 75, 1, 5, deleted=2)

    assert r["consumer_add"] == {
        "durable_name": "dur",
        "name": "dur",
        "deliver_policy": "all",
        "ack_policy": "explicit",
        "ack_wait": 10_000_000_000,
        "max_deliver": 5,
        "filter_subject": "jsm.a.*",
        "replay_policy": "instant",
        "max_waiting": 512,
        "max_ack_pending": 1000,
        "num_replicas": 0,
    }
    assert r["consumer_add_same"] == "dur"
    assert api_error(r["consumer_add_conflict"]) == (400, 10148, "consumer already exists")
    assert r["consumer_add_named"] == "eph"
    assert r["consumer_info"] == counters("dur", (0, 0), (0, 0), pending=3)
    assert api_error(r["consumer_info_missing"]) == NOT_FOUND_CONSUMER
    assert api_error(r["consumer_info_no_stream"]) == NOT_FOUND_STREAM
    assert r["consumer_update"] == {
        "description": "changed",
        "max_deliver": 3,
        "ack_policy": "explicit",
    }
    assert api_error(r["consumer_update_missing"]) == NOT_FOUND_CONSUMER
    assert r["consumer_list"] == [
        {"name": "dur", "num_pending": 3},
        {"name": "eph", "num_pending": 1},
    ]
    assert r["consumer_delete"] is True
    assert api_error(r["consumer_delete_again"]) == NOT_FOUND_CONSUMER
    assert r["stream_consumers"] == 1

    assert r["purge_filter"] == 2  # x1 and x2
    assert r["purge_keep"] == 2  # y2, k1 purged; k2 kept
    assert r["after_purge"] == state(1, 25, 7, 7)
    assert r["purge_seq"] == 1  # z1 (seq 8) below seq 9 on jsm.a.z
    assert r["after_purge_seq"] == state(2, 50, 7, 9, deleted=1)
    assert r["purge_all"] == 2
    assert r["consumer_after_purge"] == counters("dur", (0, 9), (0, 9))
    assert r["stream_delete"] is True
    assert api_error(r["stream_delete_again"]) == NOT_FOUND_STREAM


def test_publish_dedupe_and_expectations(server: ServerProcess) -> None:
    r = scenario(server, "publish")
    assert r["first"] == puback(1)
    assert r["dup"] == puback(1, duplicate=True)
    assert r["second"] == puback(2)
    assert r["last_msgid_ok"] == puback(3)
    assert api_error(r["last_msgid_bad"]) == (400, 10070, "wrong last msg ID: id-3")
    assert r["last_seq_ok"] == puback(4)
    assert api_error(r["last_seq_bad"]) == (400, 10071, "wrong last sequence: 4")
    # the last message (seq 4) carried no Nats-Msg-Id
    assert api_error(r["last_msgid_none"]) == (400, 10070, "wrong last msg ID: ")
    assert r["stream_ok"] == puback(5)
    assert api_error(r["stream_bad"]) == (400, 10060, "expected stream does not match")
    assert r["subj_seq_ok"] == puback(6)
    assert api_error(r["subj_seq_bad"]) == (400, 10071, "wrong last sequence: 6")
    assert api_error(r["subj_seq_zero_bad"]) == (400, 10071, "wrong last sequence: 2")
    assert r["subj_seq_zero_ok"] == puback(7)
    # expectations are checked before the duplicate window
    assert api_error(r["dup_with_expect"]) == (400, 10071, "wrong last sequence: 7")
    no_stream = error_of(r["no_stream"])
    assert no_stream is not None and no_stream["code"] == "503"
    assert r["state"]["messages"] == 7
    assert (r["state"]["first_seq"], r["state"]["last_seq"]) == (1, 7)


def test_pull_fetch_next_and_consume_with_acks(server: ServerProcess) -> None:
    r = scenario(server, "pull")
    assert r["get_info"] == counters("p", (0, 0), (0, 0), pending=5)
    assert r["fetch3"] == {
        "msgs": [msg("pull.a", f"m{i}", i, i, 5 - i) for i in (1, 2, 3)],
        "ended": True,
    }
    # asks for ten, gets the two left and ends when the request expires
    assert r["fetch_rest"] == {
        "msgs": [msg("pull.a", f"m{i}", i, i, 5 - i) for i in (4, 5)],
        "ended": True,
    }
    assert r["next_empty"] is None
    assert r["info_after_fetch"] == counters("p", (5, 5), (5, 5))
    assert r["next"] == msg("pull.b", "n1", 6, 6, 0)
    # c1 ackAck, c2 nak(300 ms) then redelivered and ackAck'ed, c3 working+ack, c4 term
    assert r["consume_acks"] == {
        "msgs": [
            msg("pull.c", "c1", 7, 7, 3),
            msg("pull.c", "c2", 8, 8, 2),
            msg("pull.c", "c3", 9, 9, 1),
            msg("pull.c", "c4", 10, 10, 0),
            msg("pull.c", "c2", 8, 11, 0, count=2),
        ],
        "acks": {"ackAck": True, "redelivered": True},
    }
    assert r["info_after_consume"] == counters("p", (11, 10), (11, 10))
    # the client does not ack twice
    assert r["ackAck_twice"] == [True, False]
    assert r["consume_stop"] == {"got": ["e1", "e2", "e3"], "ended": True, "closed": None}
    # nak: at once; second delivery left unacked: again after ack_wait (1 s)
    assert r["redeliveries"] == [msg("pull.f", "f1", 15, n, 0, count=n) for n in (1, 2, 3)]
    assert r["short_info"] == counters("short", (3, 15), (3, 15))
    assert api_error(r["missing_consumer"]) == NOT_FOUND_CONSUMER
    assert api_error(r["missing_stream"]) == NOT_FOUND_STREAM


def test_ordered_consumer_recreated_after_server_side_delete(server: ServerProcess) -> None:
    r = scenario(server, "ordered")
    assert r["first"] == [[i, f"a{i}", i] for i in range(1, 6)]
    assert r["info"] == {
        "ack_policy": "none",
        "deliver_policy": "by_start_sequence",
        "mem_storage": True,
        "max_deliver": 1,
        "num_replicas": 1,
        "durable": None,
    }
    assert r["delete_server_side"] is True
    # the client made a new consumer starting after the last stream sequence it saw:
    # every message once, in order, delivery sequences restarting at 1
    assert r["after_delete"] == [[5 + i, f"b{i}", i] for i in range(1, 5)]
    assert r["recreated"] is True
    assert r["new_name"] is True
    assert r["consumer_count"] == 1
    assert r["more"] == [[10, "c1"], [11, "c2"]]
    assert r["fetch1"] == [[6, "b1"], [7, "b2"], [8, "b3"]]
    assert r["fetch2"] == [[9, "b4"]]
    assert r["fetch_filter"] == "ord.b"
    assert r["next1"] == [9, "b4"]
    assert r["next2"] == [10, "c1"]
    assert api_error(r["ordered_missing_stream"]) == NOT_FOUND_STREAM


def test_push_subscriptions(server: ServerProcess) -> None:
    r = scenario(server, "push")
    assert r["subscribe"] == "<JetStreamSubscriptionImpl>"
    assert r["initial"] == [msg("push.a", f"p{i}", i, i, 4 - i) for i in range(1, 5)]
    assert r["config"] == {
        "durable_name": "pushd",
        "ack_policy": "explicit",
        "flow_control": True,
        "idle_heartbeat": 500_000_000,
        "filter_subject": "push.a",
        "push_bound": True,
        "deliver_subject_set": True,
    }
    assert r["live"] == [msg("push.a", "q1", 5, 5, 0), msg("push.a", "q2", 6, 6, 0)]
    assert r["info"] == counters("pushd", (6, 6), (6, 6))
    # the client refuses a second subscription when the consumer info says push_bound
    assert error_message(r["already_bound"]) == "duplicate subscription"
    assert (r["queue_sub1"], r["queue_sub2"]) == ("<JetStreamSubscriptionImpl>",) * 2
    assert r["queue"] == {"count": 20, "distinct": 20, "both": True}
    assert r["queue_config"] == {"deliver_group": "workers", "settled": True, "delivered": 20}
    assert error_message(r["queue_wrong_group"]) == "durable requires queue group 'workers'"
    assert r["ephemeral"] == [1, 2, 3, 4]


def test_pause_and_resume(server: ServerProcess) -> None:
    r = scenario(server, "pause")
    assert r["pause"] == {"paused": True, "pause_until": True, "remaining": True}
    assert r["info_paused"] == {"paused": True, "remaining": True, "config_pause_until": True}
    assert r["fetch_paused"] == 0
    assert r["info_still_paused"] == {"paused": True, "delivered": 0, "num_pending": 3}
    assert r["waiting"] is True  # the pull request waits while the consumer is paused
    assert r["resume"]["paused"] is False
    # the waiting pull is served once the consumer resumes
    assert r["after_resume"] == [[1, "x1"], [2, "x2"], [3, "x3"]]
    assert (r["info_resumed"]["paused"], r["info_resumed"]["pause_remaining"]) == (False, None)
    assert r["pause_past"] == {"paused": False}
    # Go clients resume with Go's zero time: no pause_until left in the config
    assert r["pause_go_zero"] == {
        "paused": False,
        "pause_until": "0001-01-01T00:00:00Z",
        "info_paused": False,
        "config": None,
    }
    assert api_error(r["pause_missing"]) == NOT_FOUND_CONSUMER
    assert r["create_paused"] == {"paused": True, "pause_until": True}
    # the waiting pull was held until pause_until passed
    assert r["auto_resume"] == {"seq": 1, "held": True}
    assert r["info_auto_resumed"] is False
    # nats.js resumes with pause_until = the Unix epoch (1970-01-01T00:00:00.000Z):
    # nats-server answers and stores that time; it is not Go's zero time
    epoch = "1970-01-01T00:00:00Z"
    if server.kind == "trijet" and r["resume"]["pause_until"] != epoch:
        pytest.xfail(
            "trijet conflates the epoch with Go's zero time in PAUSE (consumers_api.pause keeps "
            "Unix ns, 0 = unset): answers pause_until 0001-01-01T00:00:00Z and drops "
            "config.pause_until; nats-server answers and stores 1970-01-01T00:00:00Z"
        )
    assert r["resume"]["pause_until"] == epoch
    assert r["info_resumed"]["pause_until"] == epoch
