"""The pure meta state machine: determinism, snapshots, malformed entries, answers.

Theory of operation: ``MetaMachine.apply`` runs on every member of ``_meta_``
and must reach the same state from the same entries whatever happened before
(rule 2), so the properties here feed machines the same sequences and compare
``snapshot()`` bytes (canonical cbor2, the strongest equality we have: it
covers peers, configs, groups, placement and creation times) and results.
Sequences are drawn by hypothesis from a small name space (so creates collide,
updates and deletes hit existing streams) with random seeds, online sets,
tags and replica counts, interleaved with garbage.  A malformed entry must
come back as ``BAD_ENTRY`` and leave the state as it was.
"""

from __future__ import annotations

import io
from typing import Any

import cbor2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cluster.meta.entries import (
    BAD_ENTRY,
    NAME_IN_USE,
    PEER_NOT_MEMBER,
    PEER_REMAP_FAILED,
    REPLICAS_NOT_UPDATABLE,
    SERVER_NOT_MEMBER,
    STREAM_NOT_FOUND,
    Assigned,
    MetaError,
    MetaOp,
    PeerRecord,
    PeerRegistered,
    PeerReplaced,
    Removed,
    ServerRemoved,
    StreamAssigned,
    StreamPeersChanged,
    StreamRemoved,
    StreamUpdated,
    add_stream_entry,
    delete_stream_entry,
    origin_doc,
    peer_entry,
    remove_peer_entry,
    remove_server_entry,
    scale_fields,
    update_stream_entry,
)
from cluster.meta.machine import (
    MetaMachine,
)

SERVERS = ("n1", "n2", "n3", "n4")
NAMES = ("A", "B", "C")
TAGS = ("ssd", "az:1", "az:2", "!jetstream", "SSD")


def _cfg(name: str, **kw: Any) -> dict[str, Any]:
    return {"name": name, "subjects": [name.lower() + ".>"], **kw}


def _add(config: dict[str, Any], *, seed: int = 7, online: Any = SERVERS, **kw: Any) -> bytes:
    args: dict[str, Any] = {
        "group": "S-R1F-abc",
        "created_ns": 1_000,
        "seed": seed,
        "online": online,
        "unique_tag": "",
        "reply": "_INBOX.r",
    }
    args.update(kw)
    return add_stream_entry(config, **args)


def _raw(op: object, **body: Any) -> bytes:
    return cbor2.dumps({"v": 1, "op": op, **body}, canonical=True)


def _scale(
    *,
    group: str = "S-R3F-new",
    seed: int = 7,
    online: Any = SERVERS,
    unique_tag: str = "",
    leader: str = "",
) -> dict[str, Any]:
    return scale_fields(group=group, seed=seed, online=online, unique_tag=unique_tag, leader=leader)


def _machine(*servers: str, tags: tuple[str, ...] = ()) -> MetaMachine:
    m = MetaMachine()
    for s in servers or SERVERS:
        assert isinstance(m.apply(peer_entry(PeerRecord(s, "C1", tags))), PeerRegistered)
    return m


def _restored(m: MetaMachine) -> MetaMachine:
    r = MetaMachine()
    r.restore(io.BytesIO(m.snapshot()))
    return r


# ---------------------------------------------------------------- strategies

