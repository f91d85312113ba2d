"""The broker: RocketMQ's pull path (PullMessageProcessor, PullRequestHoldService), send, offsets, groups and the
admin commands, served over the remoting protocol by an asyncio loop on a background thread (docs/BROKER_DESIGN.md)."""

from rmq_core.broker.broker_config import BrokerConfig
from rmq_core.broker.broker_controller import Broker, BrokerController

__all__ = ["Broker", "BrokerConfig", "BrokerController"]
