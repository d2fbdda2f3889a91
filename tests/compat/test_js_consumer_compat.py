"""Differential: CONSUMER.CREATE against the reference nats-server.

One reference server (``-js``, temp store dir) runs for the module; each
case creates its stream, optional earlier consumers, then sends the case's
request; streams are deleted after each case.  trijet's pure create path
(``parse_create`` + ``decide_create``) must produce:

* on success: the same ``config`` object, compared as Go-encoded text (key
  order, omitted fields, ``\\u003e`` escaping) as stored: the reference's
  dynamic ``_nats.ver``/``_nats.level`` removed, ``_nats.req.level``
  compared; and the same consumer name unless the reference generated one.
* on failure: the same ``error`` object (``code``, ``err_code``,
  ``description``).

These cases check the pure decision (``decide_create``); priority-group
creates through the servers are compared in ``test_js_priority_compat``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import nats.errors
import pytest

from cluster.consumer_model import ConsumerConfig
from node.jsapi.consumerconfig import decide_create, parse_create
from node.jsapi.errors import STREAM_NOT_FOUND, JSApiError, go_json
from node.jsapi.streamconfig import parse_create as parse_stream
from tests.support.aio import run
from tests.support.servers import ServerProcess, reference_binary, start_server

pytestmark = pytest.mark.skipif(
    reference_binary() is None, reason="reference nats-server not installed"
)

REQUEST_TIMEOUT_S = 2.0
STREAM = '{"name":"S","subjects":["s.>"]}'
WQ = '{"name":"S","subjects":["s.>"],"retention":"workqueue"}'
LIMITED = '{"name":"S","subjects":["s.>"],"max_consumers":1,"consumer_limits":{"max_ack_pending":50,"inactive_threshold":60000000000}}'

C = "$JS.API.CONSUMER.CREATE.S"
D = "$JS.API.CONSUMER.DURABLE.CREATE.S"


def body(cfg: str, *, stream: str = "S", extra: str = "") -> str:
    return '{"stream_name":"' + stream + '","config":' + cfg + extra + "}"


# (id, stream body, [(subject, body) earlier consumers], subject, body)
CASES: list[tuple[str, str, list[tuple[str, str]], str, str]] = [
    ("ephemeral_defaults", STREAM, [], C, body("{}")),
    ("ephemeral_named_legacy", STREAM, [], C, body('{"name":"e1"}')),
    ("ephemeral_durable_set", STREAM, [], C, body('{"durable_name":"d"}')),
    ("named", STREAM, [], C + ".n1", body('{"ack_policy":"explicit"}')),
    ("named_body_other", STREAM, [], C + ".n1", body('{"name":"other"}')),
    ("named_durable_mismatch", STREAM, [], C + ".n1", body('{"durable_name":"d"}')),
    ("named_durable", STREAM, [], C + ".d1", body('{"durable_name":"d1","ack_policy":"all"}')),
    ("durable_legacy", STREAM, [], D + ".d1", body('{"durable_name":"d1"}')),
    ("durable_legacy_unset", STREAM, [], D + ".d1", body("{}")),
    ("durable_legacy_mismatch", STREAM, [], D + ".d1", body('{"durable_name":"d2"}')),
    ("filtered_subject", STREAM, [], C + ".f.s.a", body('{"filter_subject":"s.a"}')),
    ("filtered_mismatch", STREAM, [], C + ".f.s.a", body('{"filter_subject":"s.b"}')),
    ("filtered_missing", STREAM, [], C + ".f.s.a", body("{}")),
    ("filtered_multi", STREAM, [], C + ".f.s.a", body('{"filter_subjects":["s.a","s.b"]}')),
    ("stream_mismatch", STREAM, [], C + ".n", body("{}", stream="T")),
    ("empty_body", STREAM, [], C + ".n", ""),
    ("bad_json", STREAM, [], C + ".n", '{"stream_name":'),
    ("unknown_field", STREAM, [], C + ".n", body('{"bogus":1}')),
    ("wrong_type", STREAM, [], C + ".n", body('{"max_deliver":"x"}')),
    ("bad_ack_policy", STREAM, [], C + ".n", body('{"ack_policy":"sometimes"}')),
    ("bad_deliver_policy", STREAM, [], C + ".n", body('{"deliver_policy":"first"}')),
    ("undefined_deliver", STREAM, [], C + ".n", body('{"deliver_policy":"undefined"}')),
    ("bad_action", STREAM, [], C + ".n", body("{}", extra=',"action":"bogus"')),
    ("unknown_stream", STREAM, [], "$JS.API.CONSUMER.CREATE.X.n", body("{}", stream="X")),
    ("path_sep", STREAM, [], C + ".a\\b", body("{}")),
    ("r3", STREAM, [], C + ".n", body('{"num_replicas":3}')),
    ("replicas_negative", STREAM, [], C + ".n", body('{"num_replicas":-1}')),
    ("ack_wait_negative", STREAM, [], C + ".n", body('{"ack_policy":"explicit","ack_wait":-1}')),
    (
        "backoff",
        STREAM,
        [],
        C + ".n",
        body('{"ack_policy":"explicit","backoff":[1000000000,3000000000],"max_deliver":4}'),
    ),
    ("backoff_negative", STREAM, [], C + ".n", body('{"ack_policy":"explicit","backoff":[-1]}')),
    (
        "backoff_too_long",
        STREAM,
        [],
        C + ".n",
        body('{"ack_policy":"explicit","backoff":[1,2,3],"max_deliver":2}'),
    ),
    (
        "backoff_eq_max",
        STREAM,
        [],
        C + ".n",
        body('{"ack_policy":"explicit","backoff":[1,2],"max_deliver":2}'),
    ),
    ("max_deliver_neg", STREAM, [], C + ".n", body('{"max_deliver":-5}')),
    (
        "negatives",
        STREAM,
        [],
        C + ".n",
        body(
            '{"max_waiting":-3,"max_ack_pending":-9,"max_batch":-1,"max_expires":-1,"max_bytes":-1,"inactive_threshold":-1}'
        ),
    ),
    ("pedantic_neg", STREAM, [], C + ".n", body('{"max_deliver":-5}', extra=',"pedantic":true')),
    ("ack_none_map", STREAM, [], C + ".n", body('{"ack_policy":"none","max_ack_pending":7}')),
    (
        "push",
        STREAM,
        [],
        C + ".p",
        body(
            '{"deliver_subject":"dl.x","ack_policy":"explicit","idle_heartbeat":5000000000,"flow_control":true}'
        ),
    ),
    ("push_wildcard", STREAM, [], C + ".p", body('{"deliver_subject":"dl.*"}')),
    ("push_cycle", STREAM, [], C + ".p", body('{"deliver_subject":"s.x"}')),
    ("push_max_waiting", STREAM, [], C + ".p", body('{"deliver_subject":"dl.x","max_waiting":5}')),
    (
        "push_map_ack_none",
        STREAM,
        [],
        C + ".p",
        body('{"deliver_subject":"dl.x","max_ack_pending":5}'),
    ),
    (
        "push_small_hb",
        STREAM,
        [],
        C + ".p",
        body('{"deliver_subject":"dl.x","idle_heartbeat":50000000}'),
    ),
    ("push_fc_no_hb", STREAM, [], C + ".p", body('{"deliver_subject":"dl.x","flow_control":true}')),
    ("pull_rate", STREAM, [], C + ".n", body('{"rate_limit_bps":100}')),
    ("pull_hb", STREAM, [], C + ".n", body('{"idle_heartbeat":1000000000}')),
    ("pull_fc", STREAM, [], C + ".n", body('{"flow_control":true}')),
    ("pull_expires_small", STREAM, [], C + ".n", body('{"max_expires":10}')),
    (
        "pull_limits",
        STREAM,
        [],
        C + ".n",
        body('{"max_batch":5,"max_expires":4000000000,"max_bytes":1000,"max_waiting":3}'),
    ),
    (
        "filter_and_filters",
        STREAM,
        [],
        C + ".n",
        body('{"filter_subject":"s.a","filter_subjects":["s.b"]}'),
    ),
    ("filter_bad", STREAM, [], C + ".n", body('{"filter_subject":"s..a"}')),
    ("filters_empty_elem", STREAM, [], C + ".n", body('{"filter_subjects":[""]}')),
    ("filters_overlap", STREAM, [], C + ".n", body('{"filter_subjects":["s.*","s.a"]}')),
    ("filters_ok", STREAM, [], C + ".n", body('{"filter_subjects":["s.b","s.a"]}')),
    ("filter_outside", STREAM, [], C + ".n", body('{"filter_subject":"x.y"}')),
    ("by_seq_missing", STREAM, [], C + ".n", body('{"deliver_policy":"by_start_sequence"}')),
    (
        "by_seq",
        STREAM,
        [],
        C + ".n",
        body('{"deliver_policy":"by_start_sequence","opt_start_seq":4}'),
    ),
    ("all_with_seq", STREAM, [], C + ".n", body('{"opt_start_seq":4}')),
    (
        "last_with_time",
        STREAM,
        [],
        C + ".n",
        body('{"deliver_policy":"last","opt_start_time":"2024-01-02T03:04:05Z"}'),
    ),
    (
        "by_time",
        STREAM,
        [],
        C + ".n",
        body('{"deliver_policy":"by_start_time","opt_start_time":"2024-01-02T03:04:05.500+00:00"}'),
    ),
    ("by_time_missing", STREAM, [], C + ".n", body('{"deliver_policy":"by_start_time"}')),
    (
        "by_time_bad",
        STREAM,
        [],
        C + ".n",
        body('{"deliver_policy":"by_start_time","opt_start_time":"yesterday"}'),
    ),
    ("lps_no_filter", STREAM, [], C + ".n", body('{"deliver_policy":"last_per_subject"}')),
    (
        "lps",
        STREAM,
        [],
        C + ".n",
        body('{"deliver_policy":"last_per_subject","filter_subject":"s.>"}'),
    ),
    ("new", STREAM, [], C + ".n", body('{"deliver_policy":"new","replay_policy":"original"}')),
    ("sample", STREAM, [], C + ".n", body('{"sample_freq":"50%"}')),
    ("sample_bad", STREAM, [], C + ".n", body('{"sample_freq":"lots"}')),
    (
        "description_meta",
        STREAM,
        [],
        C + ".n",
        body('{"description":"d <x>","metadata":{"b":"1","a":"2"}}'),
    ),
    ("name_dot", STREAM, [], C, body('{"name":"a.b"}')),
    ("durable_dot", STREAM, [], C + ".a", body('{"durable_name":"a.b"}')),
    ("durable_name_mismatch", STREAM, [], D + ".d", body('{"durable_name":"d","name":"e"}')),
    ("priority_no_groups", STREAM, [], C + ".n", body('{"priority_policy":"overflow"}')),
    ("priority_groups_none", STREAM, [], C + ".n", body('{"priority_groups":["A"]}')),
    (
        "priority_pinned",
        STREAM,
        [],
        C + ".n",
        body('{"priority_policy":"pinned_client","priority_groups":["A"]}'),
    ),
    (
        "priority_bad_group",
        STREAM,
        [],
        C + ".n",
        body('{"priority_policy":"overflow","priority_groups":["bad group!"]}'),
    ),
    ("priority_bad_policy", STREAM, [], C + ".n", body('{"priority_policy":"sometimes"}')),
    ("headers_only_mem", STREAM, [], C + ".n", body('{"headers_only":true,"mem_storage":true}')),
    ("limits_defaults", LIMITED, [], C + ".n", body('{"ack_policy":"explicit"}')),
    (
        "limits_map_excess",
        LIMITED,
        [],
        C + ".n",
        body('{"ack_policy":"explicit","max_ack_pending":100}'),
    ),
    ("limits_inactive_excess", LIMITED, [], C + ".n", body('{"inactive_threshold":120000000000}')),
    ("max_consumers", LIMITED, [(C + ".a", body("{}"))], C + ".n", body("{}")),
    ("wq_ack_none", WQ, [], C + ".n", body("{}")),
    ("wq_ack_all", WQ, [], C + ".n", body('{"ack_policy":"all"}')),
    (
        "wq_deliver_last",
        WQ,
        [],
        C + ".n",
        body('{"ack_policy":"explicit","deliver_policy":"last"}'),
    ),
    ("wq_ok", WQ, [], C + ".n", body('{"ack_policy":"explicit"}')),
    (
        "wq_second_unfiltered",
        WQ,
        [(C + ".a", body('{"ack_policy":"explicit"}'))],
        C + ".n",
        body('{"ack_policy":"explicit"}'),
    ),
    (
        "wq_overlap",
        WQ,
        [(C + ".a", body('{"ack_policy":"explicit","filter_subject":"s.a"}'))],
        C + ".n",
        body('{"ack_policy":"explicit","filter_subject":"s.*"}'),
    ),
    (
        "wq_disjoint",
        WQ,
        [(C + ".a", body('{"ack_policy":"explicit","filter_subject":"s.a"}'))],
        C + ".n",
        body('{"ack_policy":"explicit","filter_subject":"s.b"}'),
    ),
    (
        "update_same",
        STREAM,
        [(C + ".n", body('{"ack_policy":"explicit"}'))],
        C + ".n",
        body('{"ack_policy":"explicit"}'),
    ),
    (
        "update_map",
        STREAM,
        [(C + ".n", body('{"ack_policy":"explicit"}'))],
        C + ".n",
        body('{"ack_policy":"explicit","max_ack_pending":10,"description":"x"}'),
    ),
    (
        "update_ack_policy",
        STREAM,
        [(C + ".n", body('{"ack_policy":"explicit"}'))],
        C + ".n",
        body('{"ack_policy":"all"}'),
    ),
    (
        "update_deliver",
        STREAM,
        [(C + ".n", body("{}"))],
        C + ".n",
        body('{"deliver_policy":"new"}'),
    ),
    (
        "update_to_push",
        STREAM,
        [(C + ".n", body("{}"))],
        C + ".n",
        body('{"deliver_subject":"dl.y"}'),
    ),
    ("update_max_waiting", STREAM, [(C + ".n", body("{}"))], C + ".n", body('{"max_waiting":5}')),
    (
        "update_filter",
        STREAM,
        [(C + ".n", body('{"filter_subject":"s.a"}'))],
        C + ".n",
        body('{"filter_subject":"s.b"}'),
    ),
    (
        "action_create_same",
        STREAM,
        [(C + ".d", body('{"durable_name":"d"}'))],
        C + ".d",
        body('{"durable_name":"d"}', extra=',"action":"create"'),
    ),
    (
        "action_create_diff",
        STREAM,
        [(C + ".d", body('{"durable_name":"d"}'))],
        C + ".d",
        body('{"durable_name":"d","description":"x"}', extra=',"action":"create"'),
    ),
    (
        "action_create_ephemeral_same",
        STREAM,
        [(C + ".n", body("{}"))],
        C + ".n",
        body("{}", extra=',"action":"create"'),
    ),
    ("action_update_missing", STREAM, [], C + ".n", body("{}", extra=',"action":"update"')),
    (
        "action_update_ok",
        STREAM,
        [(C + ".n", body("{}"))],
        C + ".n",
        body('{"description":"y"}', extra=',"action":"update"'),
    ),
]

STORE_RACE_RETRIES = 20


async def _collect(url: str) -> dict[str, Any]:
    nc = await nats.connect(url)
    out: dict[str, Any] = {}

    async def req(subject: str, data: str) -> dict[str, Any]:
        for _attempt in range(STORE_RACE_RETRIES):
            try:
                msg = await nc.request(subject, data.encode(), timeout=REQUEST_TIMEOUT_S)
            except nats.errors.TimeoutError:
                return {"timeout": subject}
            resp = dict(json.loads(msg.data))
            if resp.get("error", {}).get("err_code") != 10049:
                return resp
            await asyncio.sleep(0.05)
        return resp

    try:
        for cid, sbody, earlier, subject, data in CASES:
            r = await req("$JS.API.STREAM.CREATE.S", sbody)
            assert "error" not in r, r
            for esubj, ebody in earlier:
                r = await req(esubj, ebody)
                assert "error" not in r, (cid, r)
            out[cid] = await req(subject, data)
            await req("$JS.API.STREAM.DELETE.S", "")
    finally:
        await nc.close()
    return out


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    wd: Path = tmp_path_factory.mktemp("ref-jsc")
    server: ServerProcess = start_server("reference", ["-js", "-sd", str(wd / "store")], workdir=wd)
    try:
        yield run(lambda: _collect(server.url), timeout=120)
    finally:
        server.stop()


def _op(subject: str) -> tuple[str, ...]:
    return tuple(subject.split(".")[2:])


def _ours(
    sbody: str, earlier: list[tuple[str, str]], subject: str, data: str
) -> tuple[str, ConsumerConfig]:
    stream = parse_stream("S", sbody.encode())
    existing: dict[str, ConsumerConfig] = {}
    counter = iter(range(1_000_000))

    def new_name() -> str:
        return f"gen{next(counter)}"

    for esubj, ebody in earlier:
        name, cfg, _ = decide_create(
            parse_create(_op(esubj), ebody.encode()), stream, existing, new_name=new_name
        )
        existing[name] = cfg
    req = parse_create(_op(subject), data.encode())
    if req.stream != "S":
        raise JSApiError(STREAM_NOT_FOUND)
    name, cfg, _ = decide_create(req, stream, existing, new_name=new_name)
    return name, cfg


def _ref_config(cfg: dict[str, Any]) -> str:
    cfg = dict(cfg)
    # the stored config: the answer's dynamic _nats.ver/_nats.level (the servers'
    # own version and level) dropped; _nats.req.level is compared
    dynamic = ("_nats.ver", "_nats.level")
    meta = {k: v for k, v in (cfg.get("metadata") or {}).items() if k not in dynamic}
    if meta:
        cfg["metadata"] = dict(sorted(meta.items()))
    else:
        cfg.pop("metadata", None)
    return go_json(cfg)


@pytest.mark.parametrize(
    ("cid", "sbody", "earlier", "subject", "data"), CASES, ids=[c[0] for c in CASES]
)
def test_create(
    reference: dict[str, Any],
    cid: str,
    sbody: str,
    earlier: list[tuple[str, str]],
    subject: str,
    data: str,
) -> None:
    ref = reference[cid]
    assert ref.get("type") == "io.nats.jetstream.api.v1.consumer_create_response", ref
    try:
        ours: tuple[str, ConsumerConfig] | JSApiError = _ours(sbody, earlier, subject, data)
    except JSApiError as exc:
        ours = exc
    if "error" in ref:
        assert isinstance(ours, JSApiError), (
            f"reference failed with {ref['error']}, trijet accepted {ours}"
        )
        assert ours.to_dict() == ref["error"]
        return
    assert not isinstance(ours, JSApiError), f"reference accepted, trijet failed: {ours!r}"
    name, cfg = ours
    assert go_json(cfg.to_dict()) == _ref_config(ref["config"])
    if not name.startswith("gen"):
        assert name == ref["name"]


def test_reference_ran_every_case(reference: dict[str, Any]) -> None:
    assert len(reference) == len(CASES)