peers_st = st.builds(
    lambda n, c, t: peer_entry(PeerRecord(n, c, tuple(t))),
    st.sampled_from(SERVERS),
    st.sampled_from(("C1", "C1", "C2")),
    st.lists(st.sampled_from(TAGS), max_size=3),
)
configs_st = st.builds(
    lambda name, subj, replicas, tags, cluster: _cfg(
        name,
        subjects=[subj],
        num_replicas=replicas,
        placement={"tags": tags, **({"cluster": cluster} if cluster else {})},
    ),
    st.sampled_from(NAMES),
    st.sampled_from(("x", "y")),
    st.sampled_from((-1, 0, 1, 1, 2, 3, 5)),
    st.lists(st.sampled_from(TAGS), max_size=2),
    st.sampled_from(("", "C1", "C2")),
)
adds_st = st.builds(
    lambda cfg, seed, online, ut, created: _add(
        cfg, seed=seed, online=online, unique_tag=ut, created_ns=created
    ),
    configs_st,
    st.integers(-(2**63), 2**63),
    st.lists(st.sampled_from(SERVERS), unique=True),
    st.sampled_from(("", "az:")),
    st.integers(0, 2**62),
)
updates_st = st.builds(lambda cfg: update_stream_entry(cfg, reply="_INBOX.u"), configs_st)
scales_st = st.builds(
    lambda cfg, seed, online, ut, leader: update_stream_entry(
        cfg, reply="_INBOX.s", scale=_scale(seed=seed, online=online, unique_tag=ut, leader=leader)
    ),
    configs_st,
    st.integers(-(2**63), 2**63),
    st.lists(st.sampled_from(SERVERS), unique=True),
    st.sampled_from(("", "az:")),
    st.sampled_from(("", *SERVERS, "n9")),
)
deletes_st = st.builds(lambda n: delete_stream_entry(n, reply=""), st.sampled_from((*NAMES, "Z")))
removes_st = st.builds(
    lambda n, p, seed, online, ut: remove_peer_entry(n, p, seed=seed, online=online, unique_tag=ut),
    st.sampled_from((*NAMES, "Z")),
    st.sampled_from((*SERVERS, "n9")),
    st.integers(-(2**63), 2**63),
    st.lists(st.sampled_from(SERVERS), unique=True),
    st.sampled_from(("", "az:")),
)
server_removes_st = st.builds(
    lambda p, seed, online: remove_server_entry(p, seed=seed, online=online, unique_tag=""),
    st.sampled_from((*SERVERS, "n9")),
    st.integers(-(2**63), 2**63),
    st.lists(st.sampled_from(SERVERS), unique=True),
)
# wrong types: a known op with every field drawn from anything cbor can carry
json_like = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.floats(allow_nan=False)
    | st.text(max_size=3),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
field_names = st.sampled_from(
    (
        "name",
        "cluster",
        "tags",
        "config",
        "group",
        "created",
        "seed",
        "online",
        "unique_tag",
        "reply",
        "stream",
        "peer",
        "server",
    )
)
wrong_types_st = st.builds(
    lambda op, fields, v: cbor2.dumps({**fields, "v": v, "op": op}, canonical=True),
    st.sampled_from((0, 1, 2, 3, 4, 5, "1", None)),
    st.dictionaries(field_names, json_like, max_size=10),
    st.sampled_from((1, 1, 1, 2, "1")),
)
garbage_st = st.binary(max_size=64) | wrong_types_st
entries_st = st.lists(
    st.one_of(
        peers_st,
        adds_st,
        adds_st,
        updates_st,
        scales_st,
        scales_st,
        deletes_st,
        removes_st,
        server_removes_st,
        garbage_st,
    ),
    max_size=40,
)


# ---------------------------------------------------------------- determinism


@settings(max_examples=300, deadline=None)
@given(entries_st)
def test_same_entries_same_state_and_results(entries: list[bytes]) -> None:
    a, b = MetaMachine(), MetaMachine()
    effects: list[object] = []
    b.listener = effects.append  # listening must not change the state
    for e in entries:
        ra, rb = a.apply(e), b.apply(e)
        assert ra == rb
        assert isinstance(
            ra, Assigned | Removed | MetaError | PeerRegistered | PeerReplaced | ServerRemoved
        )
        assert a.snapshot() == b.snapshot()
    # a member that restarts from a snapshot taken midway reaches the same state
    cut = len(entries) // 2
    c = MetaMachine()
    for e in entries[:cut]:
        c.apply(e)
    c = _restored(c)
    for e in entries[cut:]:
        c.apply(e)
    assert c.snapshot() == a.snapshot()


