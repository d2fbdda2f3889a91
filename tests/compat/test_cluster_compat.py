"""Differential: stream management in a three-node cluster, reference vs trijet.

Theory of operation: one three-node reference cluster and one three-node
trijet cluster (``tests.support.cluster``, both with ``REFERENCE_TAGS`` and
the same conf files) run for the whole module.  Each test sends the same
requests, in the same order and to the same node index (n1, n2 or n3), to
both clusters over raw protocol clients (``tests.support.jsdiff.JsClient``)
and compares the answers as text after ``jsdiff``'s normalisation (times,
``created``, ``leader`` names, server version metadata; account info's API
counters, which are compared as deltas on their own) — key order, the
``cluster`` block, ``did_create`` present or absent, error codes and texts are
compared as sent.  Every request must get **exactly one** reply in each
cluster: after the first, the client keeps reading its reply subject for
``EXTRA_REPLY_WINDOW_S`` (an absence cannot be awaited as an event).

Where the clusters choose differently by design, only what is deterministic
is compared: the reference places an R1 stream without constraints on n1
every time (observed), trijet on the least loaded server with a seeded
tie-break, so the unconstrained ``leader`` is masked; placement by tag is
compared including the leader.  Streams get distinct names per test (the
reference removes a deleted stream's directory asynchronously), and every
stream is deleted in both clusters after each test.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import nats
import pytest

from tests.support.aio import noop_cb, run
from tests.support.cluster import REFERENCE_TAGS, Cluster, get_json, start_cluster
from tests.support.jsdiff import Frame, JsClient, Req, render
from tests.support.servers import reference_binary

pytestmark = pytest.mark.skipif(
    reference_binary() is None, reason="reference nats-server not installed"
)

#: how long extra replies are read for once the first one arrived
EXTRA_REPLY_WINDOW_S = 0.4
#: once the window is over, how long a read waits for bytes already on their way
BUFFERED_READ_S = 0.02
NODES = 3
#: how long a fetch waits while the consumer's followers are stopped
FOLLOWERS_STOPPED_FETCH_S = 4.0
TURNS_WAIT_S = 10.0
POLL_S = 0.05


_API_COUNTS = re.compile(r'("api":\{"level":[^,]*,)"total":\d+,"errors":\d+')


def _masked(text: str) -> str:
    """Account info's API counters masked (compared by delta where it matters)."""
    return _API_COUNTS.sub(r'\1"total":<n>,"errors":<n>', text)


@dataclass
class Side:
    """One cluster and a raw client on each of its nodes."""

    cluster: Cluster
    clients: list[JsClient]

    def send(self, node: int, req: Req) -> tuple[list[Frame], str]:
        """Send ``req`` on node ``node`` (0-based); its first reply and its reply subject."""
        c = self.clients[node]
        first = c.request(req)
        return first, f"{c.inbox}.{c.n}"

    def rest(self, node: int, reply: str, deadline: float) -> list[Frame]:
        """Further replies to ``reply`` arriving until ``deadline`` (or already buffered)."""
        c = self.clients[node]
        while c._next(max(deadline, time.monotonic() + BUFFERED_READ_S)) is not None:
            pass  # replies to the same subject land in pending
        return c.pending.pop(reply, [])

    def ask(self, node: int, req: Req) -> list[Frame]:
        first, reply = self.send(node, req)
        return first + self.rest(node, reply, time.monotonic() + EXTRA_REPLY_WINDOW_S)

    def close(self) -> None:
        for c in self.clients:
            c.close()


def _side(c: Cluster) -> Side:
    clients = []
    for url in c.urls:
        u = urlsplit(url)
        assert u.hostname and u.port
        clients.append(JsClient(u.hostname, u.port))
    return Side(c, clients)


