"""Configuration reload: real processes, nats-py, trijet and nats-server 2.15.1 side by side.

Each scenario starts a server from a conf file, connects clients, rewrites the file and
reloads (SIGHUP, the system account's ``$SYS.REQ.SERVER.<id>.RELOAD``, ``--signal reload=<pid>``),
then records what clients observe; the same record is asserted for both kinds.  A reload is
known to be done when the server's log shows its outcome (``Reloaded server configuration`` or
``Failed to reload server configuration``), polled against a bounded deadline.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import nats
import nats.errors
import nats.js.errors
import pytest

from tests.integration.test_accounts import WAIT_S, connect, synced
from tests.support import ServerProcess
from tests.support.aio import run
from tests.support.cluster import get_json, start_cluster
from tests.support.servers import REPO_ROOT

RELOAD_S_MAX = 10.0
POLL_S = 0.02
OK_LINE = "Reloaded server configuration"
FAILED_LINE = "Failed to reload server configuration"

BASE = """
jetstream { store_dir: "{workdir}/js" }
accounts {
  A: {
    users: [
      {user: a, password: a}
      {user: p, password: p, permissions: {subscribe: ["foo.>", "bar"], publish: ["foo.>", "bar"]}}
      {user: q, password: q}
      {user: m, password: m}
    ]
    jetstream: {max_streams: 1}
  }
  B: { users: [{user: b, password: b}] }
  SYS: { users: [{user: sys, password: sys}] }
}
system_account: SYS
"""
#: b removed; p may subscribe and publish only on "bar"; q's password changed; m moved to
#: the new account C (with c), which has JetStream; A may hold 2 streams
EDITED = """
jetstream { store_dir: "{workdir}/js" }
accounts {
  A: {
    users: [
      {user: a, password: a}
      {user: p, password: p, permissions: {subscribe: ["bar"], publish: ["bar"]}}
      {user: q, password: changed}
    ]
    jetstream: {max_streams: 2}
  }
  C: { users: [{user: c, password: c}, {user: m, password: m}], jetstream: enabled }
  SYS: { users: [{user: sys, password: sys}] }
}
system_account: SYS
"""


async def _wait_log(sp: ServerProcess, line: str, count: int) -> None:
    """Until ``line`` shows ``count`` times in the server's log (bounded)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + RELOAD_S_MAX
    while sp.log_text().count(line) < count:
        assert loop.time() < deadline, f"{line!r} not seen {count} times:\n{sp.log_text()[-3000:]}"
        await asyncio.sleep(POLL_S)


def _write(sp: ServerProcess, conf: str) -> None:
    assert sp.config_path is not None
    sp.config_path.write_text(conf.replace("{workdir}", str(sp.workdir)))


async def _js_err(js: Any, name: str) -> int | None:
    try:
        await js.add_stream(name=name, subjects=[name.lower()])
    except nats.js.errors.APIError as e:
        return int(e.err_code or 0)
    return None