@settings(max_examples=200, deadline=None)
@given(entries_st)
def test_snapshot_round_trip(entries: list[bytes]) -> None:
    m = MetaMachine()
    for e in entries:
        m.apply(e)
    r = _restored(m)
    assert r.snapshot() == m.snapshot()
    assert r.peers == m.peers
    assert {n: sa.to_doc() for n, sa in r.streams.items()} == {
        n: sa.to_doc() for n, sa in m.streams.items()
    }
    assert r.load() == {p: m.load()[p] for p in r.load()}


@settings(max_examples=300, deadline=None)
@given(entries_st, garbage_st)
def test_malformed_entries_are_answers_and_change_nothing(entries: list[bytes], bad: bytes) -> None:
    m = MetaMachine()
    for e in entries:
        m.apply(e)
    before = m.snapshot()
    got = m.apply(bad)
    if got == BAD_ENTRY:
        assert m.snapshot() == before


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"\xff",
        b"not cbor at all",
        cbor2.dumps([1, 2]),
        cbor2.dumps({"v": 2, "op": 1, "name": "n1", "cluster": "C1", "tags": []}),
        _raw(99),
        _raw(1.0, name="n1", cluster="C1", tags=[]),
        _raw(True, name="n1", cluster="C1", tags=[]),
        _raw(1, name="n1", cluster="C1", tags="ssd"),
        _raw(1, name=1, cluster="C1", tags=[]),
        _raw(2, config=[], group="g", created=1, seed=1, online=[], unique_tag="", reply="r"),
        _raw(2, config={"name": 5}, group="g", created=1, seed=1, online=[], unique_tag="", reply=""),
        _raw(2, config=_cfg("A"), group="g", created=True, seed=1, online=[], unique_tag="", reply=""),
        _raw(2, config=_cfg("A"), group="g", created=1, seed=1.5, online=[], unique_tag="", reply=""),
        _raw(2, config=_cfg("A", num_replicas="1"), group="g", created=1, seed=1, online=["n1"],
             unique_tag="", reply=""),
        _raw(2, config=_cfg("A", num_replicas=-1), group="g", created=1, seed=1, online=["n1"],
             unique_tag="", reply=""),
        _raw(2, config=_cfg("A", placement=["x"]), group="g", created=1, seed=1, online=["n1"],
             unique_tag="", reply=""),
        _raw(2, config=_cfg("A", placement={"tags": "ssd"}), group="g", created=1, seed=1,
             online=["n1"], unique_tag="", reply=""),
        _raw(2, config=_cfg("A", placement={"cluster": 3}), group="g", created=1, seed=1,
             online=["n1"], unique_tag="", reply=""),
        _raw(2, config=_cfg("A"), created=1, seed=1, online=["n1"], unique_tag="", reply=""),
        _raw(3, config=_cfg("E", max_msgs=1), reply=None),
        _raw(4, name="E", reply=b"r"),
        _raw(4, name=["E"], reply=""),
    ],
)  # fmt: skip
def test_malformed_entry_table(raw: bytes) -> None:
    m = _machine("n1")
    m.apply(_add(_cfg("E"), online=["n1"]))
    before = m.snapshot()
    assert m.apply(raw) == BAD_ENTRY
    assert m.snapshot() == before


# ---------------------------------------------------------------- answers


def test_create_places_and_emits_once() -> None:
    m = _machine()
    effects: list[object] = []
    m.listener = effects.append
    got = m.apply(_add(_cfg("A"), created_ns=42))
    assert isinstance(got, Assigned) and got.created
    sa = got.assignment
    assert sa.name == "A" and sa.group == "S-R1F-abc" and sa.created_ns == 42
    assert len(sa.peers) == 1 and sa.peers[0] in SERVERS
    assert effects == [StreamAssigned(sa, "_INBOX.r", created=True)]
    assert m.assigned_to(sa.peers[0]) == [sa]


