"""Differential: waiting pull requests of ``pinned_client`` and ``overflow``
consumers take turns, and what a consumer resumed early does with the
requests that waited through its pause -- trijet against nats-server 2.15.1.

Seen with the reference (one node here, three nodes in
``tests/integration/test_cluster_r3_pull_turns``):

* two requests carrying the pin take turns (messages 1, 3, 5 and 2, 4, 6);
  a request without the pin waits until it expires (408);  (two requests
  sent together to a consumer with messages stored may or may not be served
  in turns by the reference -- whether its delivery loop ran in between --:
  not compared);
* with ``overflow``, a request with ``min_pending`` takes its turns while
  the pending count reaches its minimum, the others take theirs throughout
  (the requests and messages arrive while the consumer is paused: served as
  the pause runs out, with every message stored);
* a consumer whose pause runs out serves the requests that waited; one
  resumed early (PAUSE without a time) does not: they are served at the
  consumer's next wake-up -- here a new message --, or expire with 408 and
  their whole batch pending when nothing wakes it first.

Each request's answers are recorded as payloads and statuses (pin ids and
pending counts, which race with the publishes, left out); waits are bounded
and event driven, the quiet checks (nothing more came) as in
``test_js_consumer_pull_compat``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from collections.abc import Iterator
from typing import Any

import nats
import pytest

from tests.support.aio import noop_cb, run
from tests.support.servers import ServerProcess, js_pair, reference_binary

pytestmark = pytest.mark.skipif(
    reference_binary() is None, reason="reference nats-server not installed"
)

WAIT_S = 3.0
QUIET_S = 0.3
EXPIRES_NS = 1_500_000_000
PAUSE_S = 2.0


class Transcript:
    def __init__(self, nc: Any) -> None:
        self.nc = nc
        self.lines: list[str] = []

    async def api(self, subject: str, body: Any = None) -> dict[str, Any]:
        data = b"" if body is None else json.dumps(body).encode()
        msg = await self.nc.request(subject, data, timeout=WAIT_S)
        doc: dict[str, Any] = json.loads(msg.data)
        return doc

    async def waiting(self, stream: str, name: str, n: int) -> None:
        """Until ``n`` requests wait (bounded)."""
        for _ in range(200):
            doc = await self.api(f"$JS.API.CONSUMER.INFO.{stream}.{name}")
            if doc["num_waiting"] == n:
                self.lines.append(f"{name} num_waiting {n}")
                return
            await asyncio.sleep(0.01)
        self.lines.append(f"{name} never {n} waiting")

    async def pull(self, stream: str, name: str, body: dict[str, Any]) -> asyncio.Queue[Any]:
        inbox = self.nc.new_inbox()
        got: asyncio.Queue[Any] = asyncio.Queue()
        await self.nc.subscribe(inbox, cb=got.put)
        subject = f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{name}"
        await self.nc.publish(subject, json.dumps(body).encode(), reply=inbox)
        await self.nc.flush()
        return got

    async def collect(self, label: str, got: asyncio.Queue[Any], expect: int) -> list[Any]:
        """``expect`` answers (a message or a final status), then quiet."""
        out: list[Any] = []
        while True:
            wait = WAIT_S + PAUSE_S + 2 if len(out) < expect else QUIET_S
            try:
                m = await asyncio.wait_for(got.get(), wait)
            except TimeoutError:
                break
            if (m.headers or {}).get("Status") == "100":
                continue
            out.append(m)
        shown = []
        for m in out:
            h = m.headers or {}
            shown.append(
                f"{h['Status']} {h.get('Description', '')}" if "Status" in h else m.data.decode()
            )
        self.lines.append(f"{label}: " + ", ".join(shown))
        return out


def _pause_body(seconds: float) -> dict[str, Any]:
    until = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=seconds)
    return {"pause_until": until.isoformat().replace("+00:00", "Z")}


async def pinned_scenario(t: Transcript, s: str) -> None:
    await t.api(f"$JS.API.STREAM.CREATE.{s}", {"name": s, "subjects": [f"{s}.>"]})
    cfg = {
        "durable_name": "P",
        "ack_policy": "explicit",
        "priority_policy": "pinned_client",
        "priority_groups": ["A"],
        "priority_timeout": 30_000_000_000,
    }
    await t.api(f"$JS.API.CONSUMER.CREATE.{s}.P", {"stream_name": s, "config": cfg})
    await t.nc.request(f"{s}.x", b"m0", timeout=WAIT_S)
    req = {"batch": 1, "expires": EXPIRES_NS, "group": "A"}
    first = await t.collect("first", await t.pull(s, "P", req), 1)
    pin = first[0].headers["Nats-Pin-Id"]
    a = await t.pull(s, "P", {**req, "batch": 3, "id": pin})
    n = await t.pull(s, "P", {**req, "batch": 3})
    b = await t.pull(s, "P", {**req, "batch": 3, "id": pin})
    await t.waiting(s, "P", 3)
    for i in range(1, 7):
        await t.nc.publish(f"{s}.x", b"m%d" % i)
    await t.nc.flush()
    await t.collect("pinned a", a, 3)
    await t.collect("pinned b", b, 3)
    await t.collect("unpinned", n, 1)


async def overflow_scenario(t: Transcript, s: str) -> None:
    await t.api(f"$JS.API.STREAM.CREATE.{s}", {"name": s, "subjects": [f"{s}.>"]})
    cfg = {
        "durable_name": "O",
        "ack_policy": "explicit",
        "priority_policy": "overflow",
        "priority_groups": ["A"],
    }
    await t.api(f"$JS.API.CONSUMER.CREATE.{s}.O", {"stream_name": s, "config": cfg})
    # paused while the requests and the messages arrive, so that every message
    # is stored when the turns start (the minimum reads the pending count)
    await t.api(f"$JS.API.CONSUMER.PAUSE.{s}.O", _pause_body(PAUSE_S))
    req = {"batch": 4, "expires": int((PAUSE_S + 2) * 1e9), "group": "A"}
    a = await t.pull(s, "O", req)
    m = await t.pull(s, "O", {**req, "min_pending": 3})
    b = await t.pull(s, "O", req)
    await t.waiting(s, "O", 3)
    for i in range(8):
        await t.nc.request(f"{s}.x", b"o%d" % i, timeout=WAIT_S)
    await t.collect("plain a", a, 4)
    await t.collect("min_pending 3", m, 3)
    await t.collect("plain b", b, 4)


async def resume_scenario(t: Transcript, s: str) -> None:
    await t.api(f"$JS.API.STREAM.CREATE.{s}", {"name": s, "subjects": [f"{s}.>"]})
    cfg = {"durable_name": "Z", "ack_policy": "explicit"}
    await t.api(f"$JS.API.CONSUMER.CREATE.{s}.Z", {"stream_name": s, "config": cfg})
    for i in range(6):
        await t.nc.publish(f"{s}.x", b"z%d" % i)
    pause = f"$JS.API.CONSUMER.PAUSE.{s}.Z"
    # a pause that runs out: the requests that waited are served
    await t.api(pause, _pause_body(0.6))
    w = await t.pull(s, "Z", {"batch": 1, "expires": EXPIRES_NS})
    await t.collect("after the pause ran out", w, 1)
    # resumed early: not served; it expires with its batch pending
    await t.api(pause, _pause_body(60))
    w = await t.pull(s, "Z", {"batch": 2, "expires": EXPIRES_NS})
    await t.waiting(s, "Z", 1)
    doc = await t.api(pause, {})
    t.lines.append(f"resumed: paused={doc['paused']}")
    got = await t.collect("resumed early", w, 1)
    t.lines.append(f"  pending {got[0].headers.get('Nats-Pending-Messages') if got else None}")
    # resumed early, then a new message wakes the consumer: served
    await t.api(pause, _pause_body(60))
    w = await t.pull(s, "Z", {"batch": 2, "expires": EXPIRES_NS})
    await t.waiting(s, "Z", 1)
    await t.api(pause, {})
    await t.waiting(s, "Z", 1)
    await t.nc.publish(f"{s}.x", b"z6")
    await t.collect("resumed early, then a message", w, 2)


EXPECTED = {
    "pinned": "pinned a: m1, m3, m5",
    "overflow": "min_pending 3: o1, o4, 408 Request Timeout",
    "resume": "resumed early: 408 Request Timeout",
}
SCENARIOS = {"pinned": pinned_scenario, "overflow": overflow_scenario, "resume": resume_scenario}


async def _run(url: str, name: str) -> list[str]:
    nc = await nats.connect(url, error_cb=noop_cb)
    t = Transcript(nc)
    try:
        await SCENARIOS[name](t, name.upper())
    finally:
        await nc.close()
    return t.lines


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    with js_pair(tmp_path_factory.mktemp("pull-turns")) as pair:
        yield pair


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_same_as_reference(pair: tuple[ServerProcess, ServerProcess], name: str) -> None:
    async def both() -> list[list[str]]:  # at once: most of each is waiting for expiries
        return list(await asyncio.gather(_run(pair[0].url, name), _run(pair[1].url, name)))

    ref_lines, tj_lines = run(both, timeout=60)
    assert EXPECTED[name] in ref_lines  # what the reference shows (not two empty lists)
    assert tj_lines == ref_lines
