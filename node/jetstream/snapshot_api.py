"""``$JS.API.STREAM.SNAPSHOT`` and ``STREAM.RESTORE`` (to be built)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from node.jetstream.common import ApiRequest
    from node.jetstream.service import JetStreamService


async def snapshot(svc: JetStreamService, req: ApiRequest) -> str | None:
    return None


async def restore(svc: JetStreamService, req: ApiRequest) -> str | None:
    return None