def test_identical_recreate_is_not_a_create() -> None:
    m = _machine()
    first = m.apply(_add(_cfg("A"), seed=1, created_ns=1))
    assert isinstance(first, Assigned)
    effects: list[object] = []
    m.listener = effects.append
    # another seed, group and time: the existing assignment is kept as is
    again = m.apply(_add(_cfg("A"), seed=2, group="S-R1F-zzz", created_ns=2, reply="_INBOX.2"))
    assert again == Assigned(first.assignment, created=False)
    assert effects == [StreamAssigned(first.assignment, "_INBOX.2", created=False)]


def test_recreate_with_other_config_is_10058() -> None:
    m = _machine()
    m.apply(_add(_cfg("A")))
    before = m.snapshot()
    effects: list[object] = []
    m.listener = effects.append
    got = m.apply(_add(_cfg("A", subjects=["other"])))
    assert got == NAME_IN_USE
    assert (got.code, got.err_code) == (400, 10058)
    assert effects == [] and m.snapshot() == before


@pytest.mark.parametrize(
    ("config", "online", "description"),
    [
        (
            _cfg("A", placement={"tags": ["nvme"]}),
            SERVERS,
            "no suitable peers for placement, tags not matched ['nvme']",
        ),
        (_cfg("A", num_replicas=5), SERVERS, "no suitable peers for placement"),
        (_cfg("A"), [], "no suitable peers for placement, miscellaneous issue"),
        (
            _cfg("A", placement={"tags": ["!ssd"]}),
            SERVERS,
            "no suitable peers for placement, tags excluded ['ssd']",
        ),
    ],
)
def test_placement_failure_is_10005_with_the_reason(
    config: dict[str, Any], online: Any, description: str
) -> None:
    m = _machine(tags=("ssd",))
    before = m.snapshot()
    got = m.apply(_add(config, online=online))
    assert got == MetaError(400, 10005, description)
    assert m.snapshot() == before


def test_placement_follows_tags_and_spreads() -> None:
    m = MetaMachine()
    m.apply(peer_entry(PeerRecord("n1", "C1", ("ssd",))))
    m.apply(peer_entry(PeerRecord("n2", "C1", ())))
    m.apply(peer_entry(PeerRecord("n3", "C1", ())))
    got = m.apply(_add(_cfg("T", placement={"tags": ["SSD"]})))
    assert isinstance(got, Assigned) and got.assignment.peers == ("n1",)
    hosts = set()
    for i in range(3):
        r = m.apply(_add(_cfg(f"S{i}"), seed=i))
        assert isinstance(r, Assigned)
        hosts.add(r.assignment.peers[0])
    assert {"n2", "n3"} <= hosts  # least loaded first: n2 and n3 before n1 again


def test_update_keeps_placement_and_emits_old_config() -> None:
    m = _machine()
    first = m.apply(_add(_cfg("A")))
    assert isinstance(first, Assigned)
    effects: list[object] = []
    m.listener = effects.append
    new = _cfg("A", max_msgs=10)
    got = m.apply(update_stream_entry(new, reply="_INBOX.u"))
    assert isinstance(got, Assigned) and not got.created
    sa = got.assignment
    assert (sa.config, sa.group, sa.peers, sa.created_ns) == (
        new,
        first.assignment.group,
        first.assignment.peers,
        first.assignment.created_ns,
    )
    assert effects == [
        StreamUpdated(sa, first.assignment.config, "_INBOX.u", old_peers=first.assignment.peers)
    ]
    assert not effects[0].scaled  # type: ignore[attr-defined]


def test_update_and_delete_of_unknown_are_10059() -> None:
    m = _machine()
    effects: list[object] = []
    m.listener = effects.append
    assert m.apply(update_stream_entry(_cfg("NOPE"), reply="")) == STREAM_NOT_FOUND
    got = m.apply(delete_stream_entry("NOPE", reply=""))
    assert got == STREAM_NOT_FOUND
    assert isinstance(got, MetaError) and (got.code, got.err_code) == (404, 10059)
    assert effects == []


