"""Raw ``MSG.NEXT``/UNPIN traffic for priority-group tests (nats-py 2.x has
no priority fields, so requests are JSON built here).

``Puller.pull`` sends one request to a fresh inbox and collects what comes
back until the batch is full or a status other than 100 arrives (each bounded
by a timeout): the answer is a list of ``Got`` (a message or a status), so a
late status of an earlier request can never be mistaken for this one's.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

#: bound on waiting for one answer of a pull
ANSWER_TIMEOUT_S = 5.0
REQUEST_TIMEOUT_S = 2.0


@dataclass
class Got:
    """One answer of a pull: a message (``data``) or a status."""

    subject: str
    headers: dict[str, str]
    data: bytes
    status: str = ""
    description: str = ""
    reply: str = ""


async def api(
    nc: Any, subject: str, body: Any = b"", *, wait_s: float = REQUEST_TIMEOUT_S
) -> dict[str, Any]:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    msg = await nc.request(subject, raw, timeout=wait_s)
    doc: dict[str, Any] = json.loads(msg.data)
    return doc


class Puller:
    """Pulls from ``<stream>.<consumer>`` with raw JSON requests."""

    def __init__(self, nc: Any, stream: str, consumer: str) -> None:
        self.nc = nc
        self.subject = f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}"

    async def pull(self, body: dict[str, Any], *, want: int = 1) -> list[Got]:
        """Send ``body``; answers until ``want`` messages or a final status."""
        inbox = self.nc.new_inbox()
        sub = await self.nc.subscribe(inbox)
        out: list[Got] = []
        try:
            await self.nc.publish(self.subject, json.dumps(body).encode(), reply=inbox)
            while sum(1 for g in out if not g.status) < want:
                msg = await sub.next_msg(timeout=ANSWER_TIMEOUT_S)
                hdrs = {getattr(k, "value", k): v for k, v in (msg.headers or {}).items()}
                status = hdrs.pop("Status", "")
                desc = hdrs.pop("Description", "")
                if status == "100":
                    continue
                out.append(Got(msg.subject, hdrs, msg.data, status, desc, msg.reply or ""))
                if status:
                    break
        finally:
            await sub.unsubscribe()
        return out


def shape(got: list[Got], pins: dict[str, str]) -> list[tuple[Any, ...]]:
    """Answers with pin ids named by first appearance (``pin1``, ``pin2``…)."""

    def name(pin: str) -> str:
        if pin == "":
            return ""
        if pin not in pins:
            pins[pin] = f"pin{len(pins) + 1}"
        return pins[pin]

    out: list[tuple[Any, ...]] = []
    for g in got:
        if g.status:
            out.append((g.status, g.description, sorted(g.headers.items())))
        else:
            hdrs = {k: (name(v) if k == "Nats-Pin-Id" else v) for k, v in g.headers.items()}
            out.append(("msg", g.data.decode(), sorted(hdrs.items())))
    return out


class Advisories:
    """Collects ``$JS.EVENT.ADVISORY.CONSUMER.{PINNED,UNPINNED}.>`` and wakes waiters."""

    def __init__(self) -> None:
        self.docs: list[dict[str, Any]] = []
        self._new = asyncio.Event()

    async def start(self, nc: Any) -> None:
        async def on(msg: Any) -> None:
            self.docs.append(json.loads(msg.data))
            self._new.set()

        await nc.subscribe("$JS.EVENT.ADVISORY.CONSUMER.PINNED.>", cb=on)
        await nc.subscribe("$JS.EVENT.ADVISORY.CONSUMER.UNPINNED.>", cb=on)

    async def wait_for(self, pred: Any, bound_s: float) -> dict[str, Any]:
        """The first advisory satisfying ``pred`` (bounded wait)."""

        async def loop() -> dict[str, Any]:
            seen = 0
            while True:
                for d in self.docs[seen:]:
                    if pred(d):
                        return d
                seen = len(self.docs)
                self._new.clear()
                await self._new.wait()

        return await asyncio.wait_for(loop(), bound_s)
