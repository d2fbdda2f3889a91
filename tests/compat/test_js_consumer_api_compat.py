"""Differential: the consumer API beyond CREATE, pull delivery and retention.

Each scenario is an async function over a ``Probe`` (a nats-py connection
that records what it sees as text).  It runs on the reference nats-server
2.15.1 and on trijet (one fresh server pair per module, every scenario on its
own streams) and the two transcripts must be equal line by line:

* API answers (INFO, LIST, NAMES, DELETE, PAUSE, DURABLE.CREATE) as JSON text
  with volatile values (``created``, ``ts``, ``last_active``, ``pause_until``
  in the future, ``pause_remaining``) replaced by ``<t>``; every other figure
  -- ``delivered``, ``ack_floor``, ``num_pending``, ``num_ack_pending``,
  ``num_redelivered``, ``num_waiting`` -- is compared exactly, and so is
  whether ``last_active`` is present;
* pull deliveries as ``subject | ack reply | headers | payload`` with the
  ack reply's timestamp token replaced (its other tokens -- delivery count,
  stream and consumer sequence, pending -- are compared), and status
  messages (404/408/409) with their headers;
* stream state after each step of an ack sequence on workqueue and interest
  streams (``messages``, ``first_seq``, ``last_seq``, ``num_deleted``).

Known, deliberate differences are not scenarios here (see the report in
``tests/compat`` docs): the reference's ack floor after ``max_deliver`` is
exhausted comes from its store and lags its in-memory floor.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import nats
import pytest

from tests.support.aio import noop_cb, run
from tests.support.servers import ServerProcess, js_pair, reference_binary

pytestmark = pytest.mark.skipif(
    reference_binary() is None, reason="reference nats-server not installed"
)

API_TIMEOUT_S = 3.0
QUIET_S = 0.3
"""How long a pull transcript waits for more after the last message."""

_VOLATILE = re.compile(r'"(created|ts|last_active|pause_remaining|timestamp)":("[^"]*"|\d+)')
_ACK = re.compile(r"^(\$JS\.ACK\.[^.]+\.[^.]+\.\d+\.\d+\.\d+)\.\d+\.(\d+)$")


def norm_json(text: str) -> str:
    """Volatile values -> ``<t>``; reserved ``_nats.*`` metadata dropped."""
    doc = json.loads(text)
    cfg = doc.get("config") if isinstance(doc, dict) else None
    for c in [cfg] + [i.get("config") for i in doc.get("consumers", []) if isinstance(i, dict)]:
        if isinstance(c, dict) and isinstance(c.get("metadata"), dict):
            meta = {k: v for k, v in c["metadata"].items() if not k.startswith("_nats.")}
            if meta:
                c["metadata"] = meta
            else:
                del c["metadata"]
    out = json.dumps(doc, separators=(",", ":"))
    return _VOLATILE.sub(lambda m: f'"{m.group(1)}":"<t>"', out)


class Probe:
    """One nats-py connection recording a transcript."""

    def __init__(self, nc: Any) -> None:
        self.nc = nc
        self.lines: list[str] = []

    def note(self, text: str) -> None:
        self.lines.append(text)

    async def api(self, subject: str, body: str | dict[str, Any] = "") -> dict[str, Any]:
        data = body if isinstance(body, str) else json.dumps(body)
        msg = await self.nc.request(subject, data.encode(), timeout=API_TIMEOUT_S)
        self.note(f"{subject} -> {norm_json(msg.data.decode())}")
        doc: dict[str, Any] = json.loads(msg.data)
        return doc

    async def publish(self, subject: str, payload: bytes = b"x") -> None:
        msg = await self.nc.request(subject, payload, timeout=API_TIMEOUT_S)
        self.note(f"pub {subject} -> {norm_json(msg.data.decode())}")

    async def state(self, stream: str) -> None:
        msg = await self.nc.request(f"$JS.API.STREAM.INFO.{stream}", b"", timeout=API_TIMEOUT_S)
        st = json.loads(msg.data)["state"]
        keys = ("messages", "first_seq", "last_seq", "num_deleted", "consumer_count")
        self.note(f"state {stream} " + " ".join(f"{k}={st.get(k, 0)}" for k in keys))

    async def info(self, stream: str, name: str) -> dict[str, Any]:
        return await self.api(f"$JS.API.CONSUMER.INFO.{stream}.{name}")

    async def pull(
        self, stream: str, name: str, body: str, *, expect: int, quiet_s: float = QUIET_S
    ) -> list[Any]:
        """Send one MSG.NEXT and record ``expect`` messages (then ``quiet_s`` of nothing)."""
        inbox = self.nc.new_inbox()
        got: asyncio.Queue[Any] = asyncio.Queue()
        sub = await self.nc.subscribe(inbox, cb=got.put)
        subject = f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{name}"
        await self.nc.publish(subject, body.encode(), reply=inbox)
        msgs = []
        try:
            while True:
                wait = API_TIMEOUT_S if len(msgs) < expect else quiet_s
                try:
                    msgs.append(await asyncio.wait_for(got.get(), wait))
                except TimeoutError:
                    break
        finally:
            await sub.unsubscribe()
        self.note(f"pull {name} {body!r}: {len(msgs)} message(s)")
        for m in msgs:
            self.note("  " + self.render(m, inbox))
        return msgs

    @staticmethod
    def render(m: Any, inbox: str) -> str:
        subject = "<inbox>" if m.subject == inbox else m.subject
        reply = m.reply or ""
        am = _ACK.match(reply)
        if am:
            reply = f"{am.group(1)}.<ts>.{am.group(2)}"
        hdrs = ""
        if m.headers:
            hdrs = " ".join(f"{k}={v}" for k, v in m.headers.items())
        return f"{subject} | {reply} | {hdrs} | {m.data.decode(errors='replace')}"

    async def ack(self, m: Any, body: bytes = b"+ACK", *, sync: bool = True) -> None:
        """Ack ``m`` with ``body``; with ``sync`` record whether an answer came."""
        if not sync:
            await self.nc.publish(m.reply, body)
            await self.nc.flush()
            return
        try:
            r = await self.nc.request(m.reply, body, timeout=0.5)
            self.note(f"ack {body!r} seq {m.reply.split('.')[5]} -> answered {r.data!r}")
        except nats.errors.TimeoutError:
            self.note(f"ack {body!r} seq {m.reply.split('.')[5]} -> no answer")


Scenario = Callable[[Probe], Awaitable[None]]


async def _run(url: str, scenario: Scenario) -> list[str]:
    nc = await nats.connect(url, error_cb=noop_cb)
    probe = Probe(nc)
    try:
        await scenario(probe)
    finally:
        await nc.close()
    return probe.lines


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    with js_pair(tmp_path_factory.mktemp("consumer-api")) as pair:
        yield pair


def compare(pair: tuple[ServerProcess, ServerProcess], scenario: Scenario) -> None:
    ref_lines = run(lambda: _run(pair[0].url, scenario))
    tj_lines = run(lambda: _run(pair[1].url, scenario))
    assert tj_lines == ref_lines


def stream_body(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "subjects": [f"{name.lower()}.>"], **extra}


def consumer_body(stream: str, **cfg: Any) -> dict[str, Any]:
    return {"stream_name": stream, "config": cfg}


# --------------------------------------------------------------------------- retention


async def interest_scenario(p: Probe) -> None:
    s = "RI"
    await p.api(f"$JS.API.STREAM.CREATE.{s}", stream_body(s, retention="interest"))
    await p.publish("ri.a")  # nobody interested: sequence taken, nothing stored
    await p.state(s)
    await p.api(
        f"$JS.API.CONSUMER.CREATE.{s}.c1", consumer_body(s, name="c1", ack_policy="explicit")
    )
    await p.api(
        f"$JS.API.CONSUMER.CREATE.{s}.c2",
        consumer_body(s, name="c2", ack_policy="explicit", filter_subject="ri.b"),
    )
    for subj in ("ri.a", "ri.b", "ri.a", "ri.b", "ri.c"):
        await p.publish(subj)
    await p.state(s)
    msgs = await p.pull(s, "c1", '{"batch":5,"expires":1000000000}', expect=5)
    for m in msgs[:4]:
        await p.ack(m)
    await p.state(s)
    await p.info(s, "c1")
    got = await p.pull(s, "c2", '{"batch":1,"expires":1000000000}', expect=1)
    await p.ack(got[0])
    await p.state(s)
    await p.info(s, "c2")
    await p.api(f"$JS.API.CONSUMER.DELETE.{s}.c2")
    await p.state(s)
    await p.api(f"$JS.API.CONSUMER.CREATE.{s}.n", consumer_body(s, name="n", ack_policy="none"))
    await p.publish("ri.d")
    # nats-server counts ri.d into n's pending when its new-message signal runs, which
    # may come after the pull (its ack subject then says pending 0 in place of 1: seen
    # in a full run); an INFO recounts it first
    await p.info(s, "n")
    await p.pull(s, "n", '{"batch":1,"expires":1000000000}', expect=1)
    await p.state(s)
    await p.ack(msgs[4])  # c1 acks ri.c; the last copy of ri.d is c1's
    await p.state(s)
    await p.api(f"$JS.API.CONSUMER.DELETE.{s}.c1")
    await p.state(s)
    await p.publish("ri.e")
    await p.state(s)
    await p.api(f"$JS.API.CONSUMER.DELETE.{s}.n")
    await p.state(s)
    await p.publish("ri.f")
    await p.state(s)


async def interest_ack_all_scenario(p: Probe) -> None:
    s = "RA"
    await p.api(f"$JS.API.STREAM.CREATE.{s}", stream_body(s, retention="interest"))
    await p.api(f"$JS.API.CONSUMER.CREATE.{s}.a", consumer_body(s, name="a", ack_policy="all"))
    await p.api(f"$JS.API.CONSUMER.CREATE.{s}.b", consumer_body(s, name="b", ack_policy="all"))
    for _ in range(5):
        await p.publish("ra.x")
    a = await p.pull(s, "a", '{"batch":5,"expires":1000000000}', expect=5)
    await p.ack(a[2])
    await p.state(s)
    b = await p.pull(s, "b", '{"batch":2,"expires":1000000000}', expect=2)
    await p.ack(b[1])
    await p.state(s)
    await p.info(s, "b")
    await p.ack(a[4])
    await p.api(f"$JS.API.CONSUMER.DELETE.{s}.b")
    await p.state(s)


async def workqueue_scenario(p: Probe) -> None:
    s = "RW"
    await p.api(f"$JS.API.STREAM.CREATE.{s}", stream_body(s, retention="workqueue"))
    for i in range(6):
        await p.publish(f"rw.{i % 2}")
    await p.state(s)
    await p.api(
        f"$JS.API.CONSUMER.CREATE.{s}.w",
        consumer_body(s, name="w", ack_policy="explicit", filter_subject="rw.0"),
    )
    await p.api(
        f"$JS.API.CONSUMER.CREATE.{s}.w1",
        consumer_body(s, name="w1", ack_policy="explicit", filter_subject="rw.0"),
    )  # overlapping filter: refused
    msgs = await p.pull(s, "w", '{"batch":3,"expires":1000000000}', expect=3)
    await p.ack(msgs[0])
    await p.state(s)
    await p.ack(msgs[1], b"+TERM because")
    await p.state(s)
    await p.ack(msgs[2], b"-NAK")
    await p.state(s)
    await p.ack(msgs[2], b"+WPI")
    again = await p.pull(s, "w", '{"batch":1,"expires":1000000000}', expect=1)
    await p.ack(again[0])
    await p.state(s)
    await p.info(s, "w")
    await p.ack(msgs[0])  # already acked and removed
    await p.api(f"$JS.API.CONSUMER.DELETE.{s}.w")
    await p.state(s)  # a workqueue keeps what is left for the next consumer


def test_interest_retention(pair: tuple[ServerProcess, ServerProcess]) -> None:
    compare(pair, interest_scenario)


def test_interest_ack_all(pair: tuple[ServerProcess, ServerProcess]) -> None:
    compare(pair, interest_ack_all_scenario)


def test_workqueue_retention(pair: tuple[ServerProcess, ServerProcess]) -> None:
    compare(pair, workqueue_scenario)
