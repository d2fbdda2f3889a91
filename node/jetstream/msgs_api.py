"""``$JS.API.STREAM.MSG.GET``, ``STREAM.MSG.DELETE`` and ``DIRECT.GET`` (to be built)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from node.jetstream.common import ApiRequest
    from node.jetstream.service import JetStreamService


async def get(svc: JetStreamService, req: ApiRequest) -> str | None:
    return None


async def delete(svc: JetStreamService, req: ApiRequest) -> str | None:
    return None


async def direct_get(svc: JetStreamService, req: ApiRequest) -> str | None:
    return None
