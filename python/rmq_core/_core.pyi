"""Typed stub of the native module ``rmq_core._core`` (Rust, rust/rmq-py). Contract: docs/CORE_API.md.

Users import ``rmq_core`` (the facade), never this module.
"""

import os
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import Any, TypeVar, final

from typing_extensions import Buffer

from rmq_core.message import Message, MessageExt

_T = TypeVar("_T")

__all__ = [
    "GRPC_CALL",
    "GRPC_CANCELLED",
    "GRPC_HALF_CLOSE",
    "GRPC_MESSAGE",
    "ColumnBuffer",
    "GrpcFront",
    "SendAnswerSpec",
    "SendRequestColumns",
    "SendRequestParser",
    "StoreEngine",
    "StoreReader",
    "UniqCounter",
    "assign_uniq_keys",
    "cpython_assumptions",
    "create_offset_msg_id",
    "decode_columns",
    "decode_messages",
    "decode_properties",
    "encode_batch_messages",
    "encode_frames",
    "encode_properties",
    "encode_send_request",
    "gather_runs",
    "java_hash_map_order",
    "last_store_timestamp",
    "mapped_file_size",
    "message_class",
    "split_batch",
    "split_client_frames",
    "split_frames",
    "tags_hash",
    "uniq_counter",
    "untrack_message",
]

def tags_hash(tags: str) -> int: ...
def java_hash_map_order(names: list[str]) -> tuple[list[int], bool]: ...
def encode_properties(props: dict[str, str | None]) -> bytes: ...
def decode_properties(raw: bytes) -> dict[str, str]: ...
def decode_messages(buf: bytes, decompress: bool = True) -> list[MessageExt]: ...
def last_store_timestamp(buf: bytes) -> int: ...
def assign_uniq_keys(msgs: list[Message], prefix: str, counter: Iterator[int]) -> int: ...
def encode_batch_messages(
    msgs: list[Message], uniq_key: str, prefix: str, counter: Iterator[int], max_body_size: int
) -> bytes | None: ...
def uniq_counter(start: int) -> UniqCounter: ...
def untrack_message(msg: object) -> None: ...
def message_class(cls: _T, python_init: Callable[..., None]) -> _T: ...
def cpython_assumptions() -> dict[str, object]: ...
def create_offset_msg_id(store_host: tuple[str, int], commitlog_offset: int) -> str: ...
def split_batch(body: bytes) -> list[tuple[int, bytes, bytes]]: ...
def decode_columns(
    buf: Buffer, tag_filter: list[str] | None = None, min_queue_offset: int | None = None
) -> dict[str, Any]: ...
def gather_runs(src: Buffer, starts: Buffer, ends: Buffer) -> ColumnBuffer: ...
def mapped_file_size(dir: str | os.PathLike[str]) -> int | None: ...
def split_frames(
    buf: bytes | bytearray,
    command_type: type,
    decode_frame: Callable[[bytes | memoryview], Any],
    error_type: type[BaseException],
    max_frame_length: int,
) -> tuple[list[Any], int, str | None]: ...
def split_client_frames(
    buf: bytes | bytearray,
    pending: dict[int, Any],
    light_type: type,
    names: tuple[str, ...],
    response_flag: int,
    command_type: type,
    decode_frame: Callable[[bytes | memoryview], Any],
    error_type: type[BaseException],
    max_frame_length: int,
) -> tuple[list[Any], int, str | None]: ...
def encode_frames(cmds: Sequence[Any], encode_one: Callable[[Any], bytes], max_frame_length: int) -> bytes: ...
def encode_send_request(
    code: int,
    language: str,
    version: int,
    opaque: int,
    names: tuple[str, ...],
    values: Sequence[Any],
    body: bytes,
    encode_one: Callable[..., bytes],
    max_frame_length: int,
) -> bytes: ...

# the kinds of GrpcFront.drain()'s events (rust/rmq-py/src/grpc_front.rs)
GRPC_CALL: int
GRPC_MESSAGE: int
GRPC_HALF_CLOSE: int
GRPC_CANCELLED: int

