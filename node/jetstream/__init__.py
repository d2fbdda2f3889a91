"""node.jetstream: JetStream on this node — the ``$JS.API`` surface and stream capture."""
