"""``Router.deliver_run_as`` writes exactly the bytes of one ``deliver_as`` per message."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from node.router import Router
from node.session import Subscription
from node.sublist import Sublist
from tests.node.test_router import FakeClient

_msg = st.tuples(
    st.sampled_from([b"orders.new", b"a"]),
    st.one_of(st.none(), st.just(b"$JS.ACK.S.C.1.2.3.4.0")),
    st.one_of(st.none(), st.just(b"NATS/1.0\r\nK: v\r\n\r\n")),
    st.sampled_from([b"", b"x", b"payload"]),
)


def _setup(headers: bool, extra: bool) -> tuple[Router, list[FakeClient]]:
    router = Router(Sublist(), random.Random(1))
    clients = [FakeClient()]
    clients[0].headers = headers
    router.sublist.insert(Subscription(clients[0], b"_INBOX.1", None, b"9"))
    if extra:  # a second subscriber: the per-message path
        clients.append(FakeClient())
        router.sublist.insert(Subscription(clients[1], b"_INBOX.*", None, b"3"))
    return router, clients


@settings(max_examples=100, deadline=None)
@given(msgs=st.lists(_msg, min_size=1, max_size=8), headers=st.booleans(), extra=st.booleans())
def test_run_equals_single_deliveries(
    msgs: list[tuple[bytes, bytes | None, bytes | None, bytes]], headers: bool, extra: bool
) -> None:
    one, one_clients = _setup(headers, extra)
    for m in msgs:
        one.deliver_as(b"_INBOX.1", *m)
    one.flush()
    run, run_clients = _setup(headers, extra)
    assert run.deliver_run_as(b"_INBOX.1", msgs) == len(msgs) * len(run_clients)
    run.flush()
    for a, b in zip(one_clients, run_clients, strict=True):
        assert a.written() == b.written()
        assert (a.out_msgs, a.out_bytes) == (b.out_msgs, b.out_bytes)
    assert (one.out_msgs, one.out_bytes) == (run.out_msgs, run.out_bytes)
