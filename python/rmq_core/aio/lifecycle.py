"""The life cycle the aio clients share: ``AsyncClient`` (``start``/``shutdown`` and the async context manager) and
their ``MQClientInstance`` on the caller's loop — taken from ``MQClientManager`` (one per client id and loop),
started, and released again (the instance stops once its last client has left).

Invariant: a client whose start fails leaves nothing registered or running (``start_instance`` undoes the
registration and stops the instance before re-raising).
Thread-safety: none; the caller's loop only.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, Self

from rmq_core.client.client_config import ClientConfig
from rmq_core.client.mq_client_instance import MQClientInstance
from rmq_core.client.mq_client_manager import MQClientManager


def caller_loop_instance(client_config: ClientConfig) -> MQClientInstance:
    """The client instance of ``client_config``'s client id on the running loop (created, not started)."""
    return MQClientManager.get_instance().get_or_create_async_instance(client_config, asyncio.get_running_loop())


async def start_instance(instance: MQClientInstance, unregister: Callable[[], Awaitable[Any]]) -> None:
    """``await instance.start_async()``; on failure ``unregister()`` the client and stop the instance, re-raising."""
    try:
        await instance.start_async()
    except BaseException:
        await unregister()
        await instance.shutdown_async()
        raise


async def release_instance(instance: MQClientInstance, unregister: Callable[[], Awaitable[Any]]) -> None:
    """Unregister the client (UNREGISTER_CLIENT to the brokers) and stop the instance if it was the last one."""
    await unregister()
    await instance.shutdown_async()


class AsyncClient(ABC):
    """``await start()`` / ``await shutdown()``, and ``async with client:`` doing both."""

    @abstractmethod
    async def start(self) -> None: ...

    @abstractmethod
    async def shutdown(self) -> None: ...

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.shutdown()
