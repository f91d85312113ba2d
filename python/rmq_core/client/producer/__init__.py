"""Producer side of the client (DefaultMQProducer), see docs/CLIENT_DESIGN.md."""
