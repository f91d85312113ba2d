"""stats parts of the broker (see docs/BROKER_DESIGN.md)."""
