"""JetStream in several accounts on one server: real processes, nats-py, trijet and nats-server.

Accounts A and B both enable JetStream and use the same names (stream ``S`` on subject
``x``, KV bucket ``kv``, object store ``obj``, durable ``D``); C has no JetStream.  Each
scenario tries to break isolation: a client of A publishes into B's subjects, sends B's
API requests (delete, purge, consumer create), watches ``>`` for B's PubAcks and
advisories; none of it may reach or change B.  The same scenario runs against nats-server
2.15.1 and the answers compared where they are deterministic.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nats.errors
import nats.js.errors
import pytest

from tests.integration.test_accounts import WAIT_S, connect, nothing_but_marker, synced
from tests.support import ServerProcess
from tests.support.aio import run

JS_ACCOUNTS_CONF = """
jetstream { store_dir: "{workdir}/js", max_file_store: 10MB }
accounts {
  A: { users: [{user: a, password: a}], jetstream: enabled }
  B: { users: [{user: b, password: b}], jetstream: { max_file: 5MB, max_streams: 3 } }
  C: { users: [{user: c, password: c}] }
  SYS: { users: [{user: sys, password: sys}] }
}
system_account: SYS
"""


async def api(nc: Any, subject: str, body: Any = None) -> dict[str, Any]:
    data = b"" if body is None else json.dumps(body).encode()
    msg = await nc.request(subject, data, timeout=WAIT_S)
    return dict(json.loads(msg.data))


def _strip(doc: dict[str, Any]) -> dict[str, Any]:
    """An answer without what differs between servers (API level, counters)."""
    d = dict(doc)
    d.pop("api", None)
    return d


def test_jetstream_assets_isolated(start_server: Any, server_kind: str) -> None:
    sp: ServerProcess = start_server(server_kind, config=JS_ACCOUNTS_CONF)

    async def main() -> dict[str, Any]:
        a = await connect(sp.url, "a")
        b = await connect(sp.url, "b")
        c = await connect(sp.url, "c")
        seen: dict[str, Any] = {}
        try:
            ja, jb = a.jetstream(), b.jetstream()
            # B's own stream-created advisory is sent after the create's answer (nats-server
            # queues it): it is awaited before B watches everything, so that only A's
            # traffic could reach the watch (one full run saw it arrive after the watch)
            b_adv = await b.subscribe("$JS.EVENT.ADVISORY.STREAM.CREATED.S")
            await synced(b)
            for js in (ja, jb):
                await js.add_stream(name="S", subjects=["x"])
            await b_adv.next_msg(timeout=WAIT_S)
            await b_adv.unsubscribe()
            b_watch = await b.subscribe(">")  # B sees nothing A does
            await synced(b)
            # A's traffic, on the same subjects and API names as B's; A's push consumer
            # delivers on a subject B watches too
            a_dlv = await a.subscribe("dlv")
            await ja.add_consumer("S", durable_name="P", deliver_subject="dlv")
            assert (await ja.publish("x", b"a1")).seq == 1
            assert (await ja.publish("x", b"a2")).seq == 2
            await ja.add_consumer("S", durable_name="D")
            await api(a, "$JS.API.STREAM.PURGE.S")
            await synced(a)
            assert (await a_dlv.next_msg(timeout=WAIT_S)).data == b"a1"
            await nothing_but_marker(b, b_watch, "marker.b")
            await b_watch.unsubscribe()
            info_b = await jb.stream_info("S")
            assert info_b.state.messages == 0
            assert await jb.consumers_info("S") == []
            assert (await jb.publish("x", b"b1")).seq == 1
            # A deletes "its" S: B's is untouched
            assert await ja.delete_stream("S")
            info_b = await jb.stream_info("S")
            assert info_b.state.messages == 1
            with pytest.raises(nats.js.errors.NotFoundError):
                await ja.stream_info("S")
            seen["names_a"] = await api(a, "$JS.API.STREAM.NAMES")
            seen["names_b"] = await api(b, "$JS.API.STREAM.NAMES")
            # KV and object store of the same names hold each account's own values
            kva = await ja.create_key_value(bucket="kv")
            kvb = await jb.create_key_value(bucket="kv")
            await kva.put("k", b"A")
            await kvb.put("k", b"B")
            assert (await kva.get("k")).value == b"A"
            assert (await kvb.get("k")).value == b"B"
            oa = await ja.create_object_store("obj")
            ob = await jb.create_object_store("obj")
            await oa.put("o", b"A" * 1000)
            with pytest.raises(nats.js.errors.ObjectNotFoundError):
                await ob.get("o")
            assert (await oa.get("o")).data == b"A" * 1000
            # B's own limits: max_streams 3 (S, KV_kv, OBJ_obj); A has none
            seen["b_fourth"] = await api(
                b, "$JS.API.STREAM.CREATE.T", {"name": "T", "subjects": ["t"]}
            )
            await ja.add_stream(name="T", subjects=["t"])
            seen["info_a"] = _strip(await api(a, "$JS.API.INFO"))
            seen["info_b"] = _strip(await api(b, "$JS.API.INFO"))
            seen["info_c"] = await api(c, "$JS.API.INFO")
            seen["info_sys"] = await api(await connect(sp.url, "sys"), "$JS.API.INFO")
            for k in ("info_a", "info_b"):  # the stores' byte counts differ by server
                seen[k].pop("storage")
            return seen
        finally:
            for nc in (a, b, c):
                await nc.close()

    seen = run(main)
    assert seen["names_a"]["streams"] is None and seen["names_b"]["streams"] == ["S"]
    assert seen["b_fourth"]["error"] == {
        "code": 400,
        "err_code": 10027,
        "description": "maximum number of streams reached",
    }
    assert seen["info_a"]["streams"] == 3 and seen["info_b"]["streams"] == 3
    assert seen["info_b"]["limits"]["max_storage"] == 5 * 1024 * 1024
    assert seen["info_b"]["limits"]["max_streams"] == 3
    assert seen["info_a"]["limits"]["max_storage"] == -1
    for k in ("info_c", "info_sys"):
        assert seen[k]["error"]["err_code"] == 10039, seen[k]


def test_jetstream_accounts_share_the_server_limits(start_server: Any, server_kind: str) -> None:
    """``max_file_store`` (10 MB) is the server's: A's reservation leaves B the rest (10047)."""
    sp: ServerProcess = start_server(server_kind, config=JS_ACCOUNTS_CONF)

    async def main() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        a = await connect(sp.url, "a")
        b = await connect(sp.url, "b")
        try:
            ra = await api(
                a,
                "$JS.API.STREAM.CREATE.R",
                {"name": "R", "subjects": ["r"], "max_bytes": 7_000_000},
            )
            too_much = await api(
                b,
                "$JS.API.STREAM.CREATE.R",
                {"name": "R", "subjects": ["r"], "max_bytes": 4_000_000},
            )
            fits = await api(
                b,
                "$JS.API.STREAM.CREATE.R",
                {"name": "R", "subjects": ["r"], "max_bytes": 3_000_000},
            )
            return ra, too_much, fits
        finally:
            for nc in (a, b):
                await nc.close()

    ra, too_much, fits = run(main)
    assert "error" not in ra, ra
    assert too_much["error"] == {
        "code": 500,
        "err_code": 10047,
        "description": "insufficient storage resources available",
    }
    assert "error" not in fits, fits


def test_jetstream_accounts_survive_restart(start_server: Any, tmp_path: Path) -> None:
    """Each account's streams come back from ``<store_dir>/jetstream/<account>/streams``;
    a store laid out before per-account directories is moved into the home account's."""
    wd = tmp_path / "node"
    conf = JS_ACCOUNTS_CONF.replace("{workdir}", str(wd))
    sp: ServerProcess = start_server("trijet", config=conf, workdir=wd)

    async def fill() -> None:
        a = await connect(sp.url, "a")
        b = await connect(sp.url, "b")
        try:
            await a.jetstream().add_stream(name="S", subjects=["x"])
            await b.jetstream().add_stream(name="S", subjects=["x"])
            await a.jetstream().publish("x", b"a")
            for _ in range(2):
                await b.jetstream().publish("x", b"b")
        finally:
            for nc in (a, b):
                await nc.close()

    run(fill)
    assert sp.stop() == 0
    js_dir = wd / "js" / "jetstream"
    assert (js_dir / "A" / "streams" / "S").is_dir()
    assert (js_dir / "B" / "streams" / "S").is_dir()
    # the home account's streams as an older trijet laid them out
    (js_dir / "A").rename(js_dir / "old")
    (js_dir / "old" / "streams").rename(js_dir / "streams")
    sp = start_server("trijet", config=conf, workdir=wd)

    async def read() -> tuple[int, int]:
        a = await connect(sp.url, "a")
        b = await connect(sp.url, "b")
        try:
            ia = await a.jetstream().stream_info("S")
            ib = await b.jetstream().stream_info("S")
            return ia.state.messages, ib.state.messages
        finally:
            for nc in (a, b):
                await nc.close()

    assert run(read) == (1, 2)
    assert (js_dir / "A" / "streams" / "S").is_dir() and not (js_dir / "streams").exists()


