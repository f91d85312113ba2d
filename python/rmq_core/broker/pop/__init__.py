"""RocketMQ 5 POP consumption on the broker: docs/POP_DESIGN.md."""
