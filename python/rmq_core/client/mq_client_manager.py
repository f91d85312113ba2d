"""MQClientManager (4.9 ``org.apache.rocketmq.client.impl.MQClientManager``): the process-wide table of
``MQClientInstance`` by client id, so producers and consumers with the same client id share one instance.

Invariants: one instance per client id at a time; an instance removes itself (``remove_client_factory``) when it
shuts down, which happens only once its last producer/consumer has unregistered (the reference count).
Thread-safety: a lock guards the table; ``get_instance()`` is a thread-safe singleton.
"""

from __future__ import annotations

import itertools
import threading

from rmq_core.client.client_config import ClientConfig
from rmq_core.client.mq_client_instance import MQClientInstance


class MQClientManager:
    _instance: MQClientManager | None = None
    _instance_lock = threading.Lock()

    def __init__(self) -> None:
        self._factory_table: dict[str, MQClientInstance] = {}
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
            return instance

    def remove_client_factory(self, client_id: str, instance: MQClientInstance | None = None) -> None:
        """Forget ``client_id`` (only if it still maps to ``instance``, when one is given)."""
        with self._lock:
            if instance is None or self._factory_table.get(client_id) is instance:
                self._factory_table.pop(client_id, None)

    def get_client_instance(self, client_id: str) -> MQClientInstance | None:
        return self._factory_table.get(client_id)
