"""A route peer without ``lnocu`` (``node.route.Route`` interest bookkeeping, over fakes).

Its ``LS-`` names no leaf cluster, so nats-server keys all its interest by (account,
subject, queue) alone: the ``LS+`` of a subject from two of its leaf clusters (and its own
``RS+``) make one entry -- the first; later ones reweigh a queue group -- and one ``LS-``
(or ``RS-``) withdraws it whole, from the router and from the leaf links' view.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from node.protocol.events import ANY_ORIGIN, RSub, RUnsub
from node.route import Route


class _Sublist:
    def __init__(self) -> None:
        self.subs: list[Any] = []

    def insert(self, rs: Any) -> None:
        self.subs.append(rs)

    def remove(self, rs: Any) -> None:
        self.subs.remove(rs)


def _route(lnocu: bool) -> tuple[Route, Any, dict[tuple[bytes, bytes | None], int]]:
    """A registered route (no socket) and the leaf links' view of its interest."""
    view: dict[tuple[bytes, bytes | None], int] = {}

    def interest(acc: Any, subject: bytes, queue: bytes | None, delta: int, **_: Any) -> None:
        view[(subject, queue)] = view.get((subject, queue), 0) + delta

    router = SimpleNamespace(route_sublist=_Sublist(), gen=0)
    acc = SimpleNamespace(router=router)
    route = Route.__new__(Route)
    route.server = SimpleNamespace(  # type: ignore[assignment]
        accounts=SimpleNamespace(by_bytes={b"$G": acc}),
        leafnodes=SimpleNamespace(interest=interest),
    )
    route.registered = True
    route.rid = 1
    route.remote_subs, route.origin_subs, route.unknown_subs = {}, {}, {}
    route._proto = SimpleNamespace(ls_minus_origin=lnocu)  # type: ignore[assignment]
    return route, router, view


def _live(view: dict[Any, int]) -> dict[Any, int]:
    return {k: n for k, n in view.items() if n}


def test_one_ls_minus_withdraws_every_leaf_cluster_of_a_peer_without_lnocu() -> None:
    route, router, view = _route(lnocu=False)
    for ev in (
        RSub(b"$G", b"foo", None, 0, b"c1"),
        RSub(b"$G", b"foo", None, 0, b"c2"),
        RSub(b"$G", b"q.x", b"grp", 2, b"c1"),
        RSub(b"$G", b"q.x", b"grp", 3, b"c2"),  # reweighs the one entry: 3
        RSub(b"$G", b"bar", None, 1),
        RSub(b"$G", b"bar", None, 0, b"c1"),  # the RS+ entry stands for it
    ):
        route._on_rsub(ev)
    got = sorted((rs.subject, rs.queue, rs.weight, rs.origin) for rs in router.route_sublist.subs)
    assert got == [(b"bar", None, 1, b""), (b"foo", None, 0, b"c1"), (b"q.x", b"grp", 3, b"c1")]
    assert _live(view) == {(b"foo", None): 1, (b"q.x", b"grp"): 3, (b"bar", None): 1}
    route._on_runsub(RUnsub(b"$G", b"foo", None, ANY_ORIGIN))
    route._on_runsub(RUnsub(b"$G", b"q.x", b"grp", ANY_ORIGIN))
    route._on_runsub(RUnsub(b"$G", b"bar", None, ANY_ORIGIN))  # the RS+ one too
    assert router.route_sublist.subs == [] and _live(view) == {}
    assert route.remote_subs == {} and route.origin_subs == {}
    # and an RS- withdraws an entry an LS+ made
    route._on_rsub(RSub(b"$G", b"baz", None, 0, b"c1"))
    route._on_runsub(RUnsub(b"$G", b"baz", None))
    assert router.route_sublist.subs == [] and _live(view) == {}


def test_a_peer_with_lnocu_keeps_each_leaf_cluster_apart() -> None:
    route, router, view = _route(lnocu=True)
    route._on_rsub(RSub(b"$G", b"foo", None, 0, b"c1"))
    route._on_rsub(RSub(b"$G", b"foo", None, 0, b"c2"))
    route._on_rsub(RSub(b"$G", b"foo", None, 1))
    assert len(router.route_sublist.subs) == 3 and _live(view) == {(b"foo", None): 3}
    route._on_runsub(RUnsub(b"$G", b"foo", None, b"c1"))
    assert sorted(rs.origin for rs in router.route_sublist.subs) == [b"", b"c2"]
    assert _live(view) == {(b"foo", None): 2}
    route.drop_interest()
    assert router.route_sublist.subs == [] and _live(view) == {}


def test_a_reload_moving_an_account_tells_the_leaf_links() -> None:
    """An account a reload removes takes the peer's interest in it out of the leaf links'
    view (kept aside); added back, the interest returns to the router and the view."""
    route, router, view = _route(lnocu=True)
    acc = route.server.accounts.by_bytes[b"$G"]  # type: ignore[attr-defined]
    acc.name_bytes = b"$G"
    route._on_rsub(RSub(b"$G", b"foo", None, 1))
    route._on_rsub(RSub(b"$G", b"q.x", b"grp", 4))
    assert _live(view) == {(b"foo", None): 1, (b"q.x", b"grp"): 4}
    route.account_removed(acc)
    assert router.route_sublist.subs == [] and _live(view) == {}
    route.account_added(acc)
    got = sorted((rs.subject, rs.queue, rs.weight) for rs in router.route_sublist.subs)
    assert got == [(b"foo", None, 1), (b"q.x", b"grp", 4)]
    assert _live(view) == {(b"foo", None): 1, (b"q.x", b"grp"): 4}
