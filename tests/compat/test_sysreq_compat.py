"""Differential: ``$SYS.REQ`` requests, trijet and nats-server with the same accounts.

Shapes are compared (the envelope's keys, the data's identity fields); figures differ by
nature (memory, subscriptions the reference holds for its own services).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nats
import nats.errors
import pytest

from tests.support import ServerProcess, reference_binary
from tests.support.aio import ErrorLog, run
from tests.support.cluster import start_cluster

CONF = """
accounts {
  A: { users: [{user: a, password: a}] }
  SYS: { users: [{user: sys, password: sys}] }
}
system_account: SYS
"""
CLUSTER_CONF = """
accounts {
  APP: { users: [{user: app, password: app}], jetstream: enabled }
  SYS: { users: [{user: sys, password: sys}] }
}
system_account: SYS
"""
WAIT_S = 5.0


async def ask(url: str, user: str | None, subject: str, body: bytes = b"") -> Any:
    kw: dict[str, Any] = {"error_cb": ErrorLog().cb, "allow_reconnect": False}
    if user:
        kw.update(user=user, password=user)
    nc = await nats.connect(url, **kw)
    try:
        msg = await nc.request(subject, body, timeout=WAIT_S)
        return json.loads(msg.data)
    except nats.errors.NoRespondersError:
        return "no-responders"
    finally:
        await nc.close()


def scenario(sp: ServerProcess) -> dict[str, Any]:
    async def main() -> dict[str, Any]:
        out: dict[str, Any] = {}
        out["ping_from_a"] = await ask(sp.url, "a", "$SYS.REQ.SERVER.PING")
        out["varz_from_a"] = await ask(sp.url, "a", "$SYS.REQ.SERVER.PING.VARZ")
        out["user_a"] = await ask(sp.url, "a", "$SYS.REQ.USER.INFO")
        out["user_sys"] = await ask(sp.url, "sys", "$SYS.REQ.USER.INFO")
        out["ping"] = await ask(sp.url, "sys", "$SYS.REQ.SERVER.PING")
        out["varz"] = await ask(sp.url, "sys", "$SYS.REQ.SERVER.PING.VARZ")
        sid = out["ping"]["server"]["id"]
        out["connz"] = await ask(sp.url, "sys", f"$SYS.REQ.SERVER.{sid}.CONNZ")
        out["accountz"] = await ask(
            sp.url, "sys", "$SYS.REQ.SERVER.PING.ACCOUNTZ", b'{"account":"A"}'
        )
        out["acc_connz"] = await ask(sp.url, "a", "$SYS.REQ.ACCOUNT.PING.CONNZ")
        a = await nats.connect(sp.url, user="a", password="a", error_cb=ErrorLog().cb)
        try:
            await a.subscribe("x.y")
            await a.flush()
            for kind in ("CONNZ", "SUBSZ", "INFO", "JSZ", "LEAFZ"):
                out[f"a_{kind}"] = await ask(sp.url, "sys", f"$SYS.REQ.ACCOUNT.A.{kind}")
            out["nope_INFO"] = await ask(sp.url, "sys", "$SYS.REQ.ACCOUNT.NOPE.INFO")
            out["nope_CONNZ"] = await ask(sp.url, "sys", "$SYS.REQ.ACCOUNT.NOPE.CONNZ")
        finally:
            await a.close()
        return out

    return run(main)


def test_system_requests_as_reference(start_server: Any) -> None:
    if reference_binary() is None:
        pytest.skip("reference nats-server not installed")
    got = {kind: scenario(start_server(kind, config=CONF)) for kind in ("reference", "trijet")}
    ref, ours = got["reference"], got["trijet"]
    for key in ("ping_from_a", "varz_from_a"):  # the system account's services only
        assert ref[key] == ours[key] == "no-responders"
    for key in ("user_a", "user_sys"):
        assert ours[key]["data"] == ref[key]["data"]
        assert list(ours[key]["server"]) == list(ref[key]["server"])
    assert ours["user_a"]["data"] == {"user": "a", "account": "A", "account_name": "A"}
    assert list(ours["ping"]) == list(ref["ping"]) == ["server", "statsz"]
    missing = set(ref["ping"]["statsz"]) - set(ours["ping"]["statsz"])
    assert missing <= {"gomaxprocs"}, missing
    assert ours["varz"]["data"]["server_id"] == ours["ping"]["server"]["id"]
    assert ours["varz"]["data"]["system_account"] == "SYS"
    for key in ("connz", "accountz", "acc_connz"):
        assert list(ours[key]) == list(ref[key]) == ["server", "data"]
    # the SYS user's own connection, found by server id
    assert ours["connz"]["data"]["num_connections"] == ref["connz"]["data"]["num_connections"]
    assert ours["accountz"]["data"]["account_detail"]["account_name"] == "A"
    # ACCOUNT.PING.CONNZ: the requesting account's connections only
    conns = ours["acc_connz"]["data"]["connections"]
    assert len(conns) == len(ref["acc_connz"]["data"]["connections"]) == 1
    # $SYS.REQ.ACCOUNT.<account>.<KIND> from the system account
    for key in ("a_CONNZ", "a_SUBSZ", "a_INFO", "a_JSZ", "a_LEAFZ", "nope_INFO", "nope_CONNZ"):
        assert list(ours[key]) == list(ref[key]), key
    for key in ("a_JSZ", "nope_INFO"):
        assert ours[key]["error"] == ref[key]["error"] and ours[key]["data"] is None, key
    assert (
        ours["a_CONNZ"]["data"]["num_connections"] == ref["a_CONNZ"]["data"]["num_connections"] == 1
    )
    assert ours["nope_CONNZ"]["data"] | {"now": ""} == ref["nope_CONNZ"]["data"] | {"now": ""}
    for key in ("account_name", "jetstream_enabled", "client_connections", "expired", "complete"):
        assert ours["a_INFO"]["data"][key] == ref["a_INFO"]["data"][key], key
    assert "x.y" in [d["subject"] for d in ours["a_SUBSZ"]["data"]["subscriptions_list"]]
    assert ours["a_LEAFZ"]["data"]["leafs"] == ref["a_LEAFZ"]["data"]["leafs"] == []


def test_ping_answered_by_every_server(tmp_path: Path) -> None:
    """In a cluster each server answers a ping (the requester collects them)."""
    with start_cluster("trijet", 3, workdir=tmp_path, extra_conf=CLUSTER_CONF) as c:

        async def main() -> set[str]:
            nc = await nats.connect(c.urls[0], user="sys", password="sys", error_cb=ErrorLog().cb)
            try:
                inbox = nc.new_inbox()
                sub = await nc.subscribe(inbox)
                await nc.publish("$SYS.REQ.SERVER.PING.IDZ", b"", reply=inbox)
                ids = set()
                for _ in range(3):
                    ids.add(json.loads((await sub.next_msg(timeout=WAIT_S)).data)["data"]["name"])
                return ids
            finally:
                await nc.close()

        assert run(main) == {"n1", "n2", "n3"}


def events(sp: ServerProcess) -> list[dict[str, Any]]:
    async def main() -> list[dict[str, Any]]:
        s = await nats.connect(sp.url, user="sys", password="sys", error_cb=ErrorLog().cb)
        try:
            sub = await s.subscribe("$SYS.ACCOUNT.A.*")
            await s.flush()
            a = await nats.connect(sp.url, user="a", password="a", name="cli-a")
            await a.publish("x", b"12345")
            await a.flush()
            await a.close()
            out = []
            while len(out) < 2:
                msg = await sub.next_msg(timeout=WAIT_S)
                doc = json.loads(msg.data)
                doc["subject"] = msg.subject
                out.append(doc)
            return out
        finally:
            await s.close()

    return run(main)


VOLATILE_CLIENT = {"start", "stop", "id", "rtt", "ver"}


def test_connect_disconnect_events_as_reference(start_server: Any) -> None:
    if reference_binary() is None:
        pytest.skip("reference nats-server not installed")
    got = {kind: events(start_server(kind, config=CONF)) for kind in ("reference", "trijet")}
    for ref, ours in zip(got["reference"], got["trijet"], strict=True):
        assert ours["subject"] == ref["subject"]
        assert list(ours) == list(ref)
        assert ours["type"] == ref["type"]
        assert list(ours["client"]) == list(ref["client"])
        for key in set(ref["client"]) - VOLATILE_CLIENT:
            assert ours["client"][key] == ref["client"][key], key
        for key in ("sent", "received", "reason"):
            assert ours.get(key) == ref.get(key), key
    assert [e["subject"] for e in got["trijet"]] == [
        "$SYS.ACCOUNT.A.CONNECT",
        "$SYS.ACCOUNT.A.DISCONNECT",
    ]