def test_delete_removes_and_emits() -> None:
    m = _machine()
    first = m.apply(_add(_cfg("A")))
    assert isinstance(first, Assigned)
    effects: list[object] = []
    m.listener = effects.append
    assert m.apply(delete_stream_entry("A", reply="r")) == Removed(first.assignment)
    assert effects == [StreamRemoved(first.assignment, "r")]
    assert m.streams == {} and sum(m.load().values()) == 0
    assert m.apply(delete_stream_entry("A", reply="r")) == STREAM_NOT_FOUND


def test_peer_refresh_replaces_tags() -> None:
    m = _machine("n1")
    m.apply(peer_entry(PeerRecord("n1", "C1", ("ssd",))))
    assert m.peers == {"n1": PeerRecord("n1", "C1", ("ssd",))}


def test_entry_codes_are_stable() -> None:
    assert [(o.name, int(o)) for o in MetaOp] == [
        ("PEER", 1),
        ("ADD_STREAM", 2),
        ("UPDATE_STREAM", 3),
        ("DELETE_STREAM", 4),
        ("REMOVE_STREAM_PEER", 5),
        ("REMOVE_SERVER", 6),
        ("PURGE_ACCOUNT", 7),
    ]


def _remove(name: str, peer: str, *, online: Any = SERVERS, unique_tag: str = "") -> bytes:
    return remove_peer_entry(name, peer, seed=3, online=online, unique_tag=unique_tag)


def test_remove_peer_places_a_free_server_and_emits() -> None:
    m = _machine("n1", "n2", "n3")
    m.apply(_add(_cfg("A", num_replicas=2)))
    before = m.stream("A")
    gone = before.peers[0]
    spare = ({"n1", "n2", "n3"} - set(before.peers)).pop()
    effects: list[object] = []
    m.listener = effects.append
    res = m.apply(_remove("A", gone))
    assert res == PeerReplaced(m.stream("A"), gone, spare)
    after = m.stream("A")
    assert after.peers == (before.peers[1], spare)
    assert (after.group, after.created_ns, after.config) == (
        before.group,
        before.created_ns,
        before.config,
    )
    assert effects == [StreamPeersChanged(after, before.peers, gone, spare)]
    assert _restored(m).snapshot() == m.snapshot()


def test_remove_peer_refusals_change_nothing() -> None:
    m = _machine("n1", "n2", "n3")
    m.apply(_add(_cfg("R3", num_replicas=3)))
    m.apply(_add(_cfg("R1", subjects=["r1"])))
    m.apply(_add(_cfg("R2", subjects=["r2"], num_replicas=2)))
    spare = ({"n1", "n2", "n3"} - set(m.stream("R2").peers)).pop()
    snap = m.snapshot()
    assert m.apply(_remove("R3", "n1")) == PEER_REMAP_FAILED  # no free server
    assert m.apply(_remove("R3", "n9")) == PEER_NOT_MEMBER
    assert m.apply(_remove("R2", spare)) == PEER_NOT_MEMBER
    assert m.apply(_remove("R1", m.stream("R1").peers[0])) == PEER_REMAP_FAILED
    assert m.apply(_remove("NOPE", "n1")) == STREAM_NOT_FOUND
    # the only free server is offline
    member = m.stream("R2").peers[0]
    online = [s for s in SERVERS if s != spare]
    assert m.apply(_remove("R2", member, online=online)) == PEER_REMAP_FAILED
    assert m.snapshot() == snap