@final
class GrpcFront:
    """HTTP/2 + gRPC framing of one listening port on the extension's own threads (rust/rmq-grpc).

    ``drain()`` gives ``(kind, call_id, payload)``: GRPC_CALL with ``(method_path, metadata, peer, timeout_s,
    request)`` (``request`` None for a ``client_streaming`` method, whose messages come as GRPC_MESSAGE ``bytes``
    then GRPC_HALF_CLOSE), GRPC_CANCELLED (payload None) when the client or its connection ends a call that
    ``finish`` has not. With ``tls_cert_pem`` and ``tls_key_pem`` (PEM certificate chain, unencrypted PKCS#8/PKCS#1/
    SEC1 key) the port serves TLS (ALPN h2) beside plaintext; a bad PEM is a ValueError naming it."""

    def __new__(
        cls,
        host: str,
        port: int,
        *,
        client_streaming: list[str],
        max_concurrent_streams: int = 256,
        max_message_bytes: int = 8388608,
        worker_threads: int = 1,
        tls_cert_pem: bytes | None = None,
        tls_key_pem: bytes | None = None,
    ) -> GrpcFront: ...
    @property
    def port(self) -> int: ...
    def fileno(self) -> int: ...
    def drain(self, max_events: int = 1024) -> list[tuple[int, int, Any]]: ...
    def send_message(self, call_id: int, data: bytes) -> bool: ...
    def finish(self, call_id: int, code: int, message: str = "", data: bytes | None = None) -> bool: ...
    def live_calls(self) -> int: ...
    def close(self, grace_s: float = 1.0) -> None: ...

@final
class UniqCounter:
    def __iter__(self) -> UniqCounter: ...
    def __next__(self) -> int: ...

@final
class ColumnBuffer:
    """Read-only Rust-owned bytes (buffer protocol); equal to ``bytes`` of the same content."""

    def __len__(self) -> int: ...
    def __bytes__(self) -> bytes: ...
    def __eq__(self, value: object, /) -> bool: ...

@final
class StoreReader:
    """Read-only view of a store directory (no lock, no recovery, no writes): rust/rmq-store/src/store_reader.rs."""

    def __new__(
        cls,
        root: str | os.PathLike[str],
        commit_log_file_size: int | None = None,
        consume_queue_file_size: int | None = None,
    ) -> StoreReader: ...
    @property
    def root(self) -> str: ...
    @property
    def commit_log_file_size(self) -> int | None: ...
    @property
    def consume_queue_file_size(self) -> int | None: ...
    @property
    def min_physical_offset(self) -> int: ...
    def topics(self) -> list[str]: ...
    def queues(self) -> list[tuple[str, int]]: ...
    def max_offset(self, topic: str, queue_id: int) -> int: ...
    def min_offset(self, topic: str, queue_id: int) -> int: ...
    def read_records(
        self, topic: str, queue_id: int, start: int, end: int, tag_codes: Sequence[int] | None = None
    ) -> tuple[ColumnBuffer, int, int]: ...
    def record_at(self, phy_offset: int) -> bytes | None: ...
    def close(self) -> None: ...
    def __enter__(self) -> StoreReader: ...
    def __exit__(self, exc_type: object, exc: object, tb: object) -> None: ...

@final
class SendAnswerSpec:
    """The broker's settings of a plain send's answer: status codes, counted statuses, region, trace, store host."""

    def __new__(
        cls, codes: list[int], counted: list[bool], region: str, trace_on: str, store_host: tuple[str, int]
    ) -> SendAnswerSpec: ...

@final
class SendRequestColumns:
    """A chunk's send requests as columns: per request its key or -1 (the general path)."""

    def __len__(self) -> int: ...
    @property
    def needs_uniq_keys(self) -> bool: ...
    @property
    def all_plain(self) -> bool: ...
    @property
    def key_of(self) -> list[int]: ...
    @property
    def keys(self) -> list[tuple[str, int, bool, str, int]]: ...
    def segments(self, plain_keys: list[bool]) -> list[tuple[int, int, bool]]: ...
    def answer(
        self, start: int, end: int, raw: list[tuple[int, int, int, int]], spec: SendAnswerSpec
    ) -> tuple[list[bytes | None], list[tuple[int, int, int]]]: ...
    def arrivals(
        self,
        start: int,
        end: int,
        raw: list[tuple[int, int, int, int]],
        topics: Collection[str] | None = None,
    ) -> list[tuple[str, int, int, int, bytes]]: ...

