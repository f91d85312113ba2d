"""The broker: RocketMQ's pull path (PullMessageProcessor, PullRequestHoldService), send, offsets, groups and the
admin commands, served over the remoting protocol by an asyncio loop on a background thread (docs/BROKER_DESIGN.md)."""

from rmq_core.broker.broker_config import BrokerConfig

__all__ = ["BrokerConfig"]