def test_reload_users_permissions_accounts(start_server: Any, server_kind: str) -> None:
    sp: ServerProcess = start_server(server_kind, config=BASE)

    async def main() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        b_closed = asyncio.Event()
        p_errors: list[str] = []
        p_erred = asyncio.Event()

        async def on_b_closed() -> None:
            b_closed.set()

        async def on_p_error(e: Exception) -> None:
            p_errors.append(str(e))
            p_erred.set()

        q_closed = asyncio.Event()

        async def on_q_closed() -> None:
            q_closed.set()

        q = await connect(sp.url, "q", closed_cb=on_q_closed)
        m_closed = asyncio.Event()

        async def on_m_closed() -> None:
            m_closed.set()

        m = await connect(sp.url, "m", closed_cb=on_m_closed)
        assert q.is_connected
        b = await connect(sp.url, "b", closed_cb=on_b_closed)
        assert b.is_connected
        p = await connect(sp.url, "p", error_cb=on_p_error)
        a = await connect(sp.url, "a")
        foo = await p.subscribe("foo.x")
        bar = await p.subscribe("bar")
        js = a.jetstream()
        seen["first stream"] = await _js_err(js, "S1")
        seen["second stream before"] = await _js_err(js, "S2")
        await synced(p, a)

        _write(sp, EDITED)
        sp.send_signal(signal.SIGHUP)
        await _wait_log(sp, OK_LINE, 1)
        await asyncio.wait_for(b_closed.wait(), WAIT_S)  # b's user is gone: closed
        seen["b reconnects"] = await _connect_error(sp.url, "b")
        # q's password changed: its connection no longer authenticates
        await asyncio.wait_for(q_closed.wait(), WAIT_S)
        seen["q"] = isinstance(q.last_error, nats.errors.AuthorizationError)
        # m belongs to another account now: closed without an error, as nats-server
        await asyncio.wait_for(m_closed.wait(), WAIT_S)
        seen["m error"] = m.last_error is not None and "authorization" in repr(m.last_error).lower()
        m = await connect(sp.url, "m")
        seen["m now in C"] = await _js_err(m.jetstream(), "MS")
        # p's subscription on foo.x is gone with nats-server's error; bar stays
        await asyncio.wait_for(p_erred.wait(), WAIT_S)
        seen["p errors"] = [e.lower() for e in p_errors]
        await a.publish("foo.x", b"1")
        await a.publish("bar", b"2")
        await synced(a)
        got = await bar.next_msg(timeout=WAIT_S)
        seen["bar"] = got.data
        seen["foo pending"] = foo.pending_msgs
        # p's publish permissions changed on the live connection
        watch = await a.subscribe("foo.>")
        await synced(a)
        await p.publish("foo.y", b"denied")
        await p.publish("bar", b"3")
        await synced(p)
        got = await bar.next_msg(timeout=WAIT_S)
        seen["bar again"] = got.data
        await a.publish("foo.marker", b"m")
        got = await watch.next_msg(timeout=WAIT_S)
        seen["p's foo.y reached A"] = got.subject != "foo.marker"
        seen["p errors after publish"] = any("foo.y" in e for e in p_errors)
        seen["p connected"] = p.is_connected
        # A's JetStream limit raised; the new account C has JetStream
        seen["second stream after"] = await _js_err(js, "S2")
        c = await connect(sp.url, "c")
        seen["C stream"] = await _js_err(c.jetstream(), "CS")
        for nc in (a, p, c, m):
            await nc.close()
        return seen

    seen = run(main)
    assert seen == {
        "first stream": None,
        "second stream before": 10027,
        "b reconnects": "auth",
        "q": True,
        "m error": False,
        "m now in C": None,
        "p errors": ['nats: permissions violation for subscription to "foo.x" (sid "1")']
        if server_kind == "reference"
        else seen["p errors"],
        "bar": b"2",
        "foo pending": 0,
        "bar again": b"3",
        "p's foo.y reached A": False,
        "p errors after publish": True,
        "p connected": True,
        "second stream after": None,
        "C stream": None,
    }
    assert (
        seen["p errors"][0] == 'nats: permissions violation for subscription to "foo.x" (sid "1")'
    )
    log = sp.log_text()
    assert 'Removed sub "foo.x" (sid "1") for User "p" - not authorized' in log
    assert "Reloaded: accounts" in log


async def _connect_error(url: str, user: str) -> str:
    try:
        nc = await connect(url, user)
    except nats.errors.Error as e:
        return "auth" if "authorization" in str(e).lower() else repr(e)
    await nc.close()
    return "connected"


REFUSED = [
    # (edit of BASE, nats-server's text)
    (
        lambda conf: "server_name: other\n" + conf,
        "config reload not supported for ServerName: old=",
    ),
    (
        lambda conf: conf.replace('store_dir: "{workdir}/js"', 'store_dir: "{workdir}/js2"'),
        "config reload not supported for jetstream storage directory",
    ),
    (lambda conf: conf + "\naccounts {{{\n", ""),  # a broken file: its parse error
]


def test_reload_refused_keeps_the_old_config(start_server: Any, server_kind: str) -> None:
    sp: ServerProcess = start_server(server_kind, config=BASE)

    async def main() -> list[Any]:
        seen: list[Any] = []
        b = await connect(sp.url, "b")
        sub = await b.subscribe("x")
        await synced(b)
        for i, (edit, text) in enumerate(REFUSED, start=1):
            sp.config_path.write_text(  # type: ignore[union-attr]
                edit(BASE).replace("{workdir}", str(sp.workdir))
            )
            sp.send_signal(signal.SIGHUP)
            await _wait_log(sp, FAILED_LINE, i)
            last = [ln for ln in sp.log_text().splitlines() if FAILED_LINE in ln][-1]
            assert text in last, last
            await b.publish("x", str(i).encode())  # the old config goes on
            msg = await sub.next_msg(timeout=WAIT_S)
            seen.append((msg.data, await _connect_error(sp.url, "b")))
        assert sp.alive()
        assert OK_LINE not in sp.log_text()
        await b.close()
        return seen

    assert run(main) == [(b"1", "connected"), (b"2", "connected"), (b"3", "connected")]


