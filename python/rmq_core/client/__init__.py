"""RocketMQ clients in Python: producer, push consumer, pull consumer (docs/CLIENT_DESIGN.md).

The public names are re-exported here once their modules exist; import from the submodules meanwhile."""