def test_remove_peer_honours_tags_and_unique_tag() -> None:
    m = MetaMachine()
    for name, tags in (
        ("n1", ("az:1", "ssd")),
        ("n2", ("az:1",)),
        ("n3", ("az:2", "ssd")),
        ("n4", ("az:2",)),
    ):
        m.apply(peer_entry(PeerRecord(name, "C1", tags)))
    # R2 on ssd servers: n1 and n3; removing one has no other ssd server free
    m.apply(_add(_cfg("S", subjects=["s"], num_replicas=2, placement={"tags": ["ssd"]})))
    assert set(m.stream("S").peers) == {"n1", "n3"}
    assert m.apply(_remove("S", "n1")) == PEER_REMAP_FAILED
    # unique az: an R2 on n2 (az:1) and n3 (az:2) losing n2 may only take n1
    m.apply(_add(_cfg("U", subjects=["u"], num_replicas=2), unique_tag="az:", seed=11))
    peers = m.stream("U").peers
    az = {"n1": "1", "n2": "1", "n3": "2", "n4": "2"}
    assert az[peers[0]] != az[peers[1]]
    gone = peers[0]
    res = m.apply(_remove("U", gone, unique_tag="az:"))
    assert isinstance(res, PeerReplaced)
    new = m.stream("U").peers
    assert gone not in new and az[new[0]] != az[new[1]]


def test_remove_server_replaces_it_where_it_can_and_keeps_the_rest() -> None:
    m = _machine("n1", "n2", "n3")
    m.apply(_add(_cfg("R3", num_replicas=3)))
    m.apply(_add(_cfg("R2", subjects=["r2"], num_replicas=2)))
    m.apply(_add(_cfg("R1", subjects=["r1"])))
    victim = m.stream("R2").peers[0]
    spare = ({"n1", "n2", "n3"} - set(m.stream("R2").peers)).pop()
    r1_before, r3_before = m.stream("R1"), m.stream("R3")
    effects: list[object] = []
    m.listener = effects.append
    res = m.apply(remove_server_entry(victim, seed=5, online=SERVERS, unique_tag=""))
    assert res == ServerRemoved(victim, ("R2", "R3"))
    assert victim not in m.peers
    assert set(m.stream("R2").peers) == {"n1", "n2", "n3"} - {victim}
    assert spare in m.stream("R2").peers
    # an R3 on three servers has nobody free: it runs on the other two
    assert m.stream("R3").peers == tuple(p for p in r3_before.peers if p != victim)
    assert m.stream("R1") == r1_before  # never re-created empty elsewhere
    assert [type(e).__name__ for e in effects] == ["StreamPeersChanged"] * 2
    assert _restored(m).snapshot() == m.snapshot()
    # gone now: a second remove is refused, and placement no longer uses it
    snap = m.snapshot()
    again = m.apply(remove_server_entry(victim, seed=5, online=SERVERS, unique_tag=""))
    assert again == SERVER_NOT_MEMBER
    assert m.snapshot() == snap
    m.apply(_add(_cfg("NEW", subjects=["new"], num_replicas=2)))
    assert victim not in m.stream("NEW").peers


# ---------------------------------------------------------------- a cluster of one


@pytest.mark.parametrize(
    "placement",
    [None, {"cluster": "elsewhere"}, {"tags": ["nope"]}, {"cluster": "x", "tags": ["a", "b"]}],
)
def test_solo_machine_places_every_stream_on_its_server(placement: Any) -> None:
    # a standalone nats-server ignores placement: the machine of a cluster of one too
    m = MetaMachine(solo="solo")
    cfg = _cfg("A") if placement is None else _cfg("A", placement=placement)
    got = m.apply(_add(cfg, online=["solo"]))
    assert isinstance(got, Assigned) and got.assignment.peers == ("solo",)
    assert got.assignment.config == cfg  # reported as asked


def test_solo_machine_decides_like_a_cluster() -> None:
    m = MetaMachine(solo="solo")
    assert isinstance(m.apply(_add(_cfg("A"))), Assigned)
    assert m.apply(_add(_cfg("A", subjects=["other"]))) == NAME_IN_USE
    assert m.apply(update_stream_entry(_cfg("B"), reply="r")) == STREAM_NOT_FOUND
    assert isinstance(m.apply(delete_stream_entry("A", reply="")), Removed)
    assert m.streams == {}


