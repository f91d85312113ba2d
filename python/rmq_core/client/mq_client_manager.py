"""MQClientManager (4.9 ``org.apache.rocketmq.client.impl.MQClientManager``): the process-wide table of
``MQClientInstance`` by client id, so producers and consumers with the same client id share one instance.

Instances on a caller's event loop (``rmq_core.aio``) are kept apart, one per (client id, loop): they share nothing
with the loop-thread instances of the blocking clients.

Invariants: one instance per client id (and loop) at a time; an instance removes itself (``remove_client_factory``) when it
shuts down, which happens only once its last producer/consumer has unregistered (the reference count).
Thread-safety: a lock guards the table; ``get_instance()`` is a thread-safe singleton.
"""

from __future__ import annotations

import asyncio
import itertools
import threading

from rmq_core.client.client_config import ClientConfig
from rmq_core.client.mq_client_instance import MQClientInstance


def _same_credentials(instance: MQClientInstance, config: ClientConfig) -> None:
    """One instance signs with one set of credentials: a client asking for the instance of its client id with
    other credentials is refused (Java silently keeps the first one's RPC hook)."""
    own = instance.client_config
    if (own.access_key, own.secret_key) != (config.access_key, config.secret_key):
        raise ValueError(
            f"client id {instance.client_id} is already used with other ACL credentials: give this client its "
            "own instance_name"
        )


class MQClientManager:
    _instance: MQClientManager | None = None
    _instance_lock = threading.Lock()

    def __init__(self) -> None:
        self._factory_table: dict[str, MQClientInstance] = {}
        self._async_table: dict[tuple[str, asyncio.AbstractEventLoop], MQClientInstance] = {}
        self._index = itertools.count()
        self._lock = threading.Lock()

    @classmethod
    def get_instance(cls) -> MQClientManager:
        with cls._instance_lock:
            if cls._instance is None:
                cls._instance = cls()
            return cls._instance

    def get_or_create_mq_client_instance(self, client_config: ClientConfig) -> MQClientInstance:
        client_id = client_config.build_mq_client_id()
        with self._lock:
            instance = self._factory_table.get(client_id)
            if instance is None:
                instance = MQClientInstance(
                    client_config.clone(),
                    next(self._index),
                    client_id,
                    on_shutdown=lambda inst: self.remove_client_factory(inst.client_id, inst),
                )
                self._factory_table[client_id] = instance
            _same_credentials(instance, client_config)
            return instance

    def get_or_create_async_instance(
        self, client_config: ClientConfig, loop: asyncio.AbstractEventLoop
    ) -> MQClientInstance:
        """The instance of ``client_config``'s client id on ``loop`` (the caller's), created when missing."""
        client_id = client_config.build_mq_client_id()
        key = (client_id, loop)
        with self._lock:
            instance = self._async_table.get(key)
            if instance is None:
                instance = MQClientInstance(
                    client_config.clone(),
                    next(self._index),
                    client_id,
                    on_shutdown=lambda inst: self._remove_async(key, inst),
                    loop=loop,
                )
                self._async_table[key] = instance
            _same_credentials(instance, client_config)
            return instance

    def _remove_async(self, key: tuple[str, asyncio.AbstractEventLoop], instance: MQClientInstance) -> None:
        with self._lock:
            if self._async_table.get(key) is instance:
                self._async_table.pop(key, None)

    def remove_client_factory(self, client_id: str, instance: MQClientInstance | None = None) -> None:
        """Forget ``client_id`` (only if it still maps to ``instance``, when one is given)."""
        with self._lock:
            if instance is None or self._factory_table.get(client_id) is instance:
                self._factory_table.pop(client_id, None)

    def get_client_instance(self, client_id: str) -> MQClientInstance | None:
        return self._factory_table.get(client_id)