def test_account_purge_from_the_system_account(start_server: Any, server_kind: str) -> None:
    """``$JS.API.ACCOUNT.PURGE.<account>``: from the system account, ``initiated`` for any
    account name and every stream of that account deleted (consumer, then stream
    advisories in it), its directory removed; other accounts untouched; from a normal
    account (even for itself) or without an account token, no reply and nothing deleted."""
    sp: ServerProcess = start_server(server_kind, config=JS_ACCOUNTS_CONF)
    purged = b"io.nats.jetstream.api.v1.account_purge_response"

    async def main() -> dict[str, Any]:
        a = await connect(sp.url, "a")
        b = await connect(sp.url, "b")
        sys_ = await connect(sp.url, "sys")
        out: dict[str, Any] = {}
        try:
            for nc in (a, b):
                js = nc.jetstream()
                await js.add_stream(name="S", subjects=["x"])
                await js.add_stream(name="T", subjects=["y"])
                await js.publish("x", b"1")
                await js.add_consumer("S", durable_name="D")
            b_adv = await b.subscribe("$JS.EVENT.ADVISORY.*.DELETED.>")
            sys_audit = await sys_.subscribe("$JS.EVENT.ADVISORY.API")
            await synced(b)
            await synced(sys_)
            for nc in (a, b):  # not an operator: no reply
                with pytest.raises(nats.errors.TimeoutError):
                    await nc.request("$JS.API.ACCOUNT.PURGE.B", b"", timeout=1)
            with pytest.raises(nats.errors.TimeoutError):
                await sys_.request("$JS.API.ACCOUNT.PURGE", b"", timeout=1)
            out["names_b_before"] = (await api(b, "$JS.API.STREAM.NAMES"))["streams"]
            for acc in ("B", "C", "NOPE"):
                msg = await sys_.request(f"$JS.API.ACCOUNT.PURGE.{acc}", b"", timeout=WAIT_S)
                out[acc] = json.loads(msg.data)
            deleted: list[str] = []
            try:
                while len(deleted) < 3:
                    deleted.append((await b_adv.next_msg(timeout=WAIT_S)).subject)
            except nats.errors.TimeoutError:
                pass  # nats-server 2.15.1 now and then leaves one out (checked below)
            out["deleted"] = sorted(deleted)
            audit = json.loads((await sys_audit.next_msg(timeout=WAIT_S)).data)
            out["audit"] = {k: audit[k] for k in ("type", "client", "subject", "response")}
            out["names_b"] = (await api(b, "$JS.API.STREAM.NAMES"))["streams"]
            out["names_a"] = (await api(a, "$JS.API.STREAM.NAMES"))["streams"]
            info_b = await api(b, "$JS.API.INFO")
            # B's API counted its 2 creates, its consumer create, 2 NAMES; not the purge
            out["info_b"] = (info_b["streams"], info_b["api"]["total"])
            # B carries on with JetStream afterwards
            await b.jetstream().add_stream(name="S", subjects=["x"])
            out["again"] = (await b.jetstream().publish("x", b"2")).seq
            return out
        finally:
            for nc in (a, b, sys_):
                await nc.close()

    out = run(main)
    assert out["names_b_before"] == ["S", "T"]
    for acc in ("B", "C", "NOPE"):
        assert out[acc] == {"type": purged.decode(), "initiated": True}, out[acc]
    every_deletion = [
        "$JS.EVENT.ADVISORY.CONSUMER.DELETED.S.D",
        "$JS.EVENT.ADVISORY.STREAM.DELETED.S",
        "$JS.EVENT.ADVISORY.STREAM.DELETED.T",
    ]
    if server_kind == "reference":
        # seen in CI and here about one run in eight: the reference's purge (a goroutine
        # deleting stream after stream) sent no STREAM.DELETED for the stream that had a
        # consumer; trijet is held to all three
        assert set(out["deleted"]) <= set(every_deletion) and len(out["deleted"]) >= 2, out
    else:
        assert out["deleted"] == every_deletion
    assert out["audit"]["client"] == {} and out["audit"]["subject"] == "$JS.API.ACCOUNT.PURGE.B"
    assert out["audit"]["type"] == "io.nats.jetstream.advisory.v1.api_audit"
    assert out["names_b"] is None and out["info_b"] == (0, 5)
    assert out["names_a"] == ["S", "T"]
    assert out["again"] == 1
    assert not (sp.workdir / "js" / "jetstream" / "B" / "streams" / "T").exists()
