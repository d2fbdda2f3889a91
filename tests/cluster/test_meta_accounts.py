"""The meta state machine with several accounts: assignments keyed by (account, name).

Theory of operation: two accounts' streams of one name are two assignments;
every op names its account and touches only that account's stream; subjects
overlap only within an account; snapshots carry the account, and a snapshot or
an entry written before accounts were carried belongs to the machine's
``default_account``.  Hypothesis interleaves two accounts' creates, updates,
deletes and peer removals and checks that each account's assignments are
exactly those a machine fed only that account's entries holds (placement
aside: servers are shared, so load differs), and that replicas agree.
"""

from __future__ import annotations

import io
from typing import Any

import cbor2
from hypothesis import given, settings
from hypothesis import strategies as st

from cluster.meta.entries import (
    ACCOUNT_NOT_ENABLED,
    NAME_IN_USE,
    STREAM_NOT_FOUND,
    SUBJECT_OVERLAP,
    Assigned,
    MetaError,
    PeerRecord,
    Removed,
    StreamAssigned,
    StreamAssignment,
    StreamRemoved,
    add_stream_entry,
    delete_stream_entry,
    peer_entry,
    purge_account_entry,
    remove_peer_entry,
    update_stream_entry,
)
from cluster.meta.entries import (
    Effect as MetaEffect,
)
from cluster.meta.machine import (
    MetaMachine,
)
from cluster.naming import fresh_group_name

SERVERS = ("n1", "n2", "n3")
ACCOUNTS = ("A", "B")


def _machine(default_account: str = "$G") -> MetaMachine:
    m = MetaMachine(default_account=default_account)
    for s in SERVERS:
        m.apply(peer_entry(PeerRecord(s, "C1", ())))
    return m


def _cfg(name: str, subject: str = "orders.>", **kw: Any) -> dict[str, Any]:
    return {"name": name, "subjects": [subject], **kw}


def _add(cfg: dict[str, Any], account: str | None, group: str = "S-R1F-x") -> bytes:
    return add_stream_entry(
        cfg,
        group=group,
        created_ns=1,
        seed=3,
        online=SERVERS,
        unique_tag="",
        reply="_INBOX.r",
        account=account,
    )


def _overlap(config: Any, others: Any) -> bool:
    subs = set(config.get("subjects") or [])
    return any(subs & set(o.get("subjects") or []) for o in others)


def test_same_name_in_two_accounts() -> None:
    m = _machine()
    m.overlap = _overlap
    a = m.apply(_add(_cfg("ORDERS", num_replicas=3), "A", "S-R3F-a"))
    b = m.apply(_add(_cfg("ORDERS"), "B", "S-R1F-b"))
    assert isinstance(a, Assigned) and a.created and a.assignment.account == "A"
    assert isinstance(b, Assigned) and b.created and b.assignment.account == "B"
    assert m.stream("ORDERS", "A") == a.assignment and m.stream("ORDERS", "B") == b.assignment
    assert m.stream("ORDERS") is None  # the default account ($G) has none
    assert list(m.configs("A")) == ["ORDERS"] and m.configs("A")["ORDERS"].num_replicas == 3
    assert m.configs("B")["ORDERS"].num_replicas in (0, 1)  # not given: R1
    assert m.accounts() == ["A", "B"] and m.groups() == {"S-R3F-a", "S-R1F-b"}
    # a different config under the name is refused in the same account only
    assert m.apply(_add(_cfg("ORDERS", "x.>"), "A")) == NAME_IN_USE
    # the same subjects in another account do not overlap; in the same account they do
    assert isinstance(m.apply(_add(_cfg("OTHER"), "C", "S-R1F-c")), Assigned)
    assert m.apply(_add(_cfg("OTHER"), "A", "S-R1F-d")) == SUBJECT_OVERLAP