def test_origin_rides_with_the_effects() -> None:
    m = _machine()
    effects: list[object] = []
    m.listener = effects.append
    origin = origin_doc("$JS.API.STREAM.CREATE.A", b'{"name":"A"}', {"acc": "$G"})
    got = m.apply(_add(_cfg("A"), origin=origin))
    assert isinstance(got, Assigned)
    assert effects == [StreamAssigned(got.assignment, "_INBOX.r", created=True, origin=origin)]
    effects.clear()
    upd = origin_doc("$JS.API.STREAM.UPDATE.A", b"{}", None)
    m.apply(update_stream_entry(_cfg("A", max_msgs=5), reply="r", origin=upd))
    (eff,) = effects
    assert isinstance(eff, StreamUpdated) and eff.origin == upd and "client" not in upd


def test_bad_origin_is_a_bad_entry_and_changes_nothing() -> None:
    m = _machine()
    before = m.snapshot()
    raw = _raw(int(MetaOp.ADD_STREAM), config=_cfg("A"), group="g", created=1, seed=1,
               online=list(SERVERS), unique_tag="", reply="", origin=["not", "a", "map"])  # fmt: skip
    assert m.apply(raw) == BAD_ENTRY
    assert m.snapshot() == before


def _naive_overlap(config: Any, others: Any) -> bool:
    """Literal subjects only (enough for the machine's part: when it asks and what it does)."""
    mine = set(config.get("subjects") or [])
    return any(mine & set(o.get("subjects") or []) for o in others)


def test_apply_refuses_overlapping_subjects_decided_elsewhere() -> None:
    # two creates each checked by a different leader's view: the second loses in apply
    m = MetaMachine(overlap=_naive_overlap)
    for s in SERVERS:
        m.apply(peer_entry(PeerRecord(s, "C1", ())))
    assert isinstance(m.apply(_add({"name": "A", "subjects": ["x"]})), Assigned)
    before = m.snapshot()
    got = m.apply(_add({"name": "B", "subjects": ["y", "x"]}))
    assert isinstance(got, MetaError) and (got.code, got.err_code) == (400, 10065)
    assert m.snapshot() == before
    # an update that moves onto another's subject too; one that keeps its own is fine
    assert isinstance(m.apply(_add({"name": "B", "subjects": ["y"]})), Assigned)
    moved = m.apply(update_stream_entry({"name": "B", "subjects": ["x"]}, reply=""))
    assert isinstance(moved, MetaError) and moved.err_code == 10065
    kept = m.apply(update_stream_entry({"name": "B", "subjects": ["y"], "max_msgs": 3}, reply=""))
    assert isinstance(kept, Assigned)


# ---------------------------------------------------------------- scaling (STREAM.UPDATE num_replicas)


def _scaled(m: MetaMachine, name: str, replicas: int, **kw: Any) -> object:
    cfg = dict(m.stream(name).config, num_replicas=replicas)
    return m.apply(update_stream_entry(cfg, reply="_INBOX.s", scale=_scale(**kw)))


def test_scale_up_keeps_the_holder_first_and_places_joiners() -> None:
    m = _machine()
    first = m.apply(_add(_cfg("A")))
    assert isinstance(first, Assigned)
    holder = first.assignment.peers
    effects: list[object] = []
    m.listener = effects.append
    got = _scaled(m, "A", 3)
    assert isinstance(got, Assigned) and not got.created
    sa = got.assignment
    assert sa.peers[:1] == holder and len(set(sa.peers)) == 3
    assert sa.joiners == sa.peers[1:]
    # its first Raft group: the proposer's name; it runs a group from now on
    assert sa.group == "S-R3F-new" and sa.replicated and sa.raft is True
    assert sa.config["num_replicas"] == 3 and sa.created_ns == first.assignment.created_ns
    assert effects == [StreamUpdated(sa, first.assignment.config, "_INBOX.s", old_peers=holder)]
    assert effects[0].scaled  # type: ignore[attr-defined]


