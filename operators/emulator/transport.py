"""Transport faults: a TCP proxy in front of an API server that breaks connections the way networks and crashing
servers do. The emulator's faults are HTTP statuses; real failures are connections reset, refused or stalled, which
aiohttp raises as its own errors (kubernetes-asyncio does not wrap them in ApiException), and a loop that catches
only ApiException dies of them.

The proxy forwards bytes unchanged. On plain HTTP/1.1 it follows the client's stream from request to request
(heads held until complete, bodies framed by Content-Length or chunked passed on as they come) so that a fault can
match a request by method and path; clients do not pipeline, so the server's bytes after a request are its response.
Anything it cannot follow (TLS, an upgraded connection, a head over 1 MiB) is passed on opaque: there only faults
without ``method``/``path`` match, each at the next client write after it was armed."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import fcntl
import socket
import struct
import termios
from collections.abc import Coroutine
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal, Self

from operators.emulator.http_stream import READ, Head, RequestStream, partial_response


@dataclass
class _Fault:
    kind: Literal["reset_request", "reset_response", "stall"]
    remaining: int
    method: str | None
    path: str | None
    seconds: float = 0.0

    def matches(self, method: str | None, path: str | None) -> bool:
        """Filters need an HTTP request (``method`` None: opaque bytes, where only unfiltered faults match)."""
        if self.method is None and self.path is None:
            return True
        if method is None or path is None:
            return False
        return self.method in (None, method) and (self.path is None or self.path in path)


def _unsent(writer: asyncio.StreamWriter) -> int:
    """Bytes not yet delivered: the transport's buffer and the kernel's send queue (sent but not acknowledged)."""
    transport = writer.transport
    if transport.is_closing():
        return 0
    pending = transport.get_write_buffer_size()
    sock = writer.get_extra_info("socket")
    request = getattr(termios, "TIOCOUTQ", None)
    if sock is not None and request is not None:
        with contextlib.suppress(OSError):
            pending += struct.unpack("i", fcntl.ioctl(sock.fileno(), request, b"\0\0\0\0"))[0]
    return int(pending)


async def _flushed(writer: asyncio.StreamWriter, within: float = 1.0) -> None:
    """Wait (bounded) until what was forwarded has arrived: a reset discards what is still queued."""
    step = 0.002
    for _ in range(int(within / step)):
        if not _unsent(writer):
            return
        await asyncio.sleep(step)


async def _send(writer: asyncio.StreamWriter, data: bytes) -> bool:
    """Write with back-pressure (nothing piles up in the proxy); False when that side is gone."""
    if writer.transport.is_closing():
        return False
    writer.write(data)
    try:
        await writer.drain()
    except OSError:  # ConnectionResetError, BrokenPipeError
        return False
    return True


def _eof(writer: asyncio.StreamWriter) -> None:
    """Pass a half-close on (FIN), as a TCP peer sees it."""
    if not writer.transport.is_closing() and writer.can_write_eof():
        with contextlib.suppress(OSError):
            writer.write_eof()


def _close(writer: asyncio.StreamWriter, how: Literal["close", "abort", "rst"]) -> None:
    """``close`` flushes then sends FIN, ``abort`` drops the buffer then FIN, ``rst``: SO_LINGER 0, the peer's
    next read fails with ECONNRESET (a crashed server, a middlebox dropping state)."""
    if how == "rst":
        sock = writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    if how == "close":
        writer.close()
    else:
        writer.transport.abort()


@dataclass(eq=False)
class _Connection:
    client: asyncio.StreamWriter
    task: asyncio.Task[None] | None = None
    upstream: asyncio.StreamWriter | None = None
    pending: _Fault | None = None  # applied to the server's next bytes (the response)
    method: str = ""  # of the request the pending fault is about: HEAD has no body
    http: bool = True  # whether the response can be parsed (the request was)

    def close(self, how: Literal["close", "abort", "rst"]) -> None:
        for writer in (self.client, self.upstream):
            if writer is not None:
                _close(writer, how)
        if how != "close" and self.task is not None and self.task is not asyncio.current_task():
            self.task.cancel()


class FaultyProxy:
    """A TCP proxy on 127.0.0.1 in front of ``upstream_host:upstream_port`` (the emulator over HTTP, or the real
    API server over TLS) that resets, stalls or refuses connections on demand.

    ``applied`` counts the faults applied: per request for ``reset_request``, ``reset_response`` and ``stall``,
    per connection reset by ``reset_all``, per call of ``refuse``. ``connections`` counts connections accepted."""

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream_host = upstream_host
        self.upstream_port = upstream_port
        self.port = 0
        self.applied: collections.Counter[str] = collections.Counter()
        self.connections = 0
        self._faults: list[_Fault] = []
        self._open: set[_Connection] = set()
        self._server: asyncio.Server | None = None
        self._reopening: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()  # every task of the proxy, until it ends
        self._closed = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def listening(self) -> bool:
        return self._server is not None

    @property
    def open_connections(self) -> int:
        return len(self._open)

    async def __aenter__(self) -> Self:
        await self._listen()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._closed = True
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for connection in list(self._open):
            connection.close("abort")
        errors: list[Exception] = []
        while self._tasks:  # until every task has ended, those a cancelled task was still cleaning up included
            for task in self._tasks:
                task.cancel()
            results = await asyncio.gather(*self._tasks, return_exceptions=True)
            errors += [result for result in results if isinstance(result, Exception)]
        if server is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(server.wait_closed(), 1.0)
        if errors:
            raise errors[0]  # a reopening that could not bind, or a bug in a pump: never silent

    def reset_next(
        self,
        times: int = 1,
        method: str | None = None,
        path: str | None = None,
        when: Literal["request", "response"] = "response",
    ) -> None:
        """Reset (RST, both sides) the connection of the next ``times`` requests matching ``method`` and a
        substring ``path`` of the request target (plain HTTP only: with TLS leave both None, and the next request
        is the next client write on any connection). ``when="request"``: before the request reaches the server
        (nothing applied); ``"response"``: once its answer begins, after the head and part of the body (all of
        it but the end: the write was applied, the answer is lost)."""
        if when not in ("request", "response"):
            raise ValueError(f"when must be 'request' or 'response', not {when!r}")
        kind: Literal["reset_request", "reset_response"] = "reset_request" if when == "request" else "reset_response"
        self._arm(_Fault(kind, times, method.upper() if method else None, path))

    def stall_next(self, seconds: float, times: int = 1, method: str | None = None, path: str | None = None) -> None:
        """Forward the next ``times`` matching requests but hold their response back ``seconds``: a client whose
        timeout is shorter gives up (filters as for ``reset_next``)."""
        self._arm(_Fault("stall", times, method.upper() if method else None, path, seconds))

    def reset_all(self) -> None:
        """Reset every open connection now: what a killed API server looks like to its clients."""
        self.applied["reset_all"] += self._reset_open()

    async def refuse(self, seconds: float) -> None:
        """Stop listening (connections are refused: ECONNREFUSED), reset every open connection, listen again on the
        same port after ``seconds``; returns at once (a background task reopens)."""
        server, self._server = self._server, None
        if server is not None:
            server.close()  # the listening socket is closed now; accepted ones are reset below
        self.applied["refuse"] += 1
        self._reset_open()
        if self._reopening is not None:
            self._reopening.cancel()
        self._reopening = self._spawn(self._reopen_after(seconds))

    def _arm(self, fault: _Fault) -> None:
        if fault.remaining < 1:
            raise ValueError(f"times must be at least 1, not {fault.remaining}")
        self._faults.append(fault)

    def _take(self, method: str | None, path: str | None) -> _Fault | None:
        """The first armed fault the request matches, spent by one."""
        for fault in self._faults:
            if fault.matches(method, path):
                fault.remaining -= 1
                if not fault.remaining:
                    self._faults.remove(fault)
                return fault
        return None

    def _spawn(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _reset_open(self) -> int:
        connections = list(self._open)
        for connection in connections:
            connection.close("rst")
        return len(connections)

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port, reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _reopen_after(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
        for attempt in range(40):  # another socket may hold the port a moment longer
            try:
                await self._listen()
                return
            except OSError:
                if attempt == 39:
                    raise
                await asyncio.sleep(0.05)

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Registered before anything is awaited, so that a reset or the exit reaches every connection."""
        self.connections += 1
        connection = _Connection(writer)
        self._open.add(connection)
        connection.task = self._spawn(self._serve(connection, reader))
        connection.task.add_done_callback(lambda _: self._open.discard(connection))

    async def _serve(self, connection: _Connection, reader: asyncio.StreamReader) -> None:
        if self._closed:
            connection.close("abort")
            return
        try:
            upstream_reader, connection.upstream = await asyncio.open_connection(self.upstream_host, self.upstream_port)
        except OSError:
            connection.close("rst")  # an unreachable server, as its client would see it
            return
        pumps = [
            self._spawn(self._requests(connection, reader)),
            self._spawn(self._responses(connection, upstream_reader)),
        ]
        try:
            await asyncio.wait(pumps)
        finally:
            for pump in pumps:
                pump.cancel()
            results = await asyncio.gather(*pumps, return_exceptions=True)
            connection.close("close")
        for result in results:
            if isinstance(result, Exception):
                raise result

    @staticmethod
    async def _read(connection: _Connection, reader: asyncio.StreamReader) -> bytes:
        """The next bytes, b"" at the end; a peer's reset is passed on to the other side."""
        try:
            return await reader.read(READ)
        except OSError:
            connection.close("rst")
            return b""

    def _apply(self, connection: _Connection, fault: _Fault | None, method: str, http: bool) -> bool:
        """Reset now or arm the response's fault; False when the connection was reset."""
        if fault is None:
            return True
        if fault.kind == "reset_request":
            self.applied["reset_request"] += 1
            connection.close("rst")
            return False
        connection.pending, connection.method, connection.http = fault, method, http
        return True

    async def _requests(self, connection: _Connection, reader: asyncio.StreamReader) -> None:
        assert connection.upstream is not None
        requests = RequestStream()
        while data := await self._read(connection, reader):
            items = requests.feed(data)
            opaque_write = requests.opaque and not any(isinstance(item, Head) for item in items)
            if opaque_write and not self._apply(connection, self._take(None, None), "", http=False):
                return
            for item in items:
                if isinstance(item, Head) and not self._apply(
                    connection, self._take(item.method, item.path), item.method, http=True
                ):
                    return
                if not await _send(connection.upstream, item.raw if isinstance(item, Head) else item):
                    connection.close("rst")
                    return
        _eof(connection.upstream)

    async def _responses(self, connection: _Connection, reader: asyncio.StreamReader) -> None:
        client = connection.client
        while data := await self._read(connection, reader):
            fault, connection.pending = connection.pending, None
            if fault is not None and fault.kind == "stall":
                self.applied["stall"] += 1
                await asyncio.sleep(fault.seconds)
            elif fault is not None:
                if connection.http:
                    part = await partial_response(data, reader, connection.method)
                else:
                    part = data[: len(data) // 2]
                if part and await _send(client, part):
                    await _flushed(client)
                self.applied["reset_response"] += 1
                connection.close("rst")
                return
            if not await _send(client, data):
                connection.close("rst")
                return
        _eof(client)
