"""Accounts isolate core NATS: real processes, nats-py, trijet and nats-server side by side.

Each scenario tries to break isolation: a client of A subscribes to everything, publishes into
subjects B listens on, answers B's requests and writes into B's inbox; none of it may reach B
(and vice versa), while the same traffic inside one account flows as usual.  "Nothing arrived"
is established without waiting: after the foreign publish has been processed (the publisher's
flush returned), the watcher publishes a marker to itself; a watcher on ``>`` receives the
marker first and only if nothing from the other account was delivered before it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import nats.errors
import nats.js.errors
import pytest

from node.launcher import plan_cluster
from node.sysreq import SUBS_PER_ACCOUNT
from tests.integration.test_cluster_core import READY_S, Cluster, wait_interest, wait_mesh
from tests.support import RawClient, ServerProcess, reference_binary
from tests.support.aio import ErrorLog, run
from tests.support.cluster import get_json, start_cluster

ACCOUNTS_CONF = """
accounts {
  A: { users: [{user: a, password: a}, {user: a2, password: a2}] }
  B: { users: [{user: b, password: b}] }
  SYS: { users: [{user: sys, password: sys}] }
}
authorization { users: [{user: g, password: g}] }
system_account: SYS
no_auth_user: a2
"""

WAIT_S = 5.0


async def connect(url: str, user: str | None = None, **kw: Any) -> nats.NATS:
    kw.setdefault("allow_reconnect", False)
    kw.setdefault("max_reconnect_attempts", 0)
    kw.setdefault("connect_timeout", 5)
    kw.setdefault("error_cb", ErrorLog().cb)
    if user is not None:
        kw["user"], kw["password"] = user, user
    return await nats.connect(url, **kw)


async def nothing_but_marker(nc: nats.NATS, sub: Any, marker: str) -> None:
    """``sub`` (on ``>`` or covering ``marker``) has received nothing before ``marker``
    but its own connection's interest probes (``wait_interest``: tags of A start with ``a``,
    answered ``ok``)."""
    await nc.publish(marker, b"marker")
    msg = await sub.next_msg(timeout=WAIT_S)
    while _probe(msg):
        msg = await sub.next_msg(timeout=WAIT_S)
    assert msg.subject == marker, f"leaked across accounts: {msg.subject} {msg.data!r}"


async def synced(*ncs: nats.NATS) -> None:
    """Wait until the server has applied everything each client has sent so far.

    ``flush()`` alone does not prove it: nats-py writes its PING straight to the socket
    while SUB, UNSUB and PUB wait in the client's pending buffer for its flusher task, so
    the PONG may come back before an earlier SUB reached the server and another client's
    publish may overtake it (seen as a spurious no-responders in ``test_service_imports``
    about once in 15 runs under load; the server handles each connection's bytes in
    order).  So the pending buffer is written out first (nats-py's own forced flush, which
    waits for its flusher), then the PING follows it.  No message is sent: watchers on
    ``>`` see nothing of it.
    """
    for nc in ncs:
        await nc._flush_pending(force_flush=True)
        await nc.flush()


def _probe(msg: Any) -> bool:
    return msg.subject.startswith("ready.a") or (
        msg.subject.startswith("_INBOX.") and msg.data == b"ok"
    )


def test_pubsub_isolated(start_server: Any, server_kind: str) -> None:
    sp: ServerProcess = start_server(server_kind, config=ACCOUNTS_CONF)

    async def main() -> None:
        a = await connect(sp.url, "a")
        a2 = await connect(sp.url)  # no_auth_user: account A
        b = await connect(sp.url, "b")
        g = await connect(sp.url, "g")  # $G
        try:
            a_all = await a.subscribe(">")
            b_all = await b.subscribe(">")
            g_all = await g.subscribe(">")
            a2_foo = await a2.subscribe("foo")
            await synced(a)
            await synced(b)
            await synced(g)
            await synced(a2)
            await b.publish("foo", b"from-b")
            await synced(b)
            assert (await b_all.next_msg(timeout=WAIT_S)).data == b"from-b"
            await nothing_but_marker(a, a_all, "marker.a")
            await nothing_but_marker(g, g_all, "marker.g")
            # the same subject inside A flows between A's connections
            await a2.publish("foo", b"from-a2")
            assert (await a2_foo.next_msg(timeout=WAIT_S)).data == b"from-a2"
            msg = await a_all.next_msg(timeout=WAIT_S)
            assert (msg.subject, msg.data) == ("foo", b"from-a2")
            await nothing_but_marker(b, b_all, "marker.b")
            await g.publish("foo", b"from-g")
            await synced(g)
            assert (await g_all.next_msg(timeout=WAIT_S)).data == b"from-g"
            await nothing_but_marker(a, a_all, "marker.a2")
            await nothing_but_marker(b, b_all, "marker.b2")
        finally:
            for nc in (a, a2, b, g):
                await nc.close()

    run(main)


def test_queue_groups_isolated(start_server: Any, server_kind: str) -> None:
    sp: ServerProcess = start_server(server_kind, config=ACCOUNTS_CONF)

    async def main() -> None:
        a = await connect(sp.url, "a")
        b = await connect(sp.url, "b")
        try:
            qa = await a.subscribe("work", queue="g")
            qb = await b.subscribe("work", queue="g")
            await synced(a)
            await synced(b)
            for i in range(20):
                await a.publish("work", b"%d" % i)
            await synced(a)
            got = [(await qa.next_msg(timeout=WAIT_S)).data for _ in range(20)]
            assert got == [b"%d" % i for i in range(20)]
            b_probe = await b.subscribe("probe")
            await synced(b)
            await b.publish("probe", b"x")
            assert (await b_probe.next_msg(timeout=WAIT_S)).data == b"x"
            assert qb.pending_msgs == 0
            await b.publish("work", b"b")
            assert (await qb.next_msg(timeout=WAIT_S)).data == b"b"
        finally:
            await a.close()
            await b.close()

    run(main)


def test_request_reply_isolated(start_server: Any, server_kind: str) -> None:
    sp: ServerProcess = start_server(server_kind, config=ACCOUNTS_CONF)

    async def main() -> None:
        a = await connect(sp.url, "a")
        b = await connect(sp.url, "b")
        try:

            async def answer_b(msg: Any) -> None:
                await b.publish(msg.reply, b"b-answer")

            await b.subscribe("svc", cb=answer_b)
            await synced(b)
            # A sees no responder for B's service
            with pytest.raises(nats.errors.NoRespondersError):
                await a.request("svc", b"?", timeout=WAIT_S)
            assert (await b.request("svc", b"?", timeout=WAIT_S)).data == b"b-answer"

            # A answers into B's inbox and publishes on B's service subject: neither arrives
            b_inbox = await b.subscribe("_INBOX.b.*")
            a_watch = await a.subscribe(">")
            await synced(b)
            await synced(a)
            await a.publish("_INBOX.b.1", b"forged")
            await a.publish("svc", b"from-a", reply="_INBOX.b.2")
            await synced(a)
            msg = await a_watch.next_msg(timeout=WAIT_S)  # A sees its own publishes only
            assert msg.subject == "_INBOX.b.1"
            msg = await a_watch.next_msg(timeout=WAIT_S)
            assert msg.subject == "svc"
            await nothing_but_marker(b, b_inbox, "_INBOX.b.marker")
        finally:
            await a.close()
            await b.close()

    run(main)


def test_system_account_isolated(start_server: Any, server_kind: str) -> None:
    """A system-account user is isolated like any account."""
    sp: ServerProcess = start_server(server_kind, config=ACCOUNTS_CONF)

    async def main() -> None:
        s = await connect(sp.url, "sys")
        a = await connect(sp.url, "a")
        try:
            s_sub = await s.subscribe("app.>")
            await synced(s)
            await a.publish("app.x", b"x")
            await synced(a)
            await nothing_but_marker(s, s_sub, "app.marker")
        finally:
            await s.close()
            await a.close()

    run(main)


# -- three nodes: routes carry the account ----------------------------------------------------


@pytest.fixture(params=["trijet", "reference"])
def acc_cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cluster]:
    kind = request.param
    if kind == "reference" and reference_binary() is None:
        pytest.skip("reference nats-server not installed")
    plans = plan_cluster(3, tmp_path / "data", jetstream=False, extra=ACCOUNTS_CONF)
    c = Cluster(kind, tmp_path, plans)
    try:
        for i in range(3):
            c.start(i)
        run(lambda: wait_mesh(c), timeout=READY_S + 5)  # account A (no_auth_user)
        yield c
    finally:
        c.stop_all()


def route_diag(c: Cluster) -> str:
    """Each node's routes and the interest they carry, and its log's route lines: the
    message of a failed delivery across the cluster (CI shows only that)."""
    out = []
    for i, p in enumerate(c.plans):
        doc = get_json(f"http://127.0.0.1:{p.http_port}/routez?subs=detail") or {}
        routes = [
            (
                r.get("rid"),
                r.get("remote_name"),
                r.get("did_solicit"),
                f"in={r.get('in_msgs')} out={r.get('out_msgs')}",
                [
                    str(d.get("sid"))
                    for d in r.get("subscriptions_list_detail") or []
                    if "$SYS" not in str(d.get("sid")) and " SYS " not in str(d.get("sid"))
                ],
            )
            for r in doc.get("routes", [])
        ]
        conns = get_json(f"http://127.0.0.1:{p.http_port}/connz?subs=1") or {}
        clients = [
            (
                cn.get("cid"),
                cn.get("account"),
                f"in={cn.get('in_msgs')} out={cn.get('out_msgs')} pend={cn.get('pending_bytes')}",
                cn.get("subscriptions_list"),
            )
            for cn in conns.get("connections", [])
        ]
        sp = c.procs[i]
        lines = [ln[-120:] for ln in (sp.log_text() if sp else "").splitlines() if "oute" in ln]
        out.append(f"n{i + 1}: routes={routes} clients={clients} log={lines[-8:]}")
    return "\n".join(out)


def client_diag(conns: dict[str, nats.NATS], subs: dict[str, Any]) -> str:
    """What nats-py says of ``conns`` (state, counts, bytes still in its pending buffer,
    the errors its ``error_cb`` got) and of ``subs`` (messages held): with ``route_diag``,
    which hop a lost message did not pass (a publisher's buffer, a server, the receiver)."""
    out = []
    for name, nc in conns.items():
        errors = getattr(getattr(nc._error_cb, "__self__", None), "errors", None)
        out.append(
            f"{name}: connected={nc.is_connected} closed={nc.is_closed} stats={nc.stats} "
            f"pending_bytes={nc._pending_data_size} errors={errors!r}"
        )
    out += [f"{name}: pending_msgs={sub.pending_msgs}" for name, sub in subs.items()]
    return "\n".join(out)


def test_cluster_pubsub_isolated(acc_cluster: Cluster) -> None:
    c = acc_cluster

    async def main() -> None:
        a1 = await connect(c.url(0), "a")
        b1 = await connect(c.url(0), "b")
        b2 = await connect(c.url(1), "b")
        a3 = await connect(c.url(2), "a")
        try:
            a_all = await a1.subscribe(">")
            b_foo = await b1.subscribe("foo")
            await wait_interest(b2, b1, "b21")
            await wait_interest(a3, a1, "a31")
            # several: the first makes n2's delivery plan, the rest follow it
            for i in range(5):
                await b2.publish("foo", b"from-b%d" % i)
            await synced(b2)
            # b1 got them: n1 has processed the routed messages
            for i in range(5):
                assert (await b_foo.next_msg(timeout=WAIT_S)).data == b"from-b%d" % i
            await nothing_but_marker(a1, a_all, "marker.a")
            # and A's traffic on the same subject crosses to A only
            for i in range(5):
                await a3.publish("foo", b"from-a%d" % i)
            for i in range(5):
                try:
                    msg = await a_all.next_msg(timeout=WAIT_S)
                    while _probe(msg):
                        msg = await a_all.next_msg(timeout=WAIT_S)
                except nats.errors.TimeoutError:
                    clients = client_diag({"a1": a1, "a3": a3}, {"a_all": a_all})
                    pytest.fail(f"A's foo #{i} from n3 not on n1:\n{clients}\n{route_diag(c)}")
                assert (msg.subject, msg.data) == ("foo", b"from-a%d" % i)
            await wait_interest(a3, a1, "a31b")  # A's n3->n1 traffic is processed
            b_probe = await b1.subscribe("probe.b")
            await synced(b1)
            await b1.publish("probe.b", b"p")
            assert (await b_probe.next_msg(timeout=WAIT_S)).data == b"p"
            assert b_foo.pending_msgs == 0
        finally:
            for nc in (a1, b1, b2, a3):
                await nc.close()

    run(main)


def test_cluster_queue_and_requests_isolated(acc_cluster: Cluster) -> None:
    c = acc_cluster

    async def main() -> None:
        a2 = await connect(c.url(1), "a")
        a3 = await connect(c.url(2), "a")
        b1 = await connect(c.url(0), "b")
        b3 = await connect(c.url(2), "b")
        a1 = await connect(c.url(0), "a")
        try:
            qa = await a2.subscribe("work", queue="g")
            qb = await b1.subscribe("work", queue="g")
            await wait_interest(a3, a2, "a32")
            await wait_interest(b3, b1, "b31")
            for i in range(20):
                await a3.publish("work", b"%d" % i)
            got = [(await qa.next_msg(timeout=WAIT_S)).data for _ in range(20)]
            assert got == [b"%d" % i for i in range(20)]
            await wait_interest(a3, a1, "a31")  # A's n3->n1 traffic is processed
            await b1.publish("work", b"b-local")
            assert (await qb.next_msg(timeout=WAIT_S)).data == b"b-local"

            async def answer_b(msg: Any) -> None:
                await b1.publish(msg.reply, b"b-answer")

            await b1.subscribe("svc", cb=answer_b)
            await wait_interest(b3, b1, "b31b")
            assert (await b3.request("svc", b"?", timeout=WAIT_S)).data == b"b-answer"
            with pytest.raises(nats.errors.NoRespondersError):
                await a3.request("svc", b"?", timeout=WAIT_S)
        finally:
            for nc in (a2, a3, b1, b3, a1):
                await nc.close()

    run(main)


def test_monitoring_shows_accounts(start_server: Any) -> None:
    """/accountz lists every account, /connz and /subsz see each connection's account."""
    sp: ServerProcess = start_server("trijet", args=["-m", "-1"], config=ACCOUNTS_CONF)
    base = sp.monitoring_url
    assert base is not None

    async def main() -> None:
        a = await connect(sp.url, "a")
        b = await connect(sp.url, "b")
        try:
            await a.subscribe("x")
            await b.subscribe("y")
            await b.subscribe("z")
            await synced(a)
            await synced(b)
            doc = get_json(f"{base}/accountz")
            assert doc is not None and doc["system_account"] == "SYS"
            assert set(doc["accounts"]) == {"$G", "A", "B", "SYS"}
            detail = get_json(f"{base}/accountz?acc=B")["account_detail"]  # type: ignore[index]
            # B's two client subscriptions and the server's own $SYS.REQ services in B
            assert (detail["client_connections"], detail["subscriptions"]) == (
                1,
                2 + SUBS_PER_ACCOUNT,
            )
            assert "is_system" not in detail
            assert get_json(f"{base}/accountz?acc=SYS")["account_detail"]["is_system"]  # type: ignore[index]
            conns = get_json(f"{base}/connz?auth=1")["connections"]  # type: ignore[index]
            assert {(c["account"], c["authorized_user"]) for c in conns} == {("A", "a"), ("B", "b")}
            only_b = get_json(f"{base}/connz?acc=B")["connections"]  # type: ignore[index]
            assert len(only_b) == 1 and only_b[0]["subscriptions"] == 2
            subs = get_json(f"{base}/subsz?acc=B&subs=1")
            assert subs is not None and subs["num_subscriptions"] == 2 + SUBS_PER_ACCOUNT
            clients = [
                s for s in subs["subscriptions_list"] if not s["subject"].startswith("$SYS.")
            ]
            assert sorted(s["subject"] for s in clients) == ["y", "z"]
            assert get_json(f"{base}/varz")["system_account"] == "SYS"  # type: ignore[index]
        finally:
            await a.close()
            await b.close()

    run(main)


JS_CLUSTER_CONF = """
accounts {
  APP: { users: [{user: app, password: app}], jetstream: enabled }
  B: { users: [{user: b, password: b}] }
  SYS: { users: [{user: sys, password: sys}] }
}
system_account: SYS
"""


def test_jetstream_in_its_account_across_a_cluster(tmp_path: Path) -> None:
    """JetStream runs in APP on three nodes (replicated stream, publishes and consumers
    from every node); B on the same subjects reaches none of it."""
    with start_cluster("trijet", 3, workdir=tmp_path, extra_conf=JS_CLUSTER_CONF) as c:

        async def main() -> None:
            app = [await connect(u, "app") for u in c.urls]
            b = await connect(c.urls[1], "b")
            try:
                js = [nc.jetstream() for nc in app]
                await js[0].add_stream(name="ORDERS", subjects=["orders.>"], num_replicas=3)
                for i, j in enumerate(js):
                    ack = await j.publish("orders.new", b"%d" % i, timeout=WAIT_S)
                    assert (ack.stream, ack.seq) == ("ORDERS", i + 1)
                with pytest.raises(nats.errors.NoRespondersError):
                    await b.request("orders.new", b"x", timeout=WAIT_S)
                with pytest.raises(nats.js.errors.ServiceUnavailableError):
                    await b.jetstream().stream_info("ORDERS")
                sub = await js[2].pull_subscribe("orders.>", durable="D")
                msgs = await sub.fetch(3, timeout=WAIT_S)
                assert [m.data for m in msgs] == [b"0", b"1", b"2"]
                info = await js[1].stream_info("ORDERS")
                assert info.state.messages == 3
            finally:
                for nc in (*app, b):
                    await nc.close()

        run(main)


def test_nkey_users_and_permissions_per_account(start_server: Any, server_kind: str) -> None:
    """An nkey user lands in its account; an account's default_permissions bind its users."""
    import os

    import nkeys

    seed = nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_USER)
    public = nkeys.from_seed(bytearray(seed)).public_key.decode()
    conf = f"""
accounts {{
  A: {{ users: [{{nkey: {public}}}] }}
  B: {{
    users: [{{user: b, password: b}}]
    default_permissions: {{ publish: "ok.>", subscribe: ">" }}
  }}
}}
"""
    sp: ServerProcess = start_server(server_kind, config=conf)

    async def main() -> None:
        errors = ErrorLog()
        a = await connect(sp.url, nkeys_seed_str=seed.decode())
        b = await connect(sp.url, "b", error_cb=errors.cb)
        try:
            a_all = await a.subscribe(">")
            b_all = await b.subscribe(">")
            await synced(a)
            await synced(b)
            await b.publish("ok.1", b"b")
            await b.publish("no.1", b"denied")  # permission violation: not delivered
            await synced(b)
            assert (await b_all.next_msg(timeout=WAIT_S)).subject == "ok.1"
            await nothing_but_marker(a, a_all, "marker.a")
            await b.publish("ok.marker", b"m")
            assert (await b_all.next_msg(timeout=WAIT_S)).subject == "ok.marker"
        finally:
            await a.close()
            await b.close()

    run(main)


def test_second_connect_into_another_account_keeps_nothing(
    start_server: Any, server_kind: str
) -> None:
    """A connection that authenticates again as another account's user keeps none of its
    subscriptions in the first account (nats-server delivers it nothing from either)."""
    sp: ServerProcess = start_server(server_kind, config=ACCOUNTS_CONF)
    with RawClient(sp.host, sp.port) as s:
        t = s.exchange(b'CONNECT {"verbose":false,"user":"a","pass":"a"}\r\nSUB foo 1\r\nPING\r\n')
        assert b"PONG" in t.output
        t = s.exchange(b'CONNECT {"verbose":false,"user":"b","pass":"b"}\r\nPING\r\n')
        assert b"PONG" in t.output
        for user in (b"a", b"b"):
            with RawClient(sp.host, sp.port) as p:
                conn = b'CONNECT {"verbose":false,"user":"%s","pass":"%s"}\r\n' % (user, user)
                assert b"PONG" in p.exchange(conn + b"PUB foo 2\r\nhi\r\nPING\r\n").output
        t = s.exchange(b"PING\r\n")  # what was delivered before the PONG
        assert b"MSG" not in t.output and b"PONG" in t.output
