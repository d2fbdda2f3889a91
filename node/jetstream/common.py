"""Shared pieces of the ``$JS.API`` handlers: the request value, error answers, JSON.

A handler is ``async def handler(svc, req) -> str | bytes | None``: the text
returned is published on ``req.reply`` (when there is one) and counted as an
API request; ``None`` means the handler answered itself outside the API layer
(or nothing is to be sent) and is neither counted nor audited, as nats-server
does for a successful MSG.GET and for DIRECT.GET.  A handler refuses with
``raise ApiAnswer(text)`` (counted as an API error), typically through
``error(type_, JSApiError(...))``; an error answer nats-server sends as a
plain response (MSG.DELETE's 10057/10032) is returned, not raised.  A request
without a reply subject is still handled, counted and audited.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import trio

from node.jsapi import render
from node.jsapi.errors import INVALID_JSON, JSApiError, go_json
from node.protocol.boundedjson import loads as bounded_loads

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from node.jetstream.service import JetStreamService

TYPE = render.API_TYPE_PREFIX
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ApiRequest:
    """One API request.

    Attributes:
        subject: the full request subject (with a domain prefix if used).
        op: tokens after ``API`` (``("STREAM", "INFO", "ORDERS")``).
        reply: where the answer goes.
        headers: the request's header block, if any.
        body: the payload.
        client: the requesting client session (its ClientInfo goes into the
            audit advisory), None when unknown (a route, the server itself).
    """

    subject: bytes
    op: tuple[str, ...]
    reply: bytes
    headers: bytes | None
    body: bytes
    client: Any = None


if TYPE_CHECKING:
    Handler = Callable[[JetStreamService, ApiRequest], Awaitable[str | bytes | None]]


class ApiAnswer(Exception):
    """An error answer, ready to send."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


def dumps(obj: Any) -> str:
    """Compact JSON as Go writes it (``<``, ``>``, ``&`` escaped)."""
    return go_json(obj)


def error(type_: str, err: JSApiError) -> ApiAnswer:
    """``{"type":…,"error":{…}}`` as an ``ApiAnswer`` to raise."""
    return ApiAnswer(render.error_response(type_, err))


def json_object(body: bytes, type_: str, *, empty_ok: bool = True) -> dict[str, Any]:
    """Decode a request body that must be a JSON object ({} when empty and allowed).

    Raises:
        ApiAnswer: 400/10025 invalid JSON.
    """
    if not body.strip():
        if empty_ok:
            return {}
        raise error(type_, JSApiError(INVALID_JSON))
    try:
        req = bounded_loads(body)
    except ValueError:
        raise error(type_, JSApiError(INVALID_JSON)) from None
    if not isinstance(req, dict):
        raise error(type_, JSApiError(INVALID_JSON))
    return req


OFF_LOOP_BODY_BYTES_MIN = 32 * 1024
"""A request body at least this big is checked in a worker thread."""


async def checked_off_loop(body: bytes, fn: Callable[[], T]) -> T:
    """Run ``fn`` (a pure decode-and-check of ``body``) here when the body
    is small, else in a worker thread, so that a request with thousands of
    subjects never holds the event loop: other clients keep being served
    while it is checked.  ``fn`` must touch nothing the event loop mutates.

    Cancellation: the thread finishes its work; its result is dropped.
    """
    if len(body) < OFF_LOOP_BODY_BYTES_MIN:
        return fn()
    return await trio.to_thread.run_sync(fn)
