"""TransactionalMessageCheckService (4.9 ``br/transaction/TransactionalMessageCheckService.java``): every
``transactionCheckInterval`` ms, ``TransactionalMessageService.check(transactionTimeOut, transactionCheckMax,
listener)``.

Invariant: one check at a time (it is a synchronous pass on the broker's loop). ``check_now()`` runs one at once
(tests, admin). Thread-safety: the broker's event loop only.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rmq_core.broker.broker_config import BrokerConfig
    from rmq_core.broker.transaction.transactional_message_check_listener import TransactionalMessageCheckListener
    from rmq_core.broker.transaction.transactional_message_service import TransactionalMessageService

log = logging.getLogger(__name__)


class TransactionalMessageCheckService:
    def __init__(
        self,
        broker_config: BrokerConfig,
        service: TransactionalMessageService,
        listener: TransactionalMessageCheckListener,
    ) -> None:
        self.broker_config = broker_config
        self.service = service
        self.listener = listener
        self._task: asyncio.Task[None] | None = None
        self.runs = 0

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._task is None:
            self._task = loop.create_task(self._run(), name="transaction check")

    async def _run(self) -> None:
        log.info("start transaction check service")
        while True:
            await asyncio.sleep(max(self.broker_config.transaction_check_interval, 1) / 1000.0)
            try:
                self.check_now()
            except Exception:
                log.exception("transaction check failed")

    def check_now(self) -> None:
        cfg = self.broker_config
        begin = time.monotonic()
        self.service.file_reserved_time_hours = cfg.file_reserved_time  # live: UPDATE_BROKER_CONFIG may change it
        self.service.check(cfg.transaction_timeout, cfg.transaction_check_max, self.listener)
        self.runs += 1
        log.debug("transaction check took %.1f ms", (time.monotonic() - begin) * 1000)

    async def shutdown(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
