"""cluster.placement: the reference's placement outcomes (§2.2) and stepdown targets (§4.1).

The table rows are nats-server 2.15.1 observations on three nodes
(``reference/jetstream-cluster.md``): n1 ``[az:1, ssd]``, n2 ``[az:2]``,
n3 ``[az:3]``; for the ``unique_tag: "az:"`` runs n1 ``[az:1, ssd]``,
n2 ``[az:1]``, n3 ``[az:2]``.  The properties check ``place`` against an
independent, brute-force notion of which servers are eligible.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cluster.placement import (
    NoPlacement,
    PeerSpec,
    PlacementRequest,
    place,
    rank,
    stepdown_target,
)

NO = "no suitable peers for placement"


def topo(*, down: str = "", unique: bool = False) -> list[PeerSpec]:
    tags = (
        {"n1": ("az:1", "ssd"), "n2": ("az:1",), "n3": ("az:2",)}
        if unique
        else {"n1": ("az:1", "ssd"), "n2": ("az:2",), "n3": ("az:3",)}
    )
    return [PeerSpec(n, "C1", t, n != down, 0) for n, t in tags.items()]


def rng(seed: int = 7) -> random.Random:
    return random.Random(seed)


# -- §2.2, row by row ------------------------------------------------------------

PLACEMENT_ROWS = [
    # (request, topology kwargs, unique_tag, expected names or description)
    (PlacementRequest(1, "C1", ("ssd",)), {}, "", ("n1",)),
    (PlacementRequest(1, None, ("SSD",)), {}, "", ("n1",)),
    (PlacementRequest(1, None, ("az:1", "ssd")), {}, "", ("n1",)),
    (PlacementRequest(3, None, ("ssd",)), {}, "", f"{NO}, tags not matched ['ssd']"),
    (PlacementRequest(2, None, ("az:2",)), {}, "", f"{NO}, tags not matched ['az:2']"),
    (PlacementRequest(1, None, ("nvme",)), {}, "", f"{NO}, tags not matched ['nvme']"),
    (PlacementRequest(1, "C9"), {}, "", NO),
    (PlacementRequest(5), {}, "", NO),
    (PlacementRequest(3), {"unique": True}, "az:", f"{NO}, server tag not unique"),
    (
        PlacementRequest(2),
        {"unique": True, "down": "n3"},
        "az:",
        f"{NO}, server tag not unique, miscellaneous issue",
    ),
    (
        PlacementRequest(1, None, ("az:2",)),
        {"down": "n2"},
        "",
        f"{NO}, miscellaneous issue, tags not matched ['az:2']",
    ),
]


@pytest.mark.parametrize(("req", "kw", "unique", "expected"), PLACEMENT_ROWS)
def test_reference_placement_table(
    req: PlacementRequest, kw: dict[str, object], unique: str, expected: object
) -> None:
    for seed in range(20):
        got = place(req, topo(**kw), unique_tag=unique, rng=rng(seed))  # type: ignore[arg-type]
        if isinstance(expected, str):
            assert got == NoPlacement(expected)
        else:
            assert got == expected


def test_unique_tag_spreads_over_az_values() -> None:
    # R2 without tags went to n3 (az:2) + one az:1 server.
    for seed in range(30):
        got = place(PlacementRequest(2), topo(unique=True), unique_tag="az:", rng=rng(seed))
        assert isinstance(got, tuple)
        assert "n3" in got and len(set(got)) == 2


def test_placement_tags_pinning_the_unique_dimension_disable_uniqueness() -> None:
    # R2 with placement.tags ["az:1"] was placed on n1 + n2, both az:1.
    for seed in range(10):
        got = place(
            PlacementRequest(2, None, ("az:1",)), topo(unique=True), unique_tag="az:", rng=rng(seed)
        )
        assert isinstance(got, tuple) and set(got) == {"n1", "n2"}


def test_unique_tag_with_one_server_down_elsewhere_still_places() -> None:
    got = place(PlacementRequest(2), topo(unique=True, down="n1"), unique_tag="az:", rng=rng())
    assert isinstance(got, tuple) and set(got) == {"n2", "n3"}


def test_servers_without_the_unique_prefix_are_passed_over() -> None:
    peers = [PeerSpec("a", "C1", ("az:1",), True, 0), PeerSpec("b", "C1", (), True, 0)]
    assert place(PlacementRequest(2), peers, unique_tag="az:", rng=rng()) == NoPlacement(
        f"{NO}, server tag not unique"
    )


def test_excluded_tags_and_excluded_servers() -> None:
    assert place(PlacementRequest(2, None, ("!ssd",)), topo(), unique_tag="", rng=rng()) in (
        ("n2", "n3"),
        ("n3", "n2"),
    )
    assert place(PlacementRequest(3, None, ("!ssd",)), topo(), unique_tag="", rng=rng()) == (
        NoPlacement(f"{NO}, tags excluded ['ssd']")
    )
    peers = [*topo()[:2], PeerSpec("n3", "C1", ("az:3", "!jetstream"), True, 0)]
    assert place(PlacementRequest(3), peers, unique_tag="", rng=rng()) == NoPlacement(
        f"{NO}, exclude tag set"
    )


def test_several_missing_tags_follow_the_request_order() -> None:
    got = place(PlacementRequest(1, None, ("zz", "az:9")), topo(), unique_tag="", rng=rng())
    # each server fails on the first missing tag only: 'zz'
    assert got == NoPlacement(f"{NO}, tags not matched ['zz']")
    only_x = [PeerSpec("a", "C1", ("x",), True, 0)]
    got = place(PlacementRequest(1, None, ("y", "x")), only_x, unique_tag="", rng=rng())
    assert got == NoPlacement(f"{NO}, tags not matched ['y']")
    got = place(
        PlacementRequest(1, None, ("x", "y")),
        [PeerSpec("a", "C1", ("y",), True, 0), PeerSpec("b", "C1", ("x",), True, 0)],
        unique_tag="",
        rng=rng(),
    )
    assert got == NoPlacement(f"{NO}, tags not matched ['x', 'y']")


def test_no_servers_at_all() -> None:
    assert place(PlacementRequest(1), [], unique_tag="", rng=rng()) == NoPlacement(
        f"{NO}, jetstream not enabled in cluster"
    )


def test_replicas_below_one_is_the_callers_bug() -> None:
    with pytest.raises(ValueError):
        place(PlacementRequest(0), topo(), unique_tag="", rng=rng())


def test_least_loaded_first_and_first_is_the_preferred_leader() -> None:
    peers = [
        PeerSpec("n1", "C1", (), True, 5),
        PeerSpec("n2", "C1", (), True, 1),
        PeerSpec("n3", "C1", (), True, 3),
    ]
    assert place(PlacementRequest(3), peers, unique_tag="", rng=rng()) == ("n2", "n3", "n1")
    assert place(PlacementRequest(1), peers, unique_tag="", rng=rng()) == ("n2",)


def test_successive_creates_spread_over_the_nodes() -> None:
    # The caller counts each new asset into its peers' load.
    for seed in range(10):
        r = rng(seed)
        load = Counter({"n1": 0, "n2": 0, "n3": 0})
        leaders = []
        for _ in range(3):
            peers = [PeerSpec(n, "C1", (), True, load[n]) for n in sorted(load)]
            got = place(PlacementRequest(1), peers, unique_tag="", rng=r)
            assert isinstance(got, tuple)
            leaders.append(got[0])
            load[got[0]] += 1
        assert sorted(leaders) == ["n1", "n2", "n3"]


def test_ties_are_broken_by_the_rng() -> None:
    firsts = {
        place(PlacementRequest(1), topo(), unique_tag="", rng=rng(seed))  # type: ignore[index]
        for seed in range(40)
    }
    assert len(firsts) == 3


# -- §4.1 / §4.2 stepdown --------------------------------------------------------


def test_stepdown_reference_table() -> None:
    members = topo()
    kw: dict[str, object] = {"preferred": None, "cluster": None, "tags": ()}

    def sd(**over: object) -> object:
        return stepdown_target("n1", members, **{**kw, **over}, rng=rng())  # type: ignore[arg-type]

    assert sd(preferred="n1") == NoPlacement('preferred server "n1" is already leader')
    assert sd(preferred="n9") == NoPlacement('preferred server "n9" not known')
    assert sd(tags=("ssd",)) == NoPlacement("no replacement peer connected")
    assert sd(tags=("nvme",)) == NoPlacement("no replacement peer connected")
    assert sd(cluster="C9") == NoPlacement("no replacement peer connected")
    assert sd(tags=("az:3",)) == "n3"
    assert sd(tags=("AZ:2",)) == "n2"
    assert sd(preferred="n2") == "n2"
    assert sd() is None  # no body: any current peer
    assert sd(cluster="C1") in ("n2", "n3")


def test_stepdown_skips_offline_members_but_preferred_is_taken_as_asked() -> None:
    members = topo(down="n3")
    got = stepdown_target("n1", members, preferred=None, cluster="C1", tags=(), rng=rng())
    assert got == "n2"
    got = stepdown_target("n1", members, preferred=None, cluster=None, tags=("az:3",), rng=rng())
    assert got == NoPlacement("no replacement peer connected")
    got = stepdown_target("n1", members, preferred="n3", cluster=None, tags=(), rng=rng())
    assert got == "n3"


# -- properties --------------------------------------------------------------------

TAG_POOL = ["az:1", "az:2", "az:3", "AZ:3", "ssd", "SSD", "gpu"]
REQ_TAGS = ["ssd", "SSD", "az:1", "gpu", "!ssd", "!gpu", "nvme"]


@st.composite
def peer_sets(draw: st.DrawFn) -> list[PeerSpec]:
    n = draw(st.integers(0, 7))
    return [
        PeerSpec(
            f"s{i}",
            draw(st.sampled_from(["C1", "C1", "C2"])),
            tuple(draw(st.lists(st.sampled_from(TAG_POOL), max_size=3, unique=True))),
            draw(st.booleans()) or draw(st.booleans()),
            draw(st.integers(0, 4)),
        )
        for i in range(n)
    ]


requests = st.builds(
    PlacementRequest,
    st.integers(1, 5),
    st.sampled_from([None, "C1", "C2", "C9"]),
    st.lists(st.sampled_from(REQ_TAGS), max_size=2, unique=True).map(tuple),
)
unique_tags = st.sampled_from(["", "az:", "AZ:"])


def eligible(req: PlacementRequest, p: PeerSpec) -> bool:
    """Brute force: online, right cluster, every request tag satisfied."""
    lower = {t.lower() for t in p.tags}
    if not p.online or (req.cluster and p.cluster != req.cluster) or "!jetstream" in lower:
        return False
    for t in req.tags:
        if t.startswith("!") and t[1:].lower() in lower:
            return False
        if not t.startswith("!") and t.lower() not in lower:
            return False
    return True


def unique_value(p: PeerSpec, prefix: str) -> str | None:
    return next((t.lower() for t in p.tags if t.lower().startswith(prefix.lower())), None)


def enforced(req: PlacementRequest, prefix: str) -> bool:
    return bool(prefix) and not any(
        t.lstrip("!").lower().startswith(prefix.lower()) for t in req.tags
    )


@settings(max_examples=400, deadline=None)
@given(requests, peer_sets(), unique_tags, st.integers(0, 2**32))
def test_placement_is_sound_complete_and_least_loaded(
    req: PlacementRequest, peers: list[PeerSpec], prefix: str, seed: int
) -> None:
    got = place(req, peers, unique_tag=prefix, rng=random.Random(seed))
    ok = [p for p in peers if eligible(req, p)]
    if enforced(req, prefix):
        values = {unique_value(p, prefix) for p in ok} - {None}
        feasible = len(values) >= req.replicas
    else:
        feasible = len(ok) >= req.replicas
    if isinstance(got, NoPlacement):
        assert not feasible, (got, ok)
        assert got.description.startswith(NO)
        return
    assert feasible
    by_name = {p.name: p for p in peers}
    chosen = [by_name[n] for n in got]
    assert len(got) == req.replicas == len(set(got))
    assert all(eligible(req, p) for p in chosen)  # tags, cluster, never offline
    if enforced(req, prefix):
        vals = [unique_value(p, prefix) for p in chosen]
        assert None not in vals and len(set(vals)) == len(vals)
    else:
        rest = [p for p in ok if p.name not in got]
        assert not rest or max(p.load for p in chosen) <= min(p.load for p in rest)
    assert [p.load for p in chosen] == sorted(p.load for p in chosen)


@settings(max_examples=200, deadline=None)
@given(requests, peer_sets(), unique_tags, st.integers(0, 2**32), st.randoms())
def test_same_seed_same_answer_whatever_the_input_order(
    req: PlacementRequest, peers: list[PeerSpec], prefix: str, seed: int, shuffler: random.Random
) -> None:
    first = place(req, peers, unique_tag=prefix, rng=random.Random(seed))
    shuffled = list(peers)
    shuffler.shuffle(shuffled)
    assert place(req, shuffled, unique_tag=prefix, rng=random.Random(seed)) == first


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 6), st.integers(1, 3), st.integers(0, 2**32))
def test_load_spreads_evenly_over_many_creates(n: int, replicas: int, seed: int) -> None:
    r = random.Random(seed)
    load = dict.fromkeys((f"s{i}" for i in range(n)), 0)
    for _ in range(3 * n):
        peers = [PeerSpec(name, "C1", (), True, ld) for name, ld in load.items()]
        got = place(PlacementRequest(replicas), peers, unique_tag="", rng=r)
        if replicas > n:
            assert got == NoPlacement(NO)
            return
        assert isinstance(got, tuple)
        for name in got:
            load[name] += 1
        assert max(load.values()) - min(load.values()) <= 1


@settings(max_examples=200, deadline=None)
@given(peer_sets(), st.integers(0, 2**32))
def test_rank_is_a_permutation_sorted_by_load(peers: list[PeerSpec], seed: int) -> None:
    ranked = rank(peers, random.Random(seed))
    assert sorted(ranked, key=lambda p: p.name) == sorted(peers, key=lambda p: p.name)
    assert [p.load for p in ranked] == sorted(p.load for p in peers)


@settings(max_examples=200, deadline=None)
@given(
    peer_sets(),
    st.sampled_from([None, "C1", "C9"]),
    st.lists(st.sampled_from(["ssd", "az:1", "AZ:3"]), max_size=2).map(tuple),
    st.integers(0, 2**32),
)
def test_stepdown_target_never_picks_the_leader_or_an_offline_peer(
    peers: list[PeerSpec], cluster: str | None, tags: tuple[str, ...], seed: int
) -> None:
    if not peers:
        return
    leader = peers[0].name
    got = stepdown_target(
        leader, peers, preferred=None, cluster=cluster, tags=tags, rng=random.Random(seed)
    )
    again = stepdown_target(
        leader, peers, preferred=None, cluster=cluster, tags=tags, rng=random.Random(seed)
    )
    assert got == again
    if got is None:
        assert not cluster and not tags
    elif isinstance(got, str):
        p = next(p for p in peers if p.name == got)
        assert p.online and p.name != leader
        assert not cluster or p.cluster == cluster
        assert all(any(t.lower() == x.lower() for x in p.tags) for t in tags)
    else:
        assert got == NoPlacement("no replacement peer connected")