def test_ops_touch_only_their_account() -> None:
    m = _machine()
    effects: list[MetaEffect] = []
    m.listener = effects.append
    m.apply(_add(_cfg("ORDERS", num_replicas=3), "A", "S-R3F-a"))
    m.apply(_add(_cfg("ORDERS", num_replicas=3), "B", "S-R3F-b"))
    b_before = m.stream("ORDERS", "B")
    upd = update_stream_entry(_cfg("ORDERS", num_replicas=3, max_msgs=5), reply="", account="A")
    assert isinstance(m.apply(upd), Assigned)
    assert m.stream("ORDERS", "A").config["max_msgs"] == 5  # type: ignore[union-attr]
    assert m.stream("ORDERS", "B") is b_before
    victim = b_before.peers[0]  # type: ignore[union-attr]
    # only 3 servers: no replacement, but the op reaches B's stream, not A's
    rm = remove_peer_entry("ORDERS", victim, seed=1, online=SERVERS, unique_tag="", account="B")
    m.apply(rm)
    assert m.stream("ORDERS", "A").config["max_msgs"] == 5  # type: ignore[union-attr]
    got = m.apply(delete_stream_entry("ORDERS", reply="", account="B"))
    assert isinstance(got, Removed) and got.assignment.account == "B"
    assert m.stream("ORDERS", "B") is None and m.stream("ORDERS", "A") is not None
    assert m.apply(delete_stream_entry("ORDERS", reply="", account="B")) == STREAM_NOT_FOUND
    assert [e.assignment.account for e in effects if isinstance(e, StreamAssigned)] == ["A", "B"]
    assert [e.assignment.account for e in effects if isinstance(e, StreamRemoved)] == ["B"]


def test_placement_avoids_servers_lacking_the_accounts_jetstream() -> None:
    """n3 runs JetStream in A only: B's streams go to n1 and n2; an R3 of B needs n3 and
    is refused with nats-server's 503 10039 (it places there and the create fails);
    a peer that never told its accounts (an older registration) takes any account."""
    m = _machine()
    m.apply(peer_entry(PeerRecord("n3", "C1", (), ("A",))))
    for i in range(6):
        got = m.apply(_add(_cfg(f"B{i}", f"b{i}"), "B", f"S-R1F-b{i}"))
        assert isinstance(got, Assigned) and got.assignment.peers != ("n3",)
    assert m.apply(_add(_cfg("R3", "r3", num_replicas=3), "B", "S-R3F-b")) == ACCOUNT_NOT_ENABLED
    assert ACCOUNT_NOT_ENABLED.code == 503 and ACCOUNT_NOT_ENABLED.err_code == 10039
    got = m.apply(_add(_cfg("R3", "r3", num_replicas=3), "A", "S-R3F-a"))
    assert isinstance(got, Assigned) and set(got.assignment.peers) == set(SERVERS)
    # an R4 is short of servers whatever the accounts: 10005 as before
    four = m.apply(_add(_cfg("R4", "r4", num_replicas=4), "B", "S-R4F-b"))
    assert isinstance(four, MetaError) and four.err_code == 10005
    # the accounts survive a snapshot
    again = _machine()
    again.restore(io.BytesIO(m.snapshot()))
    assert again.peers["n3"].accounts == ("A",) and again.peers["n1"].accounts is None


def test_account_purge_is_replicated_state() -> None:
    """ACCOUNT.PURGE marks the account's streams; each delete takes one off; what is left
    survives a snapshot, so a new meta leader can finish the purge."""
    m = _machine()
    for i in range(3):
        m.apply(_add(_cfg(f"S{i}", f"s{i}"), "B", f"S-R1F-b{i}"))
    m.apply(_add(_cfg("KEEP", "k"), "A", "S-R1F-a"))
    assert m.apply(purge_account_entry("B")) == ("S0", "S1", "S2")
    assert m.apply(purge_account_entry("NONE")) == () and "NONE" not in m.purging
    m.apply(delete_stream_entry("S0", reply="", account="B"))
    again = _machine()
    again.restore(io.BytesIO(m.snapshot()))
    assert again.purging == {"B": {"S1", "S2"}}
    for name in ("S1", "S2"):
        again.apply(delete_stream_entry(name, reply="", account="B"))
    assert again.purging == {} and list(again.configs("A")) == ["KEEP"]