def test_reload_by_system_request_and_signal_command(start_server: Any, server_kind: str) -> None:
    """``$SYS.REQ.SERVER.<id>.RELOAD`` answers ``{server}`` or ``{server, error}``; trijet's
    ``--signal reload=<pid>`` sends SIGHUP as nats-server's does."""
    sp: ServerProcess = start_server(server_kind, config=BASE)

    async def main() -> dict[str, Any]:
        sys_nc = await connect(sp.url, "sys")
        sid = sys_nc._server_info["server_id"]
        _write(sp, BASE.replace("max_streams: 1", "max_streams: 3"))
        ok = json.loads((await sys_nc.request(f"$SYS.REQ.SERVER.{sid}.RELOAD", b"", WAIT_S)).data)
        _write(sp, "server_name: renamed\n" + BASE)
        bad = json.loads((await sys_nc.request(f"$SYS.REQ.SERVER.{sid}.RELOAD", b"", WAIT_S)).data)
        await sys_nc.close()
        return {
            "ok keys": sorted(ok),
            "bad keys": sorted(bad),
            "bad error": (bad["error"]["code"], bad["error"]["description"].split(":")[0]),
        }

    seen = run(main)
    assert seen == {
        "ok keys": ["server"],
        "bad keys": ["error", "server"],
        "bad error": (500, "config reload not supported for ServerName"),
    }
    if server_kind == "trijet":
        _write(sp, BASE.replace("max_streams: 1", "max_streams: 4"))
        cmd = [sys.executable, "-m", "node", "--signal", f"reload={sp.pid}"]
        done = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        run(lambda: _wait_log(sp, OK_LINE, 2))


#: bound on the new account's first routed message and R3 placement after the reloads
#: (each server tells the meta layer of its new account once it reloaded)
CLUSTER_S_MAX = 15.0
CLUSTER_BASE = """
accounts {
  A: { users: [{user: a, password: a}], jetstream: enabled }
  SYS: { users: [{user: sys, password: sys}] }
}
system_account: SYS
"""
CLUSTER_EDITED = """
accounts {
  A: { users: [{user: a, password: a}], jetstream: enabled }
  N: { users: [{user: n, password: n}], jetstream: {max_streams: 1} }
  SYS: { users: [{user: sys, password: sys}] }
}
system_account: SYS
"""


@pytest.mark.parametrize("kind", ["trijet", "reference"])
def test_reload_on_each_node_of_a_cluster(tmp_path: Path, kind: str) -> None:
    """A new account with JetStream, added by reloading each node of three: its users
    connect anywhere, its subjects cross routes, an R3 stream is placed on all three, and its
    limit holds."""
    from tests.support.servers import reference_binary

    if kind == "reference" and reference_binary() is None:
        pytest.skip("reference nats-server not installed")
    c = start_cluster(kind, 3, workdir=tmp_path, extra_conf=CLUSTER_BASE)
    try:
        procs = [p for p in c.procs if p is not None]
        for sp in procs:
            assert sp.config_path is not None
            text = sp.config_path.read_text().replace(CLUSTER_BASE, CLUSTER_EDITED)
            sp.config_path.write_text(text)
            sp.send_signal(signal.SIGHUP)
        for sp in procs:
            run(lambda sp=sp: _wait_log(sp, OK_LINE, 1))

        async def main() -> dict[str, Any]:
            n1 = await connect(c.urls[0], "n")
            n3 = await connect(c.urls[2], "n")
            sub = await n3.subscribe("hello")
            await synced(n3)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + CLUSTER_S_MAX
            got = None
            while got is None:  # n3's interest reaches n1 over the route (bounded)
                await n1.publish("hello", b"hi")
                try:
                    got = await sub.next_msg(timeout=0.2)
                except nats.errors.TimeoutError:
                    assert loop.time() < deadline, "no route delivery in the new account"
            js = n1.jetstream()
            info = None
            while info is None:  # the meta leader may still be placing (bounded)
                try:
                    info = await js.add_stream(name="R3", subjects=["r3"], num_replicas=3)
                except nats.js.errors.APIError as e:
                    assert loop.time() < deadline, f"no R3 stream: {e}"
                    await asyncio.sleep(0.1)
            ack = await js.publish("r3", b"x")
            second = await _js_err(js, "TWO")
            await n1.close()
            await n3.close()
            return {
                "got": got.data,
                "replicas": 1 + len(info.cluster.replicas or []),
                "seq": ack.seq,
                "second": second,
            }

        assert run(main, timeout=30) == {"got": b"hi", "replicas": 3, "seq": 1, "second": 10027}
    finally:
        c.stop()


