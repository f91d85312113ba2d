"""RocketMQ remoting: RemotingCommand frames (JSON and ROCKETMQ headers). The asyncio server and client come with the broker."""

from rmq_core.remoting.command import MAX_FRAME_LENGTH, RemotingCommand, RemotingCommandError

__all__ = ["MAX_FRAME_LENGTH", "RemotingCommand", "RemotingCommandError"]