def test_scale_down_keeps_the_leader_and_the_group() -> None:
    m = _machine()
    got = m.apply(_add(_cfg("A", num_replicas=3)))
    assert isinstance(got, Assigned)
    r3 = got.assignment
    leader = r3.peers[2]
    down = _scaled(m, "A", 1, leader=leader)
    assert isinstance(down, Assigned)
    sa = down.assignment
    assert sa.peers == (leader,) and sa.group == r3.group and sa.joiners == ()
    assert sa.replicated  # a scaled-down stream keeps its group (its consumers are in it)
    # leader unknown (or not a member): the older peers stay
    up = _scaled(m, "A", 3)
    assert isinstance(up, Assigned) and up.assignment.group == r3.group  # no new group
    assert up.assignment.peers[0] == leader and set(up.assignment.joiners) == set(
        up.assignment.peers[1:]
    )
    two = _scaled(m, "A", 2, leader="n9")
    assert isinstance(two, Assigned) and two.assignment.peers == up.assignment.peers[:2]


def test_scale_without_the_scale_fields_is_10061_and_changes_nothing() -> None:
    m = _machine()
    m.apply(_add(_cfg("A")))
    before = m.snapshot()
    got = m.apply(update_stream_entry(_cfg("A", num_replicas=3), reply=""))
    assert got == REPLICAS_NOT_UPDATABLE
    assert isinstance(got, MetaError) and (got.code, got.err_code) == (400, 10061)
    assert m.snapshot() == before


@pytest.mark.parametrize(
    ("replicas", "online", "description"),
    [
        (5, SERVERS, "no suitable peers for placement"),
        (3, ("n1",), "no suitable peers for placement"),  # only the holder is up
    ],
)
def test_scale_beyond_the_servers_is_10005_and_changes_nothing(
    replicas: int, online: tuple[str, ...], description: str
) -> None:
    m = _machine()
    m.apply(_add(_cfg("A"), online=["n1"]))
    before = m.snapshot()
    got = _scaled(m, "A", replicas, online=online)
    assert isinstance(got, MetaError) and (got.code, got.err_code) == (400, 10005)
    assert got.description.startswith(description)
    assert m.snapshot() == before


def test_scale_honours_the_placement_tags() -> None:
    m = _machine(tags=("ssd",))  # every server tagged
    m.apply(peer_entry(PeerRecord("n5", "C1", ())))
    got = m.apply(_add(_cfg("A", placement={"tags": ["ssd"]})))
    assert isinstance(got, Assigned)
    up = _scaled(m, "A", 4)
    assert isinstance(up, Assigned) and "n5" not in up.assignment.peers


def test_a_scaled_assignment_survives_a_snapshot() -> None:
    m = _machine()
    m.apply(_add(_cfg("A")))
    _scaled(m, "A", 3)
    sa = m.stream("A")
    r = _restored(m)
    assert r.stream("A") == sa and r.snapshot() == m.snapshot()
    _scaled(m, "A", 1, leader=sa.peers[1])
    r = _restored(m)
    assert r.stream("A").replicated and r.stream("A").peers == (sa.peers[1],)


@settings(max_examples=300, deadline=None)
@given(entries_st)
def test_assignments_stay_well_formed_under_scaling(entries: list[bytes]) -> None:
    m = MetaMachine()
    for e in entries:
        before = dict(m.streams)
        got = m.apply(e)
        for name, sa in m.streams.items():
            assert len(set(sa.peers)) == len(sa.peers) >= 1
            assert set(sa.joiners) <= set(sa.peers)
            assert sa.replicated or len(sa.peers) == 1
            old = before.get(name)
            if old is None or not isinstance(got, Assigned) or old is sa:
                continue
            if len(sa.peers) > len(old.peers):  # grown: every holder kept, first
                assert sa.peers[: len(old.peers)] == old.peers and sa.replicated
            elif len(sa.peers) < len(old.peers):  # shrunk: a subset, same group
                assert set(sa.peers) <= set(old.peers) and sa.group == old.group
            if old.replicated:  # a Raft group, once there, stays (and keeps its name)
                assert sa.replicated and sa.group == old.group