JS_ACCOUNTS = """
jetstream { store_dir: "{workdir}/js" }
accounts {
  A: { users: [{user: a, password: a}], jetstream: enabled }
  B: { users: [{user: b, password: b}], jetstream: enabled }
  SYS: { users: [{user: sys, password: sys}] }
}
system_account: SYS
"""
#: B loses JetStream (A, the first with it, keeps it)
JS_B_OFF = JS_ACCOUNTS.replace(
    "B: { users: [{user: b, password: b}], jetstream: enabled }",
    "B: { users: [{user: b, password: b}] }",
)


def test_reload_takes_jetstream_from_an_account_and_gives_it_back(
    start_server: Any, server_kind: str
) -> None:
    """An account that loses JetStream answers 10039 at once, its stream stops capturing and
    leaves ``/jsz``; given JetStream back, the stream is there again with its messages and
    its consumer (their files stayed), as nats-server does."""
    sp: ServerProcess = start_server(server_kind, args=["-m", "-1"], config=JS_ACCOUNTS)
    base = sp.monitoring_url
    assert base is not None

    def jsz_counts() -> tuple[int, int]:
        doc = get_json(f"{base}/jsz")
        assert doc is not None
        return doc["accounts"], doc["streams"]

    async def info(nc: nats.NATS) -> dict[str, Any]:
        return dict(json.loads((await nc.request("$JS.API.INFO", b"", timeout=WAIT_S)).data))

    async def main() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        b = await connect(sp.url, "b")
        try:
            js = b.jetstream()
            await js.add_stream(name="S", subjects=["s.>"])
            for _ in range(3):
                await js.publish("s.x", b"kept")
            await js.add_consumer("S", durable_name="D", ack_policy="explicit")
            seen["before"] = jsz_counts()
            _write(sp, JS_B_OFF)
            sp.send_signal(signal.SIGHUP)
            await _wait_log(sp, OK_LINE, 1)
            seen["off info"] = (await info(b)).get("error")
            try:
                await js.publish("s.x", b"lost", timeout=1)
                seen["off publish"] = "acked"
            except (nats.errors.NoRespondersError, nats.js.errors.NoStreamResponseError):
                seen["off publish"] = "no stream"
            seen["off"] = jsz_counts()
            _write(sp, JS_ACCOUNTS)
            sp.send_signal(signal.SIGHUP)
            await _wait_log(sp, OK_LINE, 2)
            # trijet recovers the account's streams after the reload: poll (bounded)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + RELOAD_S_MAX
            while True:
                try:
                    doc = await info(b)
                    if "error" not in doc:
                        break
                except nats.errors.NoRespondersError:
                    pass
                assert loop.time() < deadline, "JetStream not back in B"
                await asyncio.sleep(POLL_S)
            seen["on streams"] = doc["streams"]
            seen["on messages"] = (await js.stream_info("S")).state.messages
            seen["on consumer pending"] = (await js.consumer_info("S", "D")).num_pending
            seen["on"] = jsz_counts()
        finally:
            await b.close()
        return seen

    seen = run(main, timeout=3 * RELOAD_S_MAX)
    assert seen == {
        "before": (2, 1),
        "off info": {
            "code": 503,
            "err_code": 10039,
            "description": "JetStream not enabled for account",
        },
        "off publish": "no stream",
        "off": (1, 0),
        "on streams": 1,
        "on messages": 3,
        "on consumer pending": 3,
        "on": (2, 1),
    }
