"""GrpcClientChannel: one gRPC client (keyed by its ``x-mq-client-id``) as the broker's managers see a connection, and
its Telemetry stream (Apache's ``GrpcClientChannel`` + ``GrpcClientSettingsManager``'s entry for the client).

The producer manager keys producers by this object, so the transaction check (``TransactionalMessageCheckListener``)
reaches a gRPC producer as it reaches a remoting one: its ``send(CHECK_TRANSACTION_STATE)`` becomes a
RecoverOrphanedTransactionCommand written on the client's Telemetry stream. The stream's outbox is bounded
(``OUTBOX_LIMIT`` commands): a client that does not read stops being read (its Settings answers wait for room) and
loses the broker's own commands (a transaction check asks again at its next round; logged once), the broker no
memory.
Owned by the broker's event loop.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from rmq_core.broker.grpc.grpc_message_converter import to_v2_message, transaction_id
from rmq_core.broker.grpc.messaging_v2 import V2
from rmq_core.message import decode_messages
from rmq_core.remoting.codes import RequestCode
from rmq_core.remoting.command import RemotingCommand

log = logging.getLogger(__name__)

OUTBOX_LIMIT = 128  # a reading client has one or two queued; a check round's burst beyond it is asked again


class GrpcClientChannel:
    def __init__(self, client_id: str, remote_address: str) -> None:
        self.client_id = client_id
        self.remote_address = remote_address
        self.settings: Any = None  # the client's Settings, as it last wrote them (None before the first)
        self.closed = False
        self.outbox: asyncio.Queue[Any] | None = None  # the open Telemetry stream's commands to write, if any
        self.groups: set[str] = set()  # producer groups (topics) this client is registered under
        self.consumer_groups: set[str] = set()  # the consumer group it is registered under (a consumer: one)
        self.language = ""  # x-mq-language (LanguageCode's name), read at its first RPC
        self.version = 0  # x-mq-client-version as a version ordinal
        self.last_seen_ms = 0  # the last RPC of the client (the sweep forgets a silent one without a stream)
        self._dropping = False  # its outbox was full at the last write (logged once per run of drops)

    @property
    def client_type(self) -> int:
        return int(self.settings.client_type) if self.settings is not None else 0

    def write(self, command: Any) -> bool:
        """Queue ``command`` (a TelemetryCommand) for the client's open stream; False when none or it is full."""
        box = self.outbox
        if box is None or self.closed:
            return False
        try:
            box.put_nowait(command)
        except asyncio.QueueFull:
            if not self._dropping:
                log.warning("gRPC client %s reads no telemetry: commands dropped", self.client_id)
            self._dropping = True
            return False
        self._dropping = False
        return True

    def send(self, request: RemotingCommand) -> None:
        """A broker → client remoting request, as Apache's GrpcClientChannel translates it."""
        if request.code == RequestCode.CHECK_TRANSACTION_STATE:
            fields = request.ext_fields
            msgs = decode_messages(request.body or b"")
            if not msgs:
                return
            cmd = V2.TelemetryCommand()
            rec = cmd.recover_orphaned_transaction_command
            rec.message.CopyFrom(to_v2_message(msgs[0]))
            rec.transaction_id = transaction_id(int(fields["commitLogOffset"]), int(fields["tranStateTableOffset"]))
            self.write(cmd)
            return
        log.debug("gRPC client %s: request code %d not relayed", self.client_id, request.code)

    def close(self) -> None:
        self.closed = True
        box = self.outbox
        if box is not None:
            try:
                box.put_nowait(None)  # ends the stream's writer
            except asyncio.QueueFull:
                pass

    def __repr__(self) -> str:
        return f"GrpcClientChannel({self.client_id!r}, {self.remote_address})"
