"""Stream and service exports/imports: real processes, nats-py, trijet and nats-server alike.

Only what is exported and imported crosses accounts, mapped as configured; the rest stays
isolated.  Single node and three nodes (a message crosses once, where it was published).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import nats.errors
import pytest

from node.launcher import plan_cluster
from tests.integration.test_accounts import WAIT_S, connect, nothing_but_marker, synced
from tests.integration.test_cluster_core import READY_S, Cluster, wait_interest, wait_mesh
from tests.support import ServerProcess, reference_binary
from tests.support.aio import run

CONF = """
accounts {
  A: {
    users: [{user: a, password: a}]
    exports: [
      {stream: "ev.>"}
      {stream: "priv.>", accounts: [C]}
      {service: "svc.>"}
      {service: "stream.svc", response: stream}
    ]
  }
  B: {
    users: [{user: b, password: b}]
    imports: [
      {stream: {account: A, subject: "ev.>"}, prefix: "froma"}
      {stream: {account: A, subject: "ev.x"}, to: "local.x"}
      {service: {account: A, subject: "svc.one"}, to: "one"}
      {service: {account: A, subject: "svc.*"}}
      {service: {account: A, subject: "stream.svc"}}
    ]
  }
  C: {
    users: [{user: c, password: c}]
    imports: [{stream: {account: A, subject: "priv.>"}}]
  }
}
no_auth_user: a
"""


def test_stream_imports(start_server: Any, server_kind: str) -> None:
    sp: ServerProcess = start_server(server_kind, config=CONF)

    async def main() -> None:
        a = await connect(sp.url, "a")
        b = await connect(sp.url, "b")
        c = await connect(sp.url, "c")
        try:
            b_all = await b.subscribe(">")
            c_all = await c.subscribe(">")
            await synced(b)
            await synced(c)
            await a.publish("ev.x", b"1", reply="rep.a")
            await a.publish("ev.y.z", b"2")
            await a.publish("priv.q", b"3")
            await a.publish("other", b"4")
            await synced(a)
            got = []
            for _ in range(3):
                m = await b_all.next_msg(timeout=WAIT_S)
                got.append((m.subject, m.reply, m.data))
            assert sorted(got) == [
                ("froma.ev.x", "rep.a", b"1"),
                ("froma.ev.y.z", "", b"2"),
                ("local.x", "rep.a", b"1"),
            ]
            m = await c_all.next_msg(timeout=WAIT_S)
            assert (m.subject, m.data) == ("priv.q", b"3")
            await nothing_but_marker(b, b_all, "marker.b")
            await nothing_but_marker(c, c_all, "marker.c")
            # nothing flows back: B's publishes on the imported subjects stay in B
            a_all = await a.subscribe(">")
            await synced(a)
            await b.publish("ev.x", b"back")
            await b.publish("froma.ev.x", b"back")
            await synced(b)
            await nothing_but_marker(a, a_all, "marker.a")
        finally:
            for nc in (a, b, c):
                await nc.close()

    run(main)


def test_service_imports(start_server: Any, server_kind: str) -> None:
    sp: ServerProcess = start_server(server_kind, config=CONF)

    async def main() -> None:
        a = await connect(sp.url, "a")
        b = await connect(sp.url, "b")
        c = await connect(sp.url, "c")
        try:
            # an imported service without a responder: no-responders, as nats-server
            with pytest.raises(nats.errors.NoRespondersError):
                await b.request("one", b"?", timeout=WAIT_S)
            seen = []

            async def respond(m: Any) -> None:
                seen.append((m.subject, m.reply, (m.headers or {}).get("Nats-Request-Info", "")))
                for i in range(3):  # a singleton forwards the first only
                    await a.publish(m.reply, b"ans:%s:%d" % (m.subject.encode(), i))

            async def respond_stream(m: Any) -> None:
                for i in range(3):
                    await a.publish(m.reply, b"s%d" % i)

            await a.subscribe("svc.>", cb=respond)
            await a.subscribe("stream.svc", cb=respond_stream)
            await synced(a)
            assert (await b.request("one", b"?", timeout=WAIT_S)).data == b"ans:svc.one:0"
            assert (await b.request("svc.two", b"?", timeout=WAIT_S)).data == b"ans:svc.two:0"
            assert [s for s, _, _ in seen] == ["svc.one", "svc.two"]
            for _, reply, info in seen:
                assert reply.startswith("_R_.") and len(reply.split(".")) == 3
                assert info.startswith('{"acc":"B","rtt":')
            inbox = b.new_inbox()
            box = await b.subscribe(inbox)
            await synced(b)
            await b.publish("one", b"?", reply=inbox)
            assert (await box.next_msg(timeout=WAIT_S)).data == b"ans:svc.one:0"
            await b.publish("svc.three", b"?", reply=inbox)
            assert (await box.next_msg(timeout=WAIT_S)).data == b"ans:svc.three:0"
            await b.publish("stream.svc", b"?", reply=inbox)
            got = [(await box.next_msg(timeout=WAIT_S)).data for _ in range(3)]
            assert got == [b"s0", b"s1", b"s2"]
            # C imports no service: nobody answers it there
            with pytest.raises(nats.errors.NoRespondersError):
                await c.request("one", b"?", timeout=WAIT_S)
        finally:
            for nc in (a, b, c):
                await nc.close()

    run(main)


@pytest.fixture(params=["trijet", "reference"])
def imp_cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cluster]:
    kind = request.param
    if kind == "reference" and reference_binary() is None:
        pytest.skip("reference nats-server not installed")
    plans = plan_cluster(3, tmp_path / "data", jetstream=False, monitoring=False, extra=CONF)
    c = Cluster(kind, tmp_path, plans)
    try:
        for i in range(3):
            c.start(i)
        run(lambda: wait_mesh(c), timeout=READY_S + 5)
        yield c
    finally:
        c.stop_all()


def test_imports_across_nodes(imp_cluster: Cluster) -> None:
    c = imp_cluster

    async def main() -> None:
        a1 = await connect(c.url(0), "a")
        a2 = await connect(c.url(1), "a")
        a3 = await connect(c.url(2), "a")
        b2 = await connect(c.url(1), "b")
        b3 = await connect(c.url(2), "b")
        try:
            got = await b2.subscribe("froma.>")
            await wait_interest(b3, b2, "b32")  # B's interest known on n3
            # and A's on n2 known on n3: nats-server crosses a stream import where the
            # importer subscribed (its subscription in B adds one in A, announced on A's
            # route), trijet where the message is published (B's interest above); A and B
            # share one of nats-server's pooled routes only by their names' hash
            await wait_interest(a3, a2, "a32")
            for i in range(5):
                await a3.publish("ev.n3", b"%d" % i)  # published on n3, crosses there
            for i in range(5):
                m = await got.next_msg(timeout=WAIT_S)
                assert (m.subject, m.data) == ("froma.ev.n3", b"%d" % i)
            await b2.publish("froma.marker", b"m")  # exactly once each: the marker is next
            assert (await got.next_msg(timeout=WAIT_S)).subject == "froma.marker"

            async def respond(m: Any) -> None:
                await a1.publish(m.reply, b"from-n1")

            await a1.subscribe("svc.>", cb=respond)
            # A's responder known on n2 and on n3, where B's requests enter (only n3 was
            # awaited once: a request on n2 then met no responders while n2 had not yet
            # processed n1's interest, in one full run of the suite)
            await wait_interest(a2, a1, "a21")
            await wait_interest(a3, a1, "a31")
            assert (await b2.request("one", b"?", timeout=WAIT_S)).data == b"from-n1"
            assert (await b3.request("svc.x", b"?", timeout=WAIT_S)).data == b"from-n1"
        finally:
            for nc in (a1, a2, a3, b2, b3):
                await nc.close()

    run(main)