def test_snapshot_carries_the_account() -> None:
    m = _machine()
    m.apply(_add(_cfg("ORDERS"), "A", "S-R1F-a"))
    m.apply(_add(_cfg("ORDERS"), "B", "S-R1F-b"))
    r = MetaMachine()
    r.restore(io.BytesIO(m.snapshot()))
    assert r.streams == m.streams and r.snapshot() == m.snapshot()
    assert set(r.streams) == {("A", "ORDERS"), ("B", "ORDERS")}


def test_state_from_before_accounts_is_the_default_accounts() -> None:
    """A snapshot and entries written before accounts were carried (no ``account``)
    come up as the default account's (the cluster's single JetStream account)."""
    sa = StreamAssignment("ORDERS", _cfg("ORDERS"), "S-R1F-old", ("n1",), 5)
    old_doc = {k: v for k, v in sa.to_doc().items() if k != "account"}
    snap = cbor2.dumps(
        {"v": 1, "peers": [[s, "C1", []] for s in SERVERS], "streams": [old_doc]},
        canonical=True,
    )
    m = MetaMachine(default_account="APP")
    m.restore(io.BytesIO(snap))
    assert list(m.streams) == [("APP", "ORDERS")]
    assert m.stream("ORDERS") == m.stream("ORDERS", "APP")
    old_delete = cbor2.dumps({"v": 1, "op": 4, "name": "ORDERS", "reply": ""}, canonical=True)
    assert isinstance(m.apply(old_delete), Removed) and m.streams == {}
    old_add = _add(_cfg("NEW"), None)
    assert isinstance(m.apply(old_add), Assigned) and list(m.streams) == [("APP", "NEW")]


def test_fresh_group_name_avoids_names_in_use() -> None:
    class Rigged:
        def __init__(self) -> None:
            self.n = 0

        def choice(self, alphabet: str) -> str:
            self.n += 1
            return "a" if self.n <= 8 else "b"  # the first draw is in use, the next is not

    name = fresh_group_name("S", 3, True, Rigged(), {"S-R3F-aaaaaaaa"})  # type: ignore[arg-type]
    assert name == "S-R3F-bbbbbbbb"


# ---------------------------------------------------------------- property

ops_st = st.lists(
    st.tuples(
        st.sampled_from(ACCOUNTS),
        st.sampled_from(("add", "add", "update", "delete")),
        st.sampled_from(("S1", "S2")),
        st.sampled_from((1, 3)),
        st.sampled_from(("a", "b")),
    ),
    max_size=30,
)


def _entry(i: int, acc: str, kind: str, name: str, replicas: int, subj: str) -> bytes:
    cfg = _cfg(name, f"{name}.{subj}", num_replicas=replicas)
    if kind == "add":
        return _add(cfg, acc, f"S-R{replicas}F-{acc}{i}")
    if kind == "update":
        return update_stream_entry(cfg, reply="", account=acc)
    return delete_stream_entry(name, reply="", account=acc)


@settings(max_examples=150, deadline=None)
@given(ops_st)
def test_each_account_as_if_alone(ops: list[tuple[str, str, str, int, str]]) -> None:
    """Interleaved, each account's assignments (config, group) and results are those
    it gets alone; two replicas fed the same entries agree byte for byte."""
    shared, replica = _machine(), _machine()
    alone = {a: _machine() for a in ACCOUNTS}
    for i, (acc, kind, name, replicas, subj) in enumerate(ops):
        e = _entry(i, acc, kind, name, replicas, subj)
        got, want = shared.apply(e), alone[acc].apply(e)
        replica.apply(e)
        assert type(got) is type(want)
        if not isinstance(got, Assigned | Removed):
            assert got == want
    assert shared.snapshot() == replica.snapshot()
    for acc in ACCOUNTS:
        mine = {n: (sa.config, sa.group) for n, sa in shared.account_streams(acc).items()}
        want_ = {n: (sa.config, sa.group) for n, sa in alone[acc].account_streams(acc).items()}
        assert mine == want_
    assert set(shared.streams) == {k for a in ACCOUNTS for k in alone[a].streams}