@final
class SendRequestParser:
    """How a plain send is recognised (header field names, property rules) and answered."""

    def __new__(
        cls,
        codes: tuple[int, int],
        v1_names: list[str],
        v2_names: list[str],
        general: list[str],
        wait: str,
        cluster: str,
        uniq_key: str,
        assign_uniq: bool,
        oneway_bit: int,
        answer_language: str,
        answer_flag: int,
        answer_keys: list[str],
    ) -> SendRequestParser: ...
    def parse(self, requests: list[Any], cluster_name: str) -> SendRequestColumns: ...

@final
class StoreEngine:
    def __new__(cls, root_dir: str, config: dict[str, object]) -> StoreEngine: ...
    def put_messages(
        self,
        msgs: Sequence[object],
        queue_ids: list[int] | None,
        sys_flag: int,
        born_timestamp: int,
        born_host: tuple[str, int],
        reconsume_times: int,
        store_timestamp: int,
        wait_flush: bool = True,
        own_fields: list[tuple[int, int, int]] | None = None,
        prepared_transaction_offset: int = 0,
        uniq_prefix: str = "",
        uniq_counter: Iterator[int] | None = None,
        trailing_separator: bool = True,
    ) -> tuple[bytes, bytes, bytes, bytes]: ...
    def put_send_requests(
        self,
        sends: SendRequestColumns,
        start: int,
        end: int,
        sys_flag_or: list[int],
        born_host: tuple[str, int],
        store_timestamp: int,
        wait_flush: bool = True,
        uniq_prefix: str = "",
        uniq_counter: Iterator[int] | None = None,
    ) -> list[tuple[int, int, int, int]]: ...
    def put_batch(
        self,
        topic: str,
        queue_id: int,
        body: bytes,
        batch_properties: bytes,
        sys_flag: int,
        born_timestamp: int,
        born_host: tuple[str, int],
        reconsume_times: int,
        store_timestamp: int,
        wait_flush: bool = True,
        uniq_id: Callable[[], str] | None = None,
        keep_properties: bool = False,
    ) -> tuple[int, int, int, str, int, int, str | None, list[bytes] | None]: ...
    def wait_flushed(self, upto: int) -> bool: ...
    def get_message(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_msg_nums: int,
        tag_codes: list[int] | None,
        property_filter: Callable[[dict[str, str]], object] | None,
    ) -> tuple[int, int, int, int, int, int, bool, bytes, int]: ...
    def is_the_batch_full(
        self, size: int, max_msg_nums: int, buffer_total: int, msg_total: int, in_disk: bool
    ) -> bool: ...
    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int: ...
    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int: ...
    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, ts_ms: int) -> int: ...
    def get_earliest_message_time(self, topic: str, queue_id: int) -> int: ...
    @property
    def max_physical_offset(self) -> int: ...
    @property
    def min_physical_offset(self) -> int: ...
    def read_commit_log(self, offset: int, size: int) -> bytes | None: ...
    def look_message_by_offset(self, offset: int) -> bytes | None: ...
    def get_commit_log_data(self, offset: int, max_size: int) -> bytes | None: ...
    def append_commit_log(self, offset: int, data: bytes) -> list[tuple[str, int, int]]: ...
    def scan_consume_queue(
        self, topic: str, queue_id: int, start: int, max_units: int, tag_codes: list[int] | None
    ) -> tuple[int, bytes]: ...
    def consume_queue_units(self, topic: str, queue_id: int, start: int, count: int) -> bytes: ...
    def topics(self) -> list[tuple[str, int]]: ...
    def flush(self) -> int: ...
    def close(self) -> None: ...
    def delete_commit_log_files_before(self, offset: int) -> int: ...
    def correct_min_offsets(self) -> None: ...
    def recovery_report(self) -> dict[str, bool | int]: ...
    def index_notes(self) -> list[str]: ...
    def query_message(
        self, topic: str, key: str, max_num: int, begin_timestamp: int, end_timestamp: int
    ) -> tuple[bytes, int, int, int]: ...
