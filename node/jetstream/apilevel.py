"""Refusing API requests whose ``Nats-Required-Api-Level`` is above trijet's.

Theory of operation: the service routes a request as usual; when its header
block demands more than ``versioning.JS_API_LEVEL`` (see
``versioning.demands_higher_level``) the routed handler is replaced by
``refuse``, which answers 412/10185 ``JetStream minimum api level required``
before anything is looked up, in the response type's own error shape (the
zero-valued fields nats-server's Go response struct writes, e.g. ``"total":0,
"offset":0,"limit":0,"streams":null`` for STREAM.NAMES).  Pull requests go on
to ``consumers_api.msg_next``, which answers with a ``412 Required Api Level``
status once the consumer is found (an unknown one still gets 503), and direct
gets (only routed for streams with ``allow_direct``) get that status at once.
Unknown API subjects are never routed, so they still get no reply.  Observed
on nats-server 2.15.1; nats-server 2.11 itself ignored the header.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from node.jetstream import consumers_api
from node.jetstream.common import TYPE, ApiAnswer, ApiRequest
from node.jsapi import render
from node.jsapi.errors import REQUIRED_API_LEVEL, JSApiError
from node.jsapi.versioning import REQUIRED_LEVEL_STATUS

if TYPE_CHECKING:
    from node.jetstream.service import JetStreamService

__all__ = ["refuse"]

_PAGING: dict[str, Any] = {"total": 0, "offset": 0, "limit": 0}
_ZERO_TIME = "0001-01-01T00:00:00Z"

#: op prefix -> (response type suffix, zero-valued fields after ``error``)
_SHAPES: dict[tuple[str, ...], tuple[str, dict[str, Any]]] = {
    ("INFO",): ("account_info_response", {}),
    ("STREAM", "CREATE"): ("stream_create_response", {}),
    ("STREAM", "UPDATE"): ("stream_update_response", {}),
    ("STREAM", "INFO"): ("stream_info_response", _PAGING),
    ("STREAM", "DELETE"): ("stream_delete_response", {}),
    ("STREAM", "NAMES"): ("stream_names_response", {**_PAGING, "streams": None}),
    ("STREAM", "LIST"): ("stream_list_response", {**_PAGING, "streams": []}),
    ("STREAM", "PURGE"): ("stream_purge_response", {"purged": 0}),
    ("STREAM", "MSG", "GET"): ("stream_msg_get_response", {}),
    ("STREAM", "MSG", "DELETE"): ("stream_msg_delete_response", {}),
    ("STREAM", "SNAPSHOT"): ("stream_snapshot_response", {}),
    ("STREAM", "RESTORE"): ("stream_restore_response", {"deliver_subject": ""}),
    ("CONSUMER", "CREATE"): ("consumer_create_response", {}),
    ("CONSUMER", "DURABLE", "CREATE"): ("consumer_create_response", {}),
    ("CONSUMER", "INFO"): ("consumer_info_response", {}),
    ("CONSUMER", "DELETE"): ("consumer_delete_response", {}),
    ("CONSUMER", "NAMES"): ("consumer_names_response", {**_PAGING, "consumers": []}),
    ("CONSUMER", "LIST"): ("consumer_list_response", {**_PAGING, "consumers": []}),
    ("CONSUMER", "PAUSE"): (
        "consumer_pause_response",
        {"paused": False, "pause_until": _ZERO_TIME},
    ),
    ("CONSUMER", "UNPIN"): ("consumer_unpin_response", {}),
}


def _shape(op: tuple[str, ...]) -> tuple[str, dict[str, Any]] | None:
    for n in range(min(3, len(op)), 0, -1):
        shape = _SHAPES.get(op[:n])
        if shape is not None:
            return shape
    return None


async def refuse(svc: JetStreamService, req: ApiRequest) -> str | None:
    """The handler for a routed request demanding a higher API level.

    Raises:
        ApiAnswer: 412/10185 in the request's response shape.
    """
    if req.op[:3] == ("CONSUMER", "MSG", "NEXT"):
        await consumers_api.msg_next(svc, req)
        return None
    if req.op[:2] == ("DIRECT", "GET"):
        svc.client.publish(req.reply, b"", headers=REQUIRED_LEVEL_STATUS)
        return None
    shape = _shape(req.op)
    if shape is None:  # a route without a known shape: the plain error object
        raise ApiAnswer(
            render.error_response(TYPE + "api_response", JSApiError(REQUIRED_API_LEVEL))
        )
    suffix, tail = shape
    raise ApiAnswer(render.error_response_with(TYPE + suffix, JSApiError(REQUIRED_API_LEVEL), tail))
