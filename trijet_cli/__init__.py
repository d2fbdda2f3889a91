"""The ``trijet`` client tool: natscli's verbs over the public NATS protocol.

This package is a client.  It speaks only what any NATS client speaks (nats-py:
core publish/subscribe/request, the ``$JS.API`` JSON requests, KV and object
store conventions, the ``$SYS`` server requests) and imports nothing of the
server, so it works the same against trijet and against nats-server.  Output is
shaped like natscli's (its column reports and rounded tables), ``--json`` prints
the API's own JSON for scripts.

Modules: :mod:`.fmt` (natscli's value formatting, column reports, tables),
:mod:`.conn` (options, connection, JetStream API requests and errors),
:mod:`.prompt` (questions asked when flags are missing, skipped by ``--defaults``),
:mod:`.streams`, :mod:`.consumers`, :mod:`.messaging` (pub, sub, request, reply),
:mod:`.kv`, :mod:`.objects`, :mod:`.server` (server list/ping/report, account info),
:mod:`.bench`, and :mod:`.main` (the command line).
"""
