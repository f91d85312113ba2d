"""filter parts of the broker: the pull path's message filters (see docs/BROKER_DESIGN.md)."""
