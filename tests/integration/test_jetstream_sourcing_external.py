"""Mirrors and sources from another JetStream domain (``external.api``), end to end with nats-py.

Topology: a *hub* server (domain ``hub``) holds the origin stream; a *spoke*
server (domain ``spoke``) holds the mirrors and sourcing streams, which name
the origin through ``external.api: $JS.hub.API``.  The spoke creates a push
consumer on the hub over that API and copies what it delivers.

* reference: two nats-server 2.15.1 processes joined by a leafnode (how
  nats-server deployments connect domains);
* trijet: two trijet processes joined the same way (the spoke solicits the
  hub's leafnode port).  The tests use domain-qualified API prefixes
  (``$JS.hub.API``/``$JS.spoke.API``).

The differential test runs one scenario on both topologies and compares
StreamInfo and the copied messages modulo volatile fields (times, ``active``
values, the origin identity at the end of ``Nats-Stream-Source``).  Copying
is asynchronous, so the tests ask for a stream's info again (bounded) until
it reaches the expected state.
"""

from __future__ import annotations

import asyncio
import base64
import json
import signal
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nats
import pytest

from tests.support import ServerProcess, reference_binary, start_server
from tests.support.aio import noop_cb, run

WAIT_S = 20.0
STALL_WAIT_S = 60.0  # origin deleted: 10 s without heartbeats, then retries with backoff
VOLATILE = {"created", "ts", "first_ts", "last_ts", "cluster", "metadata", "did_create"}
HUB_API = "$JS.hub.API"
SPOKE_API = "$JS.spoke.API"
EXTERNAL = {"api": HUB_API, "deliver": ""}