@dataclass
class Pair:
    ref: Side
    tj: Side

    def ask(self, node: int, req: Req) -> tuple[list[Frame], list[Frame]]:
        """Every reply in each cluster (one window for both)."""
        r, r_reply = self.ref.send(node, req)
        t, t_reply = self.tj.send(node, req)
        deadline = time.monotonic() + EXTRA_REPLY_WINDOW_S
        r += self.ref.rest(node, r_reply, deadline)
        t += self.tj.rest(node, t_reply, deadline)
        return r, t

    def one(
        self, node: int, req: Req, *, ref_repeats: bool = False
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Both answers, each the only reply, as JSON; their texts must be equal.

        ``ref_repeats``: the reference may send the same answer more than once
        (nats-server 2.15.1 was seen, once in a loaded full run, answering a
        consumer-not-found from two servers right after the stream's creation);
        trijet must still answer exactly once.
        """
        r, t = self.ask(node, req)
        if ref_repeats and len(r) > 1 and len({f.payload for f in r}) == 1:
            r = r[:1]
        assert len(r) == 1, f"reference: {len(r)} replies to {req.subject}: {render(r)}"
        assert len(t) == 1, f"trijet: {len(t)} replies to {req.subject}: {render(t)}"
        assert _masked(render(t)) == _masked(render(r)), f"n{node + 1} {req.subject}"
        return r[0].json(), t[0].json()

    def reset(self) -> None:
        for side in (self.ref, self.tj):  # first replies only: no window
            names = side.send(0, Req("$JS.API.STREAM.NAMES"))[0][0].json().get("streams") or []
            for name in names:  # type: ignore[attr-defined]
                side.send(0, Req(f"$JS.API.STREAM.DELETE.{name}"))


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    with start_cluster(
        "reference", tags=REFERENCE_TAGS, workdir=tmp_path_factory.mktemp("ref3")
    ) as ref:
        with start_cluster(
            "trijet", tags=REFERENCE_TAGS, workdir=tmp_path_factory.mktemp("tj3")
        ) as tj:
            pair = Pair(_side(ref), _side(tj))
            try:
                yield pair
            finally:
                pair.ref.close()
                pair.tj.close()


@pytest.fixture
def pair(clusters: Pair) -> Iterator[Pair]:
    yield clusters
    clusters.reset()


def create(name: str, **cfg: Any) -> Req:
    body = {"name": name, "subjects": [name.lower() + ".>"], **cfg}
    return Req(f"$JS.API.STREAM.CREATE.{name}", json.dumps(body))


# ---------------------------------------------------------------- the cases


def test_r1_create_recreate_and_other_config(pair: Pair) -> None:
    ref, tj = pair.one(1, create("ONE"))
    assert ref["did_create"] is True and tj["did_create"] is True
    assert ref["cluster"]["name"] == tj["cluster"]["name"] == "C1"
    assert list(ref["cluster"]) == list(tj["cluster"]) == ["name", "leader"]
    ref2, tj2 = pair.one(2, create("ONE"))
    assert "did_create" not in ref2 and "did_create" not in tj2
    assert ref2["cluster"] == ref["cluster"] and tj2["cluster"] == tj["cluster"]
    ref3, _ = pair.one(0, create("ONE", subjects=["elsewhere.>"]))
    assert ref3["error"]["err_code"] == 10058


def test_placement_by_tag_and_unmatched_tag(pair: Pair) -> None:
    ref, tj = pair.one(2, create("TAGGED", placement={"tags": ["SSD"]}))
    assert ref["cluster"]["leader"] == tj["cluster"]["leader"] == "n1"  # the only ssd server
    ref2, _ = pair.one(2, create("NVME", placement={"tags": ["nvme"]}))
    assert ref2["error"] == {
        "code": 400,
        "err_code": 10005,
        "description": "no suitable peers for placement, tags not matched ['nvme']",
    }
    ref3, _ = pair.one(0, Req("$JS.API.STREAM.NAMES"))
    assert ref3["streams"] == ["TAGGED"]


def test_info_names_list_from_every_node(pair: Pair) -> None:
    pair.one(0, create("EVERY"))
    for node in range(NODES):
        ack, _ = pair.one(node, Req("every.x", "m"))
        assert ack["stream"] == "EVERY"
    for node in range(NODES):
        info, _ = pair.one(node, Req("$JS.API.STREAM.INFO.EVERY"))
        assert info["state"]["messages"] == NODES
        names, _ = pair.one(node, Req("$JS.API.STREAM.NAMES"))
        assert names["streams"] == ["EVERY"]
        listed, _ = pair.one(node, Req("$JS.API.STREAM.LIST"))
        assert [s["config"]["name"] for s in listed["streams"]] == ["EVERY"]


def test_unknown_stream_info_and_delete(pair: Pair) -> None:
    for node in range(NODES):
        ref, _ = pair.one(node, Req("$JS.API.STREAM.INFO.NOPE"))
        assert ref["error"]["err_code"] == 10059
    ref, _ = pair.one(1, Req("$JS.API.STREAM.DELETE.NOPE"))
    assert ref["error"]["err_code"] == 10059
    pair.one(0, create("GONE"))
    ref, _ = pair.one(2, Req("$JS.API.STREAM.DELETE.GONE"))
    assert ref["success"] is True
    for node in range(NODES):
        names, _ = pair.one(node, Req("$JS.API.STREAM.NAMES"))
        assert names["streams"] is None
        ref, _ = pair.one(node, Req("$JS.API.STREAM.INFO.GONE"))
        assert ref["error"]["err_code"] == 10059


def test_update_from_another_node(pair: Pair) -> None:
    pair.one(1, create("UPD"))
    body = {"name": "UPD", "subjects": ["upd.>"], "max_msgs": 5}
    ref, _ = pair.one(2, Req("$JS.API.STREAM.UPDATE.UPD", json.dumps(body)))
    assert ref["config"]["max_msgs"] == 5 and list(ref["cluster"]) == ["name", "leader"]
    info, _ = pair.one(0, Req("$JS.API.STREAM.INFO.UPD"))
    assert info["config"]["max_msgs"] == 5
    nope = {"name": "NOPE", "subjects": ["nope.>"]}
    ref, _ = pair.one(0, Req("$JS.API.STREAM.UPDATE.NOPE", json.dumps(nope)))
    assert ref["error"]["err_code"] == 10059


def test_config_checks_before_placement(pair: Pair) -> None:
    pair.one(0, create("BASE"))
    ref, _ = pair.one(1, create("OVER", subjects=["base.a"]))
    assert ref["error"]["err_code"] == 10065
    ref, _ = pair.one(2, create("ZERO", num_replicas=0))
    assert ref["config"]["num_replicas"] == 1
    ref, _ = pair.one(0, create("NEG", num_replicas=-1))
    assert ref["error"]["err_code"] == 10133


@pytest.mark.parametrize(
    ("name", "cfg", "description"),
    [
        ("R5", {"num_replicas": 5}, "no suitable peers for placement"),
        ("C9", {"placement": {"cluster": "C9"}}, "no suitable peers for placement"),
        (
            "R3SSD",
            {"num_replicas": 3, "placement": {"tags": ["ssd"]}},
            "no suitable peers for placement, tags not matched ['ssd']",
        ),
        (
            "R2AZ2",
            {"num_replicas": 2, "placement": {"tags": ["az:2"]}},
            "no suitable peers for placement, tags not matched ['az:2']",
        ),
    ],
)
def test_placement_failures(pair: Pair, name: str, cfg: dict[str, Any], description: str) -> None:
    ref, _ = pair.one(1, create(name, **cfg))
    assert ref["error"] == {"code": 400, "err_code": 10005, "description": description}


@pytest.mark.parametrize(
    "placement", [{"cluster": "C1", "tags": ["ssd"]}, {"tags": ["az:1", "ssd"]}, {"tags": ["SSD"]}]
)
def test_placement_on_the_tagged_server(pair: Pair, placement: dict[str, Any]) -> None:
    ref, tj = pair.one(2, create("PLACED", placement=placement))
    assert ref["config"]["placement"] == placement  # echoed verbatim
    assert ref["cluster"]["leader"] == tj["cluster"]["leader"] == "n1"


def _shape(d: Any) -> Any:
    """Keys and nesting of a JSON value, values dropped (volatile cluster views)."""
    if isinstance(d, dict):
        return {k: _shape(v) for k, v in d.items()}
    if isinstance(d, list):
        return [_shape(v) for v in d[:1]]
    return type(d).__name__


def test_r3_create(pair: Pair) -> None:
    r, t = pair.ask(1, create("R3", num_replicas=3))
    assert len(r) == len(t) == 1
    ref, tj = r[0].json(), t[0].json()
    for doc in (ref, tj):  # a replica may still be catching up (lag) right after creation
        for rep in doc["cluster"]["replicas"]:
            rep.pop("lag", None)
    assert _shape(tj) == _shape(ref)
    for doc in (ref, tj):  # trijet advertises another server version (jsdiff masks it)
        doc["config"].pop("metadata")
    assert tj["config"] == ref["config"]
    for doc in (ref, tj):
        cl = doc["cluster"]
        assert cl["raft_group"].startswith("S-R3F-") and len(cl["replicas"]) == 2
        assert {x["name"] for x in cl["replicas"]} | {cl["leader"]} == {"n1", "n2", "n3"}


def _api(doc: dict[str, Any]) -> tuple[int, int]:
    return doc["api"]["total"], doc["api"]["errors"]


def test_account_info_from_every_node(pair: Pair) -> None:
    pair.one(0, create("ACCT"))
    for node in range(NODES):
        ref, tj = pair.one(node, Req("$JS.API.INFO"))  # texts equal but for api counts
        assert ref["streams"] == tj["streams"] == 1


def test_account_info_counts_every_api_request_once(pair: Pair) -> None:
    before = [_api(d) for d in pair.one(1, Req("$JS.API.INFO"))]
    pair.one(0, create("COUNTED"))  # answered by its host
    pair.one(2, Req("$JS.API.STREAM.INFO.COUNTED"))  # by its host
    pair.one(1, Req("$JS.API.STREAM.NAMES"))  # by the meta leader
    pair.one(1, Req("$JS.API.STREAM.INFO.NOPE"))  # an error, by the meta leader
    after = [_api(d) for d in pair.one(1, Req("$JS.API.INFO"))]
    ref, tj = ((a[0] - b[0], a[1] - b[1]) for a, b in zip(after, before, strict=True))
    print(f"api (total, errors) deltas: reference {ref} trijet {tj}")
    # INFO itself counted once, after its own answer.  The reference's total
    # was seen at 3, 5 and 6 for the same requests (half the runs 3 on a loaded
    # machine: its cluster-wide count sums the other servers' lagging updates,
    # and may include an internal request), so only trijet's is exact
    assert ref[1] == tj[1] == 1
    assert tj[0] == 5 and 3 <= ref[0] <= 6


# ---------------------------------------------------------------- STREAM.PEER.REMOVE


def _peer_remove(stream: str, body: str) -> Req:
    return Req(f"$JS.API.STREAM.PEER.REMOVE.{stream}", body)


@pytest.mark.parametrize(
    ("node", "stream", "body", "err_code"),
    [
        (1, "PR3", '{"peer":"n1"}', 10075),  # an R3 on three servers: nobody free
        (2, "PR3", '{"peer":"n9"}', 10040),
        (0, "PR3", "", 10003),
        (1, "PR3", "{", 10025),
        (2, "PR3", "{}", 10003),
        (0, "PR3", '{"peer_id":"fjFyEjc1"}', 10025),  # unknown field
        (1, "NOPE", '{"peer":"n1"}', 10059),
        (0, "PR1", '{"peer":"zz"}', 10040),
    ],
)
def test_peer_remove_refusals(pair: Pair, node: int, stream: str, body: str, err_code: int) -> None:
    pair.ask(0, create("PR3", num_replicas=3))  # replicas' currency varies: not compared
    pair.one(0, create("PR1", placement={"tags": ["ssd"]}))
    ref, _ = pair.one(node, _peer_remove(stream, body))
    assert ref["type"] == "io.nats.jetstream.api.v1.stream_remove_peer_response"
    assert ref["error"]["err_code"] == err_code


def _members(side: Side, stream: str) -> set[str]:
    info = side.ask(0, Req(f"$JS.API.STREAM.INFO.{stream}"))[0].json()
    cl = info.get("cluster") or {}
    return {cl.get("leader"), *(r["name"] for r in cl.get("replicas") or [])} - {None}


def test_peer_remove_of_an_r2_member(pair: Pair) -> None:
    pair.ask(0, create("PR2", num_replicas=2))
    wanted = {}
    for side in (pair.ref, pair.tj):
        before = _members(side, "PR2")
        assert len(before) == 2
        gone = sorted(before)[0]
        [answer] = side.ask(1, _peer_remove("PR2", json.dumps({"peer": gone})))
        assert answer.json() == {
            "type": "io.nats.jetstream.api.v1.stream_remove_peer_response",
            "success": True,
        }
        wanted[id(side)] = ({"n1", "n2", "n3"} - {gone}, side)
    for goal, side in wanted.values():
        side.cluster.wait_until(
            lambda _c, s=side, g=goal: _members(s, "PR2") == g,
            timeout=30,
            what=f"PR2 on {sorted(goal)}",
        )


# ------------------------------------------------------------- consumers (reference §3, §4.1)


def consumer(stream: str, name: str | None = None, **cfg: Any) -> Req:
    """CONSUMER.CREATE (durable when ``name``, else ephemeral) with ``cfg``."""
    config = {"ack_policy": "explicit", **cfg}
    if name is not None:
        config["durable_name"] = name
        return Req(
            f"$JS.API.CONSUMER.CREATE.{stream}.{name}",
            json.dumps({"stream_name": stream, "config": config}),
        )
    return Req(
        f"$JS.API.CONSUMER.CREATE.{stream}", json.dumps({"stream_name": stream, "config": config})
    )


def made(pair: Pair, req: Req) -> None:
    """Both clusters answer ``req`` once, without an error (cluster views differ)."""
    r, t = pair.ask(0, req)
    assert len(r) == 1 and len(t) == 1, (req.subject, render(r), render(t))
    assert "error" not in r[0].json() and "error" not in t[0].json(), (render(r), render(t))


def _consumer_view(doc: dict[str, Any]) -> dict[str, Any]:
    """What must agree in a consumer create/info answer: keys in order, the
    config (names of ephemerals and version metadata aside) and the cluster
    block's shape (group-name prefix, replica count, keys in order)."""
    if "error" in doc:
        return doc
    cfg = {k: v for k, v in doc["config"].items() if k not in ("name", "metadata")}
    cl = dict(doc.get("cluster") or {})
    view: dict[str, Any] = {"keys": list(doc), "config": cfg, "cluster_keys": list(cl)}
    if "raft_group" in cl:
        view["group"] = cl["raft_group"][:6]
        view["replicas"] = len(cl["replicas"])
        view["replica_keys"] = [sorted(set(r) - {"lag"}) for r in cl["replicas"]]
    return view


def test_consumer_replicas_and_storage(pair: Pair) -> None:
    made(pair, create("CR3", num_replicas=3))
    made(pair, create("CR3M", num_replicas=3, storage="memory"))
    pair.one(0, create("CR1"))
    cases = [
        consumer("CR3", "D0"),
        consumer("CR3", "D1", num_replicas=1),
        consumer("CR3", "D2", num_replicas=2),
        consumer("CR3", "D5", num_replicas=5),
        consumer("CR3", "DM", mem_storage=True),
        consumer("CR3", "DM1", mem_storage=True, num_replicas=1),
        consumer("CR3"),
        consumer("CR3", num_replicas=3),
        consumer("CR3", num_replicas=3, mem_storage=True),
        consumer("CR3M", "MD"),
        consumer("CR3M", "MD1", num_replicas=1),
        consumer("CR1", "X3", num_replicas=3),
        consumer("CR1", "X0"),
    ]
    for req in cases:
        r, t = pair.ask(1, req)
        assert len(r) == 1 and len(t) == 1, (req.subject, render(r), render(t))
        rv, tv = _consumer_view(r[0].json()), _consumer_view(t[0].json())
        assert tv == rv, f"{req.subject} {req.body}"
    for name in ("D0", "D1", "DM", "DM1"):  # INFO from another node: the same view
        r, t = pair.ask(2, Req(f"$JS.API.CONSUMER.INFO.CR3.{name}"))
        assert len(r) == 1 and len(t) == 1, (name, render(r), render(t))
        assert _consumer_view(t[0].json()) == _consumer_view(r[0].json()), name


def test_consumer_info_and_stepdown_errors(pair: Pair) -> None:
    made(pair, create("CS", num_replicas=3))
    pair.one(0, create("CS1"))
    made(pair, consumer("CS", "D"))
    made(pair, consumer("CS", "R1", num_replicas=1))
    made(pair, consumer("CS1", "D"))
    pair.one(1, Req("$JS.API.CONSUMER.INFO.CS.NOPE"), ref_repeats=True)
    pair.one(1, Req("$JS.API.CONSUMER.LEADER.STEPDOWN.CS.NOPE"), ref_repeats=True)
    pair.one(1, Req("$JS.API.CONSUMER.LEADER.STEPDOWN.NOPE.D"))
    for bad in ("{nope", "[1]", '{"x":1}', '{"placement":1}', '{"placement":{"tags":"a"}}'):
        pair.one(1, Req("$JS.API.CONSUMER.LEADER.STEPDOWN.CS.D", bad))
        pair.one(1, Req("$JS.API.STREAM.LEADER.STEPDOWN.CS", bad))
    body = json.dumps({"placement": {"preferred": "n9"}})
    pair.one(1, Req("$JS.API.CONSUMER.LEADER.STEPDOWN.CS.D", body))
    pair.one(2, Req("$JS.API.CONSUMER.LEADER.STEPDOWN.CS.R1"))  # R1: success, nothing moves
    pair.one(2, Req("$JS.API.CONSUMER.LEADER.STEPDOWN.CS1.D"))
    for side in (pair.ref, pair.tj):  # preferred = the current leader: each side's own
        info = side.ask(0, Req("$JS.API.CONSUMER.INFO.CS.D"))[0].json()
        leader = info["cluster"]["leader"]
        body = json.dumps({"placement": {"preferred": leader}})
        got = side.ask(0, Req("$JS.API.CONSUMER.LEADER.STEPDOWN.CS.D", body))
        assert len(got) == 1
        assert got[0].json()["error"] == {
            "code": 400,
            "err_code": 10005,
            "description": f'preferred server "{leader}" is already leader',
        }, side.cluster.kind
    r, _ = pair.one(0, Req("$JS.API.CONSUMER.LEADER.STEPDOWN.CS.D"))
    assert r["success"] is True


def test_consumer_scale_down_to_r1(pair: Pair) -> None:
    made(pair, create("SC", num_replicas=3))
    made(pair, consumer("SC", "D"))
    r, t = pair.ask(1, consumer("SC", "D", num_replicas=1))
    assert len(r) == 1 and len(t) == 1
    rd, td = r[0].json(), t[0].json()
    print("reference update:", json.dumps(rd.get("cluster")))
    print("trijet update:", json.dumps(td.get("cluster")))
    assert td["config"]["num_replicas"] == rd["config"]["num_replicas"] == 1

    def settled(side: Side) -> dict[str, Any]:
        deadline = time.monotonic() + 20
        while True:
            doc = side.ask(1, Req("$JS.API.CONSUMER.INFO.SC.D"))[0].json()
            if "desired" not in (doc.get("cluster") or {}) or time.monotonic() > deadline:
                return doc
            time.sleep(0.1)  # the reference reshapes the group in the background

    rv, tv = _consumer_view(settled(pair.ref)), _consumer_view(settled(pair.tj))
    assert tv == rv
    assert rv["cluster_keys"] == ["name", "leader"]


def _replica_states(c: Cluster, stream: str, name: str) -> list[dict[str, Any] | None]:
    """Consumer ``name`` as each node's ``/jsz?consumers=true`` shows it (role and numbers)."""
    out: list[dict[str, Any] | None] = []
    for url in c.monitoring_urls:
        doc = get_json(f"{url}/jsz?consumers=true")
        found = None
        for acc in (doc or {}).get("account_details") or []:
            for s in acc.get("stream_detail") or []:
                for cd in s.get("consumer_detail") or [] if s["name"] == stream else []:
                    if cd["name"] == name:
                        leader = (cd.get("cluster") or {}).get("leader")
                        found = {
                            "leads": leader == c.names[len(out)],
                            "delivered": [
                                cd["delivered"][k] for k in ("consumer_seq", "stream_seq")
                            ],
                            "ack_floor": [
                                cd["ack_floor"][k] for k in ("consumer_seq", "stream_seq")
                            ],
                            "num_ack_pending": cd["num_ack_pending"],
                            "num_redelivered": cd["num_redelivered"],
                            "num_pending": cd["num_pending"],
                            "num_waiting": cd["num_waiting"],
                        }
        out.append(found)
    return out


def test_consumer_state_on_every_replica(pair: Pair) -> None:
    """``/jsz?consumers=true`` shows a replicated consumer's delivered/acked
    state on every replica, the leader counting ``num_pending`` (followers 0)."""

    async def work(c: Cluster) -> None:
        nc = await nats.connect(c.urls[0], error_cb=noop_cb)
        try:
            js = nc.jetstream(timeout=5)
            await js.add_stream(name="FS", subjects=["fs.>"], num_replicas=3)
            for i in range(20):
                for _ in range(50):  # bounded: nats-server may answer the create before
                    try:  # the stream leader's interest reaches this server (one full run
                        # saw a 503 on the first publish); asked again, as clients do
                        await js.publish("fs.a", b"%d" % i)
                        break
                    except nats.js.errors.NoStreamResponseError:
                        await asyncio.sleep(0.1)
            psub = await js.pull_subscribe("fs.a", durable="D", stream="FS")
            msgs = await psub.fetch(10, timeout=5)
            assert len(msgs) == 10
            for m in msgs[:6]:
                await m.ack_sync()
        finally:
            await nc.close()

    views = []
    for side in (pair.ref, pair.tj):
        c = side.cluster
        run(lambda c=c: work(c), timeout=60)

        def agreed(c: Cluster) -> bool:
            states = _replica_states(c, "FS", "D")
            return (
                all(
                    s is not None and s["delivered"][1] == 10 and s["ack_floor"][1] == 6
                    for s in states
                )
                and sum(1 for s in states if s and s["leads"]) == 1
            )

        c.wait_until(agreed, timeout=20, what="every replica shows D's state")
        views.append(sorted(_replica_states(c, "FS", "D"), key=lambda s: (s or {}).get("leads")))
    ref, tj = views
    assert tj == ref
    assert ref[-1] is not None and ref[-1]["num_pending"] == 10  # the leader counts
    assert [s["num_pending"] for s in ref[:-1] if s] == [0, 0]


@pytest.mark.parametrize("ack", ["explicit", "none"])
def test_delivery_with_the_followers_stopped(pair: Pair, ack: str) -> None:
    """With both other replicas of an R3 consumer stopped (SIGSTOP), a fetch
    from its leader gets its message only when the consumer's delivered state
    need not be committed first: ack ``none`` is sent ahead of its commit, an
    explicit-ack delivery waits for a quorum (nats-server's
    ``replicateDeliveries``; ``cluster.consumer_ahead``)."""
    stream = "FF" + ack.upper()[:1]

    async def work(c: Cluster) -> int:
        nc = await nats.connect(c.urls[0], error_cb=noop_cb)
        try:
            js = nc.jetstream(timeout=5)
            await js.add_stream(name=stream, subjects=[stream.lower() + ".>"], num_replicas=3)
            for i in range(3):
                for _ in range(50):  # bounded: a 503 while the cluster settles after the
                    try:  # previous case's SIGSTOP/SIGCONT is asked again, as clients do
                        await js.publish(stream.lower() + ".a", b"%d" % i)
                        break
                    except nats.js.errors.NoStreamResponseError:
                        await asyncio.sleep(0.1)
            await js.add_consumer(stream, durable_name="D", ack_policy=ack)
            leader = (await js.consumer_info(stream, "D")).cluster.leader
        finally:
            await nc.close()
        li = c.index(leader)
        nl = await nats.connect(c.urls[li], error_cb=noop_cb)
        stopped = [p for i, p in enumerate(c.servers) if i != li and p is not None]
        try:
            psub = await nl.jetstream(timeout=5).pull_subscribe_bind("D", stream=stream)
            await nl.flush()
            for p in stopped:
                os.kill(p.pid, signal.SIGSTOP)
            try:
                return len(await psub.fetch(1, timeout=FOLLOWERS_STOPPED_FETCH_S))
            except nats.errors.TimeoutError:
                return 0
        finally:
            for p in stopped:
                os.kill(p.pid, signal.SIGCONT)
            await nl.close()

    got = {}
    for side in (pair.ref, pair.tj):
        got[side.cluster.kind] = run(lambda c=side.cluster: work(c), timeout=60)
        side.cluster.wait_formed()
    print("delivered with the followers stopped:", got)
    assert got["trijet"] == int(ack == "none")
    if ack == "none":
        assert got["reference"] == 1
    # explicit: nats-server delivered nothing in most runs, its message in 1 of 6
    # (not understood; its code holds such deliveries until the delivered
    # state has a quorum): not compared


def test_waiting_pull_requests_take_turns(pair: Pair) -> None:
    """Two requests waiting on an R3 consumer take turns, one message each
    (nats-server's ``waitQueue.pop``; ``node.jetstream.pullturns``), the
    requests sent to a node that need not lead (forwarded)."""
    stream = "TURNS"

    async def work(c: Cluster) -> list[list[str]]:
        nc = await nats.connect(c.urls[0], error_cb=noop_cb)
        try:
            js = nc.jetstream(timeout=5)
            await js.add_stream(name=stream, subjects=["turns.>"], num_replicas=3)
            await js.add_consumer(stream, durable_name="D", ack_policy="explicit")
            queues: list[asyncio.Queue[Any]] = []
            for batch in (4, 2):
                inbox = nc.new_inbox()
                q: asyncio.Queue[Any] = asyncio.Queue()
                await nc.subscribe(inbox, cb=q.put)
                body = json.dumps({"batch": batch, "expires": 20_000_000_000}).encode()
                await nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{stream}.D", body, reply=inbox)
                queues.append(q)
            await nc.flush()
            deadline = time.monotonic() + TURNS_WAIT_S
            while (await js.consumer_info(stream, "D")).num_waiting != 2:
                assert time.monotonic() < deadline, "the requests never waited"
                await asyncio.sleep(POLL_S)
            for i in range(6):
                await js.publish("turns.a", b"m%d" % i)
            out = []
            for q, n in zip(queues, (4, 2), strict=True):
                out.append(
                    [
                        (await asyncio.wait_for(q.get(), TURNS_WAIT_S)).data.decode()
                        for _ in range(n)
                    ]
                )
            return out
        finally:
            await nc.close()

    got = {
        side.cluster.kind: run(lambda c=side.cluster: work(c), timeout=60)
        for side in (pair.ref, pair.tj)
    }
    assert got["reference"] == [["m0", "m2", "m4", "m5"], ["m1", "m3"]]
    assert got["trijet"] == got["reference"]


# ------------------------------------------------------ scaling through STREAM.UPDATE (§5.1)


def update(name: str, **cfg: Any) -> Req:
    body = {"name": name, "subjects": [name.lower() + ".>"], **cfg}
    return Req(f"$JS.API.STREAM.UPDATE.{name}", json.dumps(body))


@pytest.mark.parametrize(
    ("stream", "cfg"),
    [
        ("SR", {"num_replicas": 5}),  # 400/10005 no suitable peers for placement
        ("SR", {"num_replicas": 4}),
        ("SR", {"num_replicas": -1}),  # 400/10133
        ("ST", {"num_replicas": 2, "placement": {"tags": ["ssd"]}}),  # …, tags not matched
        ("NOPE", {"num_replicas": 3}),  # 404/10059
    ],
)
def test_scale_refusals(pair: Pair, stream: str, cfg: dict[str, Any]) -> None:
    pair.one(0, create("SR"))
    pair.one(0, create("ST", placement={"tags": ["ssd"]}))
    ref, _ = pair.one(1, update(stream, **cfg))
    assert "error" in ref


def _scale_view(doc: dict[str, Any]) -> dict[str, Any]:
    """What must agree in a scaling update's answer: keys in order, the config
    (version metadata aside), the state's counts, the cluster's name and its
    ``desired`` block (keys but ``replicas``, which the reference fills in a
    moment later when scaling down and trijet at once; ``origin``).  The rest
    of the ``cluster`` block is a view of a change in progress (the reference
    answers before its new group elected a leader, trijet after)."""
    if "error" in doc:
        return doc
    cfg = {k: v for k, v in doc["config"].items() if k != "metadata"}
    st = doc["state"]
    desired = doc["cluster"].get("desired") or {}
    return {
        "keys": list(doc),
        "config": cfg,
        "state": (st["messages"], st["first_seq"], st["last_seq"]),
        "cluster": doc["cluster"]["name"],
        "desired": [k for k in desired if k != "replicas"],
        "origin": desired.get("origin"),
    }


def _settled_block(side: Side, stream: str, replicas: int) -> dict[str, Any]:
    """The stream's ``cluster`` block once the change is done (bounded wait)."""
    deadline = time.monotonic() + 30
    while True:
        cl = side.ask(0, Req(f"$JS.API.STREAM.INFO.{stream}"))[0].json().get("cluster") or {}
        reps = cl.get("replicas") or []
        done = (
            "desired" not in cl
            and "leader" in cl
            and len(reps) == replicas - 1
            and all(r.get("current") for r in reps)
        )
        if done or time.monotonic() > deadline:
            return dict(cl)
        time.sleep(0.1)  # the change goes on in the background (an absence is polled)


def _block_view(cl: dict[str, Any]) -> dict[str, Any]:
    view: dict[str, Any] = {"keys": list(cl)}
    if "raft_group" in cl:
        view["group"] = cl["raft_group"][:6]
        view["replica_keys"] = [sorted(r) for r in cl["replicas"]]
    return view


@pytest.mark.parametrize("storage", ["file", "memory"])
def test_scale_up_and_down_replies_and_settled_views(pair: Pair, storage: str) -> None:
    name = "SU" if storage == "file" else "SM"
    made(pair, create(name, storage=storage))
    for i in range(5):
        pair.ask(0, Req(f"{name.lower()}.a", f"m{i}"))
    made(pair, consumer(name, "D"))
    made(pair, consumer(name, "E1", num_replicas=1))
    steps = (3, 1, 3, 2) if storage == "file" else (3,)  # memory: the data copied once
    for replicas in steps:
        r, t = pair.ask(1, update(name, storage=storage, num_replicas=replicas))
        assert len(r) == 1 and len(t) == 1, (replicas, render(r), render(t))
        rv, tv = _scale_view(r[0].json()), _scale_view(t[0].json())
        assert tv == rv, f"R{replicas}"
        rb = _block_view(_settled_block(pair.ref, name, replicas))
        tb = _block_view(_settled_block(pair.tj, name, replicas))
        assert tb == rb, f"settled at R{replicas}"
        if replicas == 1:  # R1: success, nothing moves
            pair.one(0, Req(f"$JS.API.STREAM.LEADER.STEPDOWN.{name}"))
        for c in ("D", "E1"):  # a durable with 0 follows the stream; an explicit 1 stays R1
            req = Req(f"$JS.API.CONSUMER.INFO.{name}.{c}")
            deadline = time.monotonic() + 20
            while True:  # the reference moves consumers after the stream (polled, bounded)
                rc, tc = pair.ref.ask(2, req)[0].json(), pair.tj.ask(2, req)[0].json()
                if _consumer_view(tc) == _consumer_view(rc) or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            assert _consumer_view(tc) == _consumer_view(rc), f"{c} at R{replicas}"
