"""Consumer side of the client: push and pull consumers, the pull path, consume services, rebalance (docs/CLIENT_DESIGN.md)."""
