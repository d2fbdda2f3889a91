"""Version constants shared by the server, the CLI and monitoring."""

from __future__ import annotations

#: trijet's own release.
TRIJET_VERSION = "0.1.0"

#: The nats-server version trijet advertises (INFO ``version``, ``/varz``) and behaves like.
NATS_VERSION = "2.10.24"
