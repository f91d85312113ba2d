"""GrpcNativeTransport: serves ``GrpcServer``'s method table over the extension's ``GrpcFront`` (HTTP/2 + gRPC framing
on the extension's own threads), on the broker's event loop.

The front hands complete requests over in batches (``drain()`` when its eventfd is readable); each CALL is decoded
with its v2 request class and given to the same handlers grpc.aio runs, with a ``NativeCallContext`` (the only
context calls the handlers make: ``invocation_metadata``, ``peer``, ``time_remaining``). A unary handler runs
eagerly: a reply it has without suspending is sent at once (no Task); one that suspends goes on as a Task. A
server-streaming handler (an async generator) is a Task writing each item; Telemetry's requests come as an async
iterator fed by MESSAGE / HALF_CLOSE. CANCELLED (the client reset the stream or left) cancels the call's Task, as
grpc.aio does (long-poll waiters released). An unknown method → UNIMPLEMENTED; a handler's unexpected exception is
logged and answered UNKNOWN (as grpc.aio). Loop-thread only; ``send_message``/``finish`` never block.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Generator
from dataclasses import dataclass
from typing import Any

from rmq_core._core import GRPC_CALL, GRPC_CANCELLED, GRPC_HALF_CLOSE, GRPC_MESSAGE

log = logging.getLogger(__name__)

# grpc status codes (grpc.StatusCode's values; grpc itself is not needed here)
OK, CANCELLED, UNKNOWN, UNIMPLEMENTED, INTERNAL, UNAVAILABLE = 0, 1, 2, 12, 13, 14
DRAIN_BATCH = 1024  # events taken per drain (the loop gets a turn between batches)


@dataclass(frozen=True)
class NativeMethod:
    """One served RPC: its handler (``_answering_refusals``-wrapped), request decoder and shape."""

    handler: Callable[..., Any]
    decode: Callable[[bytes], Any]
    client_streaming: bool
    server_streaming: bool


class NativeCallContext:
    """What the handlers ask of grpc's ``ServicerContext``, for one call of the front."""

    __slots__ = ("_deadline", "_metadata", "_peer")

    def __init__(self, metadata: list[tuple[str, Any]], peer: str, timeout_s: float | None) -> None:
        self._metadata = metadata
        self._peer = peer
        self._deadline = None if timeout_s is None else time.monotonic() + timeout_s

    def invocation_metadata(self) -> list[tuple[str, Any]]:
        return self._metadata

    def peer(self) -> str:
        return self._peer

    def time_remaining(self) -> float | None:
        return None if self._deadline is None else max(0.0, self._deadline - time.monotonic())


class _Requests:
    """A client-streaming call's request messages as an async iterator (MESSAGE → next item, HALF_CLOSE → end)."""

    __slots__ = ("decode", "ended", "items", "waiter")

    def __init__(self, decode: Callable[[bytes], Any]) -> None:
        self.decode = decode
        self.items: deque[bytes] = deque()
        self.ended = False
        self.waiter: asyncio.Future[None] | None = None

    def push(self, data: bytes | None) -> None:
        if data is None:
            self.ended = True
        else:
            self.items.append(data)
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def __aiter__(self) -> _Requests:
        return self

    async def __anext__(self) -> Any:
        while not self.items:
            if self.ended:
                raise StopAsyncIteration
            self.waiter = asyncio.get_running_loop().create_future()
            await self.waiter
        return self.decode(self.items.popleft())


class _Resumed:
    """Awaitable that goes on driving a coroutine already stepped once (it yielded ``first``): ``yield from``."""

    __slots__ = ("coro", "first")

    def __init__(self, coro: Any, first: Any) -> None:
        self.coro, self.first = coro, first

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, value = self.coro, self.first
        while True:
            try:
                sent = yield value
            except BaseException as e:  # thrown into the task (cancellation): passed on
                try:
                    value = coro.throw(e)
                except StopIteration as done:
                    return done.value
                continue
            try:
                value = coro.send(sent)
            except StopIteration as done:
                return done.value


def _unexpected(e: Exception) -> str:
    """A handler's (or the decoder's) unexpected exception as grpc.aio words it (status UNKNOWN)."""
    return f"Unexpected {type(e)}: {e}"


