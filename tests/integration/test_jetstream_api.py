"""The stream management and message API end to end with nats-py against trijet.

One trijet (``-js``, temp store) serves the module — and the same tests run
against the reference nats-server, so the expectations are nats-server's;
every test uses its own stream names and deletes its streams.  What is checked is what applications
see through nats-py: ``get_msg`` (by sequence, last by subject, next by
subject, direct), ``delete_msg``, ``purge_stream`` with filter/seq/keep,
``update_stream`` (capture follows new subjects, shrinking limits removes
messages, forbidden changes are refused), ``stream_info`` with
``subjects_filter``, and a KeyValue bucket with ``direct`` gets.  The exact
wire answers are compared with nats-server in
``tests/compat/test_js_api_compat.py``.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import nats
import nats.errors
import pytest
from nats.js.api import KeyValueConfig, StreamConfig
from nats.js.errors import BadRequestError, NotFoundError, ServerError

from tests.support import ServerProcess, reference_binary, start_server
from tests.support.aio import noop_cb, run


@pytest.fixture(scope="module", params=["trijet", "reference"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """trijet, and the reference nats-server to keep these expectations honest."""
    kind = request.param
    if kind == "reference" and reference_binary() is None:
        pytest.skip("reference nats-server not installed")
    tmp = Path(tmp_path_factory.mktemp("jsapi"))
    sp = start_server(kind, ["-js", "-sd", str(tmp / "store")], workdir=tmp / "srv")
    try:
        yield sp
    finally:
        sp.stop()


def with_js(server: ServerProcess, body: Callable[[Any, Any], Awaitable[None]]) -> None:
    """Run ``body(nc, js)`` on a fresh connection; streams are deleted afterwards."""

    async def main() -> None:
        nc = await nats.connect(server.url, error_cb=noop_cb)
        js = nc.jetstream()
        try:
            await body(nc, js)
        finally:
            for name in await js.streams_info():
                await js.delete_stream(name.config.name)
            await nc.close()

    run(main)


def test_get_msg_forms(server: ServerProcess) -> None:
    async def body(nc: Any, js: Any) -> None:
        await js.add_stream(name="G", subjects=["g.>"])
        await js.publish("g.a", b"one")
        await js.publish("g.b", b"two", headers={"X-K": "v"})
        await js.publish("g.a", b"three")
        m = await js.get_msg("G", 2)
        assert (m.subject, m.seq, m.data, m.headers) == ("g.b", 2, b"two", {"X-K": "v"})
        m = await js.get_last_msg("G", "g.a")
        assert (m.seq, m.data) == (3, b"three")
        m = await js.get_msg("G", seq=2, subject="g.a", next=True)
        assert (m.seq, m.data) == (3, b"three")
        m = await js.get_msg("G", subject="g.*")
        assert m.seq == 3
        with pytest.raises(NotFoundError) as exc:
            await js.get_msg("G", 9)
        assert exc.value.err_code == 10037
        with pytest.raises(NotFoundError) as exc:
            await js.get_msg("NOPE", 1)
        assert exc.value.err_code == 10059
        with pytest.raises(BadRequestError) as exc:  # no selector at all
            await js.get_msg("G")
        assert exc.value.err_code == 10003

    with_js(server, body)


def test_delete_msg_and_its_refusals(server: ServerProcess) -> None:
    async def body(nc: Any, js: Any) -> None:
        await js.add_stream(name="D", subjects=["d.>"])
        for i in range(4):
            await js.publish("d.x", b"m%d" % i)
        assert await js.delete_msg("D", 2) is True
        with pytest.raises(NotFoundError):
            await js.get_msg("D", 2)
        with pytest.raises(BadRequestError) as exc:  # already deleted, in between
            await js.delete_msg("D", 2)
        assert (exc.value.err_code, exc.value.description) == (10043, "sequence 2 not found")
        with pytest.raises(ServerError) as exc2:
            await js.delete_msg("D", 99)
        assert (exc2.value.err_code, exc2.value.description) == (10057, "stream store EOF")
        info = await js.stream_info("D")
        assert (info.state.messages, info.state.num_deleted) == (3, 1)
        # deny_delete: refused, nothing changes
        await js.add_stream(name="DD", subjects=["dd"], deny_delete=True)
        await js.publish("dd", b"keep")
        with pytest.raises(ServerError) as exc2:
            await js.delete_msg("DD", 1)
        assert exc2.value.description == "message delete not permitted"
        assert (await js.get_msg("DD", 1)).data == b"keep"

    with_js(server, body)


def test_purge_filter_seq_keep(server: ServerProcess) -> None:
    async def body(nc: Any, js: Any) -> None:
        await js.add_stream(name="P", subjects=["p.>"])
        for subj in ["p.a", "p.b", "p.a", "p.c", "p.a", "p.b"]:
            await js.publish(subj, b"x")
        assert await js.purge_stream("P", subject="p.a", keep=1) is True
        info = await js.stream_info("P", subjects_filter=">")
        assert info.state.subjects == {"p.a": 1, "p.b": 2, "p.c": 1}
        assert await js.purge_stream("P", seq=4) is True  # everything below 4
        info = await js.stream_info("P", subjects_filter="p.*")
        assert (info.state.first_seq, info.state.messages) == (4, 3)
        assert await js.purge_stream("P", keep=1) is True
        info = await js.stream_info("P")
        assert (info.state.messages, info.state.first_seq, info.state.last_seq) == (1, 6, 6)
        with pytest.raises(BadRequestError) as exc:
            await js.purge_stream("P", seq=2, keep=1)
        assert exc.value.err_code == 10003
        assert await js.purge_stream("P") is True
        info = await js.stream_info("P")
        assert (info.state.messages, info.state.first_seq) == (0, 7)

    with_js(server, body)


def test_update_stream(server: ServerProcess) -> None:
    async def body(nc: Any, js: Any) -> None:
        await js.add_stream(name="U", subjects=["u.a"])
        for i in range(5):
            await js.publish("u.a", b"%d" % i)
        # capture follows the new subjects; the old one is released
        si = await js.update_stream(StreamConfig(name="U", subjects=["u.b"], max_msgs=3))
        assert si.config.subjects == ["u.b"] and si.state.messages == 3
        assert (await js.publish("u.b", b"new")).seq == 6
        with pytest.raises(nats.js.errors.NoStreamResponseError):
            await js.publish("u.a", b"gone")
        si = await js.update_stream(
            StreamConfig(name="U", subjects=["u.b"], max_msgs=3, description="d")
        )
        assert si.config.description == "d"
        with pytest.raises(ServerError) as exc:
            await js.update_stream(StreamConfig(name="U", subjects=["u.b"], storage="memory"))
        assert exc.value.err_code == 10052
        with pytest.raises(NotFoundError):
            await js.update_stream(StreamConfig(name="NOPE", subjects=["n"]))
        info = await js.stream_info("U")
        assert (info.state.messages, info.state.last_seq) == (3, 6)

    with_js(server, body)


def test_direct_get_and_kv(server: ServerProcess) -> None:
    async def body(nc: Any, js: Any) -> None:
        await js.add_stream(name="DG", subjects=["dg.>"], allow_direct=True)
        await js.publish("dg.a", b"1", headers={"H": "x"})
        await js.publish("dg.b", b"2")
        m = await js.get_msg("DG", 1, direct=True)
        assert (m.subject, m.seq, m.data) == ("dg.a", 1, b"1")
        assert m.headers["H"] == "x" and m.headers["Nats-Stream"] == "DG"
        m = await js.get_last_msg("DG", "dg.b", direct=True)
        assert (m.seq, m.data) == (2, b"2")
        with pytest.raises(NotFoundError):
            await js.get_msg("DG", 7, direct=True)
        # a stream without allow_direct has no direct-get responder
        await js.add_stream(name="ND", subjects=["nd"])
        with pytest.raises(nats.errors.NoRespondersError):
            await nc.request("$JS.API.DIRECT.GET.ND", b'{"seq":1}', timeout=2)
        # direct gets are not API calls
        before = json.loads((await nc.request("$JS.API.INFO", b"")).data)["api"]
        for _ in range(3):
            await js.get_msg("DG", 1, direct=True)
        after = json.loads((await nc.request("$JS.API.INFO", b"")).data)["api"]
        assert after["total"] == before["total"] + 1  # the first INFO only
        kv = await js.create_key_value(KeyValueConfig(bucket="cfg", direct=True, history=2))
        await kv.put("k", b"v1")
        await kv.put("k", b"v2")
        entry = await kv.get("k")
        assert (entry.value, entry.revision) == (b"v2", 2)
        assert (await kv.get("k", revision=1)).value == b"v1"
        with pytest.raises(nats.js.errors.KeyNotFoundError):
            await kv.get("missing")

    with_js(server, body)


def test_stream_info_subjects_and_deleted(server: ServerProcess) -> None:
    async def body(nc: Any, js: Any) -> None:
        await js.add_stream(name="I", subjects=["i.>"])
        for subj in ["i.a", "i.b", "i.a", "i.c.d"]:
            await js.publish(subj, b"x")
        info = await js.stream_info("I", subjects_filter="i.*")
        assert info.state.subjects == {"i.a": 2, "i.b": 1}
        await js.delete_msg("I", 2)
        raw = await nc.request("$JS.API.STREAM.INFO.I", b'{"deleted_details":true}')
        state = json.loads(raw.data)["state"]
        assert (state["deleted"], state["num_deleted"]) == ([2], 1)
        bad = json.loads((await nc.request("$JS.API.STREAM.INFO.I", b'{"offset":"x"}')).data)
        assert bad["error"]["err_code"] == 10025

    with_js(server, body)
