"""nats-py helpers for the Spark tests: make streams, publish, inspect (sync wrappers)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import nats

from tests.support.aio import run

_names = itertools.count()


def stream_name(tag: str) -> str:
    """A stream name unique in this test session."""
    return f"{tag.upper()}{next(_names)}"


def create_stream(url: str, name: str, subjects: Sequence[str], **cfg: Any) -> None:
    async def go() -> None:
        nc = await nats.connect(url)
        try:
            await nc.jetstream().add_stream(name=name, subjects=list(subjects), **cfg)
        finally:
            await nc.close()

    run(go)


def publish(
    url: str,
    msgs: Sequence[tuple[str, bytes]],
    headers: dict[str, str] | None = None,
) -> list[int]:
    """Publish and await each PubAck (pipelined); the sequences."""

    async def go() -> list[int]:
        nc = await nats.connect(url)
        try:
            js = nc.jetstream()
            futs = [await js.publish_async(s, d, headers=headers) for s, d in msgs]
            return [(await f).seq for f in futs]
        finally:
            await nc.close()

    return run(go)


def stream_state(url: str, name: str) -> Any:
    async def go() -> Any:
        nc = await nats.connect(url)
        try:
            return (await nc.jetstream().stream_info(name)).state
        finally:
            await nc.close()

    return run(go)


def purge(url: str, name: str, keep: int | None = None) -> None:
    async def go() -> None:
        nc = await nats.connect(url)
        try:
            await nc.jetstream().purge_stream(name, keep=keep)
        finally:
            await nc.close()

    run(go)


def msg_ids(url: str, name: str) -> list[str | None]:
    """``Nats-Msg-Id`` of every message in the stream, in order (ordered consumer)."""

    async def go() -> list[str | None]:
        nc = await nats.connect(url)
        try:
            js = nc.jetstream()
            state = (await js.stream_info(name)).state
            out: list[str | None] = []
            if state.messages == 0:
                return out
            sub = await js.subscribe(">", stream=name, ordered_consumer=True)
            while len(out) < state.messages:
                m = await sub.next_msg(timeout=10)
                out.append((m.headers or {}).get("Nats-Msg-Id"))
            await sub.unsubscribe()
            return out
        finally:
            await nc.close()

    return run(go)


def wait_for_messages(url: str, name: str, subject: str, within_s: float = 30.0) -> None:
    """Return once the stream holds a message (waits for one on ``subject`` if it is empty)."""

    async def go() -> None:
        nc = await nats.connect(url)
        try:
            sub = await nc.subscribe(subject)
            if (await nc.jetstream().stream_info(name)).state.messages == 0:
                await sub.next_msg(timeout=within_s)
        finally:
            await nc.close()

    run(go)