class GrpcNativeTransport:
    def __init__(self, front: Any, methods: dict[str, NativeMethod]) -> None:
        self.front = front
        self.methods = methods
        self.tasks: dict[int, asyncio.Task[Any]] = {}  # call id → the handler's task (calls that suspended)
        self.streams: set[int] = set()  # the calls whose task is a server stream (long polls, Telemetry)
        self.requests: dict[int, _Requests] = {}  # client-streaming calls' inbound messages
        self.stopping = False
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self.front.fileno(), self._on_readable)

    # --- inbound -------------------------------------------------------------------------------------------------
    def _on_readable(self) -> None:
        events = self.front.drain(DRAIN_BATCH)
        for kind, call_id, payload in events:
            try:
                if kind == GRPC_CALL:
                    self._call(call_id, *payload)
                elif kind in (GRPC_MESSAGE, GRPC_HALF_CLOSE):
                    requests = self.requests.get(call_id)
                    if requests is not None:
                        requests.push(payload if kind == GRPC_MESSAGE else None)
                elif kind == GRPC_CANCELLED:
                    task = self.tasks.get(call_id)
                    if task is not None:
                        task.cancel()  # its done callback forgets the call
            except Exception:
                log.exception("gRPC front: event %d of call %d failed", kind, call_id)
                self.front.finish(call_id, INTERNAL, "internal error")

    def _call(
        self, call_id: int, path: str, metadata: Any, peer: str, timeout_s: float | None, request: bytes | None
    ) -> None:
        method = self.methods.get(path)
        if method is None:
            self.front.finish(call_id, UNIMPLEMENTED, "Method not found!")
            return
        if self.stopping:
            self.front.finish(call_id, UNAVAILABLE, "the broker is stopping")
            return
        context = NativeCallContext(metadata, peer, timeout_s)
        if method.client_streaming:
            requests = self.requests[call_id] = _Requests(method.decode)
            self.streams.add(call_id)
            self._spawn(call_id, self._stream(call_id, method.handler(requests, context)))
            return
        try:
            decoded = method.decode(request or b"")
        except Exception as e:  # an undecodable request is not the handler's
            log.warning("gRPC %s: undecodable request: %r", path, e)
            self.front.finish(call_id, UNKNOWN, _unexpected(e))
            return
        if method.server_streaming:
            self.streams.add(call_id)
            self._spawn(call_id, self._stream(call_id, method.handler(decoded, context)))
            return
        coro = method.handler(decoded, context)
        try:
            first = coro.send(None)  # eagerly: most answers need no await that suspends
        except StopIteration as done:
            self.front.finish(call_id, OK, "", done.value.SerializeToString())
            return
        except Exception as e:
            log.exception("gRPC %s failed", path)
            self.front.finish(call_id, UNKNOWN, _unexpected(e))
            return
        self._spawn(call_id, self._unary(call_id, path, coro, first))

    def _spawn(self, call_id: int, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self.tasks[call_id] = task
        task.add_done_callback(lambda _t: self._done(call_id, task))

    def _done(self, call_id: int, task: asyncio.Task[Any]) -> None:
        if self.tasks.get(call_id) is task:
            del self.tasks[call_id]
            self.streams.discard(call_id)
            self.requests.pop(call_id, None)

    # --- outbound ------------------------------------------------------------------------------------------------
    async def _unary(self, call_id: int, path: str, coro: Any, first: Any) -> None:
        try:
            response = await _Resumed(coro, first)
        except asyncio.CancelledError:
            self.front.finish(call_id, CANCELLED, "cancelled")  # a no-op when the client went
            raise
        except Exception as e:
            log.exception("gRPC %s failed", path)
            self.front.finish(call_id, UNKNOWN, _unexpected(e))
        else:
            self.front.finish(call_id, OK, "", response.SerializeToString())

    async def _stream(self, call_id: int, items: AsyncIterator[Any]) -> None:
        front = self.front
        try:
            async for item in items:
                if not front.send_message(call_id, item.SerializeToString()):
                    return  # the call is gone
            front.finish(call_id, OK, "")
        except asyncio.CancelledError:
            front.finish(call_id, CANCELLED, "cancelled")
            raise
        except Exception as e:
            log.exception("gRPC stream %d failed", call_id)
            front.finish(call_id, UNKNOWN, _unexpected(e))
        finally:
            aclose = getattr(items, "aclose", None)
            if aclose is not None:
                await aclose()

    # --- stop ----------------------------------------------------------------------------------------------------
    async def stop(self, grace_s: float) -> None:
        """New calls answered UNAVAILABLE; unary calls in flight get ``grace_s`` to answer, streams (long polls,
        Telemetry) are cancelled; then the front closes (GOAWAY) on a worker thread (it joins its threads)."""
        self.stopping = True
        for call_id in self.streams:
            self.tasks[call_id].cancel()
        pending = list(self.tasks.values())
        if pending:
            await asyncio.wait(pending, timeout=grace_s)
        for task in list(self.tasks.values()):
            task.cancel()
        if self.tasks:
            await asyncio.gather(*self.tasks.values(), return_exceptions=True)
        if self._loop is not None:
            self._loop.remove_reader(self.front.fileno())
        loop = asyncio.get_running_loop()
        closed: asyncio.Future[None] = loop.create_future()

        def close() -> None:
            try:
                self.front.close(grace_s)
            finally:
                loop.call_soon_threadsafe(closed.set_result, None)

        threading.Thread(target=close, name="grpc-front-close", daemon=True).start()
        await closed
