"""JetStream advisories on ``$JS.EVENT.ADVISORY.>`` (stub; see issue #4).

The service calls these hooks at the points nats-server emits its
advisories; each publishes nothing until implemented.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from node.jetstream.common import ApiRequest
    from node.jetstream.service import JetStreamService


class Advisories:
    """Publishes JetStream advisories for one service."""

    def __init__(self, svc: JetStreamService) -> None:
        self.svc = svc

    def api_audit(self, req: ApiRequest, response: str | bytes | None) -> None:
        """``$JS.EVENT.ADVISORY.API`` after each API request."""

    def stream_action(self, action: str, name: str, cfg: Any = None) -> None:
        """``$JS.EVENT.ADVISORY.STREAM.{CREATED,UPDATED,DELETED}.<name>``."""