requires_reference = pytest.mark.skipif(
    reference_binary() is None, reason="reference nats-server not installed"
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Domains:
    """A hub and a spoke server of one kind; a restarted spoke keeps its store."""

    kind: str
    base: Path
    link_port: int
    hub: ServerProcess
    spoke: ServerProcess

    @staticmethod
    def start(kind: str, base: Path) -> Domains:
        link = _free_port()
        hub = start_server(kind, config=_hub_conf(kind, link), workdir=base / "hub")  # type: ignore[arg-type]
        try:
            spoke = _start_spoke(kind, base, link)
        except BaseException:
            hub.stop()
            raise
        d = Domains(kind, base, link, hub, spoke)
        run(d.wait_linked, timeout=WAIT_S + 5)
        return d

    def kill_spoke(self) -> None:
        self.spoke.send_signal(signal.SIGKILL)
        self.spoke.wait(10)

    def start_spoke(self) -> None:
        self.spoke = _start_spoke(self.kind, self.base, self.link_port)
        run(self.wait_linked, timeout=WAIT_S + 5)

    async def wait_linked(self) -> None:
        """Until the spoke reaches the hub's JetStream API (bounded)."""
        nc = await nats.connect(self.spoke.url, error_cb=noop_cb)
        try:
            deadline = asyncio.get_running_loop().time() + WAIT_S
            while True:
                try:
                    await nc.request(HUB_API + ".INFO", b"", timeout=0.5)
                    return
                except (nats.errors.TimeoutError, nats.errors.NoRespondersError):
                    if asyncio.get_running_loop().time() > deadline:
                        raise
                    await asyncio.sleep(0.05)
        finally:
            await nc.close()

    def stop(self) -> None:
        for sp in (self.spoke, self.hub):
            if sp.alive():
                sp.stop()


def _hub_conf(kind: str, link: int) -> str:
    text = 'server_name: hub\njetstream { store_dir: "{workdir}/js", domain: hub }\n'
    return text + f"leafnodes {{ listen: 127.0.0.1:{link} }}\n"


def _start_spoke(kind: str, base: Path, link: int) -> ServerProcess:
    text = 'server_name: spoke\njetstream { store_dir: "{workdir}/js", domain: spoke }\n'
    text += (
        f'leafnodes {{ remotes [ {{ url: "nats://127.0.0.1:{link}" }} ], reconnect: "250ms" }}\n'
    )
    return start_server(kind, config=text, workdir=base / "spoke")  # type: ignore[arg-type]


def _params() -> list[Any]:
    return [
        pytest.param("reference", marks=requires_reference),
        "trijet",
    ]


@pytest.fixture(params=_params())
def domains(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Domains]:
    d = Domains.start(request.param, tmp_path)
    try:
        yield d
    finally:
        d.stop()


# --------------------------------------------------------------------------- helpers


def _clean(d: Any) -> Any:
    if isinstance(d, dict):
        out = {k: _clean(v) for k, v in d.items() if k not in VOLATILE}
        if isinstance(out.get("active"), int) and out["active"] >= 0:
            out["active"] = "seen"
        return out
    if isinstance(d, list):
        return [_clean(x) for x in d]
    return d


async def _api(nc: Any, subject: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    data = json.dumps(body).encode() if body is not None else b""
    reply = await nc.request(subject, data, timeout=5)
    doc: dict[str, Any] = json.loads(reply.data)
    return doc


async def _info_when(
    nc: Any, name: str, ok: Callable[[dict[str, Any]], bool], wait_s: float = WAIT_S
) -> dict[str, Any]:
    """Spoke STREAM.INFO of ``name`` once ``ok(info)`` holds (asked again until ``wait_s``)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    while True:
        info = await _api(nc, f"{SPOKE_API}.STREAM.INFO.{name}")
        if ok(info) or loop.time() > deadline:
            return info
        await asyncio.sleep(0.05)


def _last(n: int) -> Callable[[dict[str, Any]], bool]:
    return lambda i: bool(i.get("state", {}).get("last_seq", 0) >= n)


async def _create(nc: Any, cfg: dict[str, Any]) -> None:
    doc = await _api(nc, f"{SPOKE_API}.STREAM.CREATE.{cfg['name']}", cfg)
    assert "error" not in doc, doc


async def _messages(nc: Any, name: str, last: int) -> list[tuple[int, str, str, bytes]]:
    """``(seq, subject, headers, data)`` of stream ``name`` on the spoke;
    the origin identity at the end of ``Nats-Stream-Source`` is cut off."""
    out = []
    for seq in range(1, last + 1):
        doc = await _api(nc, f"{SPOKE_API}.STREAM.MSG.GET.{name}", {"seq": seq})
        if "error" in doc:
            continue
        m = doc["message"]
        hdrs = base64.b64decode(m.get("hdrs", "")).decode()
        lines = []
        for line in hdrs.split("\r\n"):
            if line.startswith("Nats-Stream-Source:"):
                line = line.rsplit(" ", 1)[0]
            lines.append(line)
        out.append((seq, m["subject"], "\r\n".join(lines), base64.b64decode(m.get("data", ""))))
    return out


def _source_seqs(msgs: list[tuple[int, str, str, bytes]]) -> list[int]:
    """The origin sequences named by each message's ``Nats-Stream-Source``."""
    seqs = []
    for _, _, hdrs, _ in msgs:
        for line in hdrs.split("\r\n"):
            if line.startswith("Nats-Stream-Source:"):
                seqs.append(int(line.split()[2]))
    return seqs


# --------------------------------------------------------------------------- scenarios


def _scenario(d: Domains) -> list[Any]:
    async def main() -> list[Any]:
        hub = await nats.connect(d.hub.url, error_cb=noop_cb)
        spoke = await nats.connect(d.spoke.url, error_cb=noop_cb)
        js = hub.jetstream(domain="hub")
        out: list[Any] = []
        try:
            await js.add_stream(name="O", subjects=["o.>"])
            subjects = ["o.a", "o.b", "o.a", "o.c", "o.b", "o.a"]
            for i, subject in enumerate(subjects, 1):
                hdrs = {"Nats-Msg-Id": f"id{i}", "Nats-Expected-Stream": "O", "X": "y"}
                await js.publish(subject, b"m%d" % i, headers=hdrs)
            await js.delete_msg("O", 3)
            await _create(
                spoke,
                {
                    "name": "M",
                    "mirror": {"name": "O", "external": {"api": HUB_API, "deliver": "dlv.hub"}},
                },
            )
            await _create(
                spoke,
                {
                    "name": "MF",
                    "mirror": {"name": "O", "filter_subject": "o.a", "external": EXTERNAL},
                },
            )
            await _create(
                spoke,
                {
                    "name": "S",
                    "subjects": ["s.>"],
                    "sources": [{"name": "O", "filter_subject": "o.b", "external": EXTERNAL}],
                },
            )
            await _create(
                spoke,
                {
                    "name": "ST",
                    "sources": [
                        {
                            "name": "O",
                            "subject_transforms": [{"src": "o.*", "dest": "t.$1"}],
                            "external": EXTERNAL,
                        }
                    ],
                },
            )
            out.append(_clean(await _info_when(spoke, "M", _last(6))))
            out.append(_clean(await _info_when(spoke, "MF", _last(6))))
            out.append(_clean(await _info_when(spoke, "S", _last(2))))
            out.append(_clean(await _info_when(spoke, "ST", _last(5))))
            # a live message after the consumers are set up
            await js.publish("o.b", b"late", headers={"Nats-Msg-Id": "late"})
            for name, last in (("M", 7), ("MF", 6), ("S", 3), ("ST", 6)):
                info = await _info_when(spoke, name, _last(last))
                out.append(_clean(info))
                out.append(await _messages(spoke, name, info["state"]["last_seq"]))
        finally:
            await hub.close()
            await spoke.close()
        return out

    return run(main)


@requires_reference
def test_external_mirrors_and_sources_match_the_reference(tmp_path: Path) -> None:
    results = {}
    for kind in ("reference", "trijet"):
        d = Domains.start(kind, tmp_path / kind)
        try:
            results[kind] = _scenario(d)
        finally:
            d.stop()
    for ref, ours in zip(results["reference"], results["trijet"], strict=True):
        assert ours == ref
    m = results["trijet"][4]
    assert m["state"]["last_seq"] == 7 and m["state"]["num_deleted"] == 1
    assert m["mirror"]["external"] == {"api": HUB_API, "deliver": "dlv.hub"}
    assert m["mirror"]["lag"] == 0 and m["mirror"]["active"] == "seen"
    s_msgs = results["trijet"][9]
    assert _source_seqs(s_msgs) == [2, 5, 7]


def test_spoke_restart_resumes_without_duplicates_or_gaps(domains: Domains) -> None:
    async def first() -> None:
        hub = await nats.connect(domains.hub.url, error_cb=noop_cb)
        spoke = await nats.connect(domains.spoke.url, error_cb=noop_cb)
        js = hub.jetstream(domain="hub")
        await js.add_stream(name="O", subjects=["o.>"])
        await _create(spoke, {"name": "M", "mirror": {"name": "O", "external": EXTERNAL}})
        await _create(
            spoke,
            {
                "name": "S",
                "sources": [{"name": "O", "filter_subject": "o.a", "external": EXTERNAL}],
            },
        )
        for i in range(30):
            await js.publish("o.a" if i % 2 else "o.b", b"v%d" % i)
        assert (await _info_when(spoke, "M", _last(30)))["state"]["last_seq"] == 30
        assert (await _info_when(spoke, "S", _last(15)))["state"]["last_seq"] == 15
        await hub.close()
        await spoke.close()

    run(first)
    domains.kill_spoke()

    async def while_down() -> None:
        hub = await nats.connect(domains.hub.url, error_cb=noop_cb)
        js = hub.jetstream(domain="hub")
        for i in range(30, 50):
            await js.publish("o.a" if i % 2 else "o.b", b"v%d" % i)
        await hub.close()

    run(while_down)
    domains.start_spoke()

    async def second() -> tuple[dict[str, Any], dict[str, Any], list[int]]:
        hub = await nats.connect(domains.hub.url, error_cb=noop_cb)
        spoke = await nats.connect(domains.spoke.url, error_cb=noop_cb)
        js = hub.jetstream(domain="hub")
        for i in range(50, 60):
            await js.publish("o.a" if i % 2 else "o.b", b"v%d" % i)
        m = await _info_when(spoke, "M", _last(60))
        s = await _info_when(spoke, "S", _last(30))
        seqs = _source_seqs(await _messages(spoke, "S", s["state"]["last_seq"]))
        await hub.close()
        await spoke.close()
        return m, s, seqs

    m, s, seqs = run(second)
    assert (m["state"]["messages"], m["state"]["first_seq"], m["state"]["last_seq"]) == (60, 1, 60)
    assert m["mirror"]["lag"] == 0
    assert (s["state"]["messages"], s["state"]["last_seq"]) == (30, 30)
    assert seqs == list(range(2, 61, 2))  # every o.a, once, in order
    assert s["sources"][0]["seq"] == 60


def test_origin_deleted_and_recreated(domains: Domains) -> None:
    """On trijet this also needs push consumers to survive their stream's
    deletion (today the dispatcher reads the closed store and the server exits)."""

    async def main() -> None:
        hub = await nats.connect(domains.hub.url, error_cb=noop_cb)
        spoke = await nats.connect(domains.spoke.url, error_cb=noop_cb)
        js = hub.jetstream(domain="hub")
        try:
            await js.add_stream(name="O", subjects=["o.>"])
            await _create(spoke, {"name": "S", "sources": [{"name": "O", "external": EXTERNAL}]})
            for i in range(5):
                await js.publish("o.x", b"%d" % i)
            assert (await _info_when(spoke, "S", _last(5)))["state"]["last_seq"] == 5
            await js.delete_stream("O")
            info = await _info_when(spoke, "S", lambda i: "error" in i["sources"][0], STALL_WAIT_S)
            assert info["sources"][0]["error"] == {
                "code": 404,
                "err_code": 10059,
                "description": "stream not found",
            }
            await js.add_stream(name="O", subjects=["o.>"])
            for i in range(3):
                await js.publish("o.y", b"new%d" % i)
            # a new identity: the source copies the new origin from its start
            s = await _info_when(spoke, "S", _last(8), STALL_WAIT_S)
            assert (s["state"]["messages"], s["sources"][0]["seq"]) == (8, 3)
            assert "error" not in s["sources"][0]
            msgs = await _messages(spoke, "S", 8)
            assert _source_seqs(msgs) == [1, 2, 3, 4, 5, 1, 2, 3]
            assert [m[3] for m in msgs[5:]] == [b"new0", b"new1", b"new2"]
        finally:
            await hub.close()
            await spoke.close()

    run(main, timeout=2 * STALL_WAIT_S + 30)


def test_kv_bucket_mirrored_to_the_spoke(domains: Domains) -> None:
    """A hub KV bucket mirrored to the spoke (``KV_<bucket>`` mirroring through
    ``external.api``) reads there as the same bucket: the last value of each key."""

    async def main() -> None:
        hub = await nats.connect(domains.hub.url, error_cb=noop_cb)
        spoke = await nats.connect(domains.spoke.url, error_cb=noop_cb)
        try:
            kv = await hub.jetstream(domain="hub").create_key_value(bucket="cfg")
            for key, value in (("a", b"1"), ("b", b"2"), ("a", b"3")):
                await kv.put(key, value)
            await _create(
                spoke,
                {
                    "name": "KV_cfg",
                    "mirror": {"name": "KV_cfg", "external": EXTERNAL},
                    "max_msgs_per_subject": 1,
                    "allow_rollup_hdrs": True,
                    "deny_delete": True,
                    "allow_direct": True,
                    "mirror_direct": True,
                },
            )
            info = await _info_when(spoke, "KV_cfg", _last(3))
            assert info["state"]["messages"] == 2
            mirror = await spoke.jetstream(domain="spoke").key_value("cfg")
            assert (await mirror.get("a")).value == b"3"
            assert (await mirror.get("b")).value == b"2"
        finally:
            await hub.close()
            await spoke.close()

    run(main)
