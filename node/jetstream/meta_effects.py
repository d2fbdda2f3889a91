"""What a server does when the meta log changes a stream it hosts.

Theory of operation: ``node.jetstream.meta.MetaLayer`` hands each applied
effect to the server that hosts the stream.  That server makes the change
real on its own disk (start, reconfigure or stop the local stream, with its
capture subscriptions, consumers and advisories) and answers the client
request that caused it, exactly as a single server answers it after the
change.  ``ensure_local`` is also the start-up path: it reopens a stream
found on disk when it is the assigned incarnation (same creation time) and
otherwise moves the old directory aside (never deletes it) and starts fresh.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from cluster.meta import StreamAssigned, StreamAssignment, StreamRemoved, StreamUpdated
from cluster.model import StreamConfig
from cluster.streams import Stream
from node.jsapi import render

if TYPE_CHECKING:
    from node.jetstream.service import JetStreamService

log = logging.getLogger(__name__)


async def ensure_local(svc: JetStreamService, sa: StreamAssignment) -> Stream:
    """Run ``sa`` on this server: reopen it from disk or create it."""
    cfg = StreamConfig.from_dict(sa.config)
    saved = await svc.api.saved_stream(sa.name)
    if saved is not None and saved[1] == sa.created_ns:
        stream = await svc.api.open_stream(cfg, sa.created_ns)
        await svc.consumers.recover_stream(stream)
        return stream
    if saved is not None:
        where = await svc.api.quarantine(sa.name)
        log.warning(
            "event=stream_dir_quarantined stream=%s path=%s reason=older_incarnation",
            sa.name,
            where,
        )
    return await svc.api.create_stream(cfg, created_ns=sa.created_ns)


async def assigned(svc: JetStreamService, effect: StreamAssigned) -> None:
    """A stream this server hosts was created (or an identical create re-sent)."""
    from node.jetstream.streams_api import info_dict

    sa = effect.assignment
    stream = svc.api.streams.get(sa.name)
    fresh = stream is None
    if stream is None:
        stream = await ensure_local(svc, sa)
    if effect.created and fresh:
        svc.advisories.stream_action("create", sa.name, stream.cfg)
    if effect.reply:
        info = info_dict(svc, stream)
        body = render.stream_create_response(info, did_create=effect.created and fresh)
        svc.answer(effect.reply.encode(), body)


async def updated(svc: JetStreamService, effect: StreamUpdated) -> None:
    """A stream this server hosts has a new config."""
    from node.jetstream.streams_api import apply_update, info_dict

    sa = effect.assignment
    stream = svc.api.streams.get(sa.name)
    if stream is None:
        stream = await ensure_local(svc, sa)
    else:
        await apply_update(
            svc, StreamConfig.from_dict(effect.old), StreamConfig.from_dict(sa.config)
        )
    if effect.reply:
        svc.answer(effect.reply.encode(), render.stream_update_response(info_dict(svc, stream)))


async def removed(svc: JetStreamService, effect: StreamRemoved) -> None:
    """A stream this server runs was deleted (the proposer answers)."""
    from node.jetstream.streams_api import remove_local

    await remove_local(svc, svc.api.stream(effect.assignment.name))
