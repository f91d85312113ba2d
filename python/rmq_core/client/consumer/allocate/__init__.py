"""RocketMQ's queue allocation strategies."""
