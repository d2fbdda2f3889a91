"""node.protocol: the NATS client/route protocol, sans-IO (h11-shaped)."""
