"""Version constants shared by the server, the CLI and monitoring."""

from __future__ import annotations

#: trijet's own release.
TRIJET_VERSION = "0.1.0"

#: The nats-server version trijet advertises (INFO ``version``, ``/varz``, the
#: ``_nats.ver`` metadata key) and behaves like.  Clients gate features on it:
#: nats.js turns on 2.11 features (batch direct get, priority groups) from 2.11.0.
NATS_VERSION = "2.11.17"

#: The JetStream API level of ``NATS_VERSION`` (nats-server 2.11 → 1), reported in
#: ``$JS.API.INFO``, ``/jsz`` and ``/varz`` as ``api.level`` and in ``_nats.level``;
#: nats-py needs >= 1 for KV ``limit_marker_ttl``.  (2.11 has no INFO ``api_lvl``.)
JS_API_LEVEL = 1
