"""Shared helpers of the leaf node tests (``test_leafnodes*.py``): bounded waits, a hub
that listens for leafs and a leaf solicited to it, requests across a link or route."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import nats
import nats.errors
import pytest

from tests.support import ServerProcess, reference_binary, start_server
from tests.support.aio import noop_cb
from tests.support.cluster import Cluster, get_json, start_cluster

WAIT_S = 10.0
POLL_S = 0.02

requires_reference = pytest.mark.skipif(
    reference_binary() is None, reason="reference nats-server not installed"
)


async def poll(pred: Any, what: str, wait_s: float = WAIT_S) -> None:
    """Until ``pred()`` (sync, run in a thread) holds; bounded."""
    deadline = time.monotonic() + wait_s
    while not await asyncio.to_thread(pred):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(POLL_S)


async def wait_interest(pub: nats.NATS, sub: nats.NATS, tag: str) -> None:
    """Until ``pub``'s server has every interest ``sub`` registered so far: a responder
    subscribed now is announced behind it, in order, over the same link."""

    async def respond(msg: Any) -> None:
        await msg.respond(b"ok")

    s = await sub.subscribe(f"ready.{tag}", cb=respond)
    await sub.flush()
    deadline = time.monotonic() + WAIT_S
    while True:
        try:
            await pub.request(f"ready.{tag}", b"", timeout=0.5)
            break
        except (nats.errors.NoRespondersError, nats.errors.TimeoutError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(POLL_S)
    await s.unsubscribe()


async def held(sub: Any) -> list[Any]:
    """Everything ``sub`` holds now (call once a marker that followed the traffic on the
    same path has arrived on another subscription of the same connection: nats-py queued
    the traffic first)."""
    return [await sub.next_msg(timeout=WAIT_S) for _ in range(sub.pending_msgs)]


def hub_cluster(kind: str, n: int, base: Path, *, domain: str | None = None) -> Cluster:
    """An ``n``-node cluster whose nodes listen for leaf links."""
    return start_cluster(
        kind,  # type: ignore[arg-type]
        n,
        domain=domain,
        workdir=base,
        extra_conf="leafnodes { host: 127.0.0.1, port: -1 }",
    )


def start_leaf(kind: str, name: str, hub_monitoring_url: str, workdir: Path) -> ServerProcess:
    """A single leaf server named ``name`` solicited to the hub behind ``hub_monitoring_url``."""
    port = (get_json(f"{hub_monitoring_url}/varz") or {})["leaf"]["port"]
    return start_server(
        kind,  # type: ignore[arg-type]
        ["-m", "-1"],
        config=f'server_name: {name}\nleafnodes {{ remotes: [ {{ url: "nats://127.0.0.1:{port}" }} ] }}\n',
        workdir=workdir,
    )


async def requests_both_ways(url_a: str, url_b: str, path: str) -> None:
    """A 2,000-byte request answered across the ``path`` (link or route) each way."""
    a = await nats.connect(url_a, error_cb=noop_cb)
    b = await nats.connect(url_b, error_cb=noop_cb)
    try:
        for x, y, tag in ((a, b, "b"), (b, a, "a")):

            async def echo(msg: Any) -> None:
                await msg.respond(b"re:" + msg.data)

            await y.subscribe(f"echo.{tag}", cb=echo)
            await y.flush()
            deadline = time.monotonic() + WAIT_S
            while True:
                try:
                    r = await x.request(f"echo.{tag}", b"x" * 2000, timeout=0.5)
                    break
                except (nats.errors.NoRespondersError, nats.errors.TimeoutError):
                    assert time.monotonic() < deadline, f"no answer across the {path} ({tag})"
            assert r.data == b"re:" + b"x" * 2000
    finally:
        await a.close()
        await b.close()
