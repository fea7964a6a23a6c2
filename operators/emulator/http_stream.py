"""What the transport-fault proxy (:mod:`operators.emulator.transport`) reads of HTTP/1.1: the client's stream
split into request heads and the rest (bodies framed by Content-Length or chunked), and a response cut short —
its head and part of its body, never all of it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Literal

MAX_HEAD = 1 << 20  # a longer request head is passed on without matching (and the connection turns opaque)
MAX_LINE = 1 << 14  # a chunk-size or trailer line
READ = 1 << 16
_METHOD_START = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ")


@dataclass(frozen=True)
class Head:
    method: str
    path: str
    raw: bytes


def _fields(lines: list[str]) -> dict[str, str]:
    fields: dict[str, str] = {}
    for line in lines:
        name, colon, value = line.partition(":")
        if not colon:
            raise ValueError(f"not a header field: {line!r}")
        fields[name.strip().lower()] = value.strip()
    return fields


def _framing(fields: dict[str, str]) -> tuple[int | None, bool]:
    """(Content-Length or None, chunked)."""
    chunked = "chunked" in fields.get("transfer-encoding", "").lower()
    text = fields.get("content-length")
    length = int(text) if text is not None and not chunked else None
    if length is not None and length < 0:
        raise ValueError("negative Content-Length")
    return length, chunked


class RequestStream:
    """The client's bytes split into request heads (held until complete, to be matched) and everything else, passed
    on as it comes. What it cannot follow turns the rest of the connection opaque: bytes only."""

    def __init__(self) -> None:
        self.opaque = False
        self._buffer = bytearray()
        self._state: Literal["head", "body", "size", "chunk", "trailer"] = "head"
        self._left = 0  # bytes of the body (or of the chunk and its CRLF) still to pass on
        self._scanned = 0  # where the search for the end of the head resumes

    def feed(self, data: bytes) -> list[Head | bytes]:
        self._buffer += data
        out: list[Head | bytes] = []
        while self._buffer and not self.opaque:
            item = self._step()
            if item is None:
                break
            out.append(item)
        if self.opaque and self._buffer:
            out.append(self._take(len(self._buffer)))
        return out

    def _take(self, count: int) -> bytes:
        taken = bytes(self._buffer[:count])
        del self._buffer[:count]
        return taken

    def _step(self) -> Head | bytes | None:
        if self._state in ("body", "chunk"):
            taken = self._take(min(self._left, len(self._buffer)))
            self._left -= len(taken)
            if not self._left:
                self._state = "head" if self._state == "body" else "size"
            return taken
        if self._state == "head":
            return self._head()
        end = self._buffer.find(b"\r\n")
        if end < 0:
            self.opaque = len(self._buffer) > MAX_LINE
            return None
        line = self._take(end + 2)
        if self._state == "trailer":
            self._state = "head" if line == b"\r\n" else "trailer"
            return line
        try:
            size = int(line.split(b";")[0], 16)
        except ValueError:
            self.opaque = True
            return line
        self._state, self._left = ("trailer", 0) if size == 0 else ("chunk", size + 2)
        return line

    def _head(self) -> Head | bytes | None:
        if self._buffer.startswith(b"\r\n"):  # an empty line before a request line may be ignored (RFC 9112)
            return self._take(2)
        if self._buffer[0] not in _METHOD_START:  # TLS, HTTP/2 frames: not a request line
            self.opaque = True
            return None
        end = self._buffer.find(b"\r\n\r\n", self._scanned)
        if end < 0 or end + 4 > MAX_HEAD:
            self._scanned = max(0, len(self._buffer) - 3)
            self.opaque = len(self._buffer) > MAX_HEAD
            return None
        self._scanned = 0
        raw = self._take(end + 4)
        try:
            request_line, *lines = raw[:end].decode("latin-1").split("\r\n")
            method, path, version = request_line.split(" ")
            if not version.startswith("HTTP/1."):
                raise ValueError(version)
            fields = _fields(lines)
            length, chunked = _framing(fields)
        except ValueError:
            self.opaque = True
            return raw
        if method == "CONNECT" or "upgrade" in fields:  # what follows is another protocol
            self.opaque = True
        elif chunked:
            self._state = "size"
        elif length:
            self._state, self._left = "body", length
        return Head(method, path, raw)


async def partial_response(first: bytes, reader: asyncio.StreamReader, method: str) -> bytes:
    """The response's head and part of its body, never all of it: half of a Content-Length body (of what came), the
    first chunk of a chunked one (a watch's first event) without the last chunk; nothing of an answer without a
    body (there is nothing to cut: the client sees the server disconnect)."""
    buffer = bytearray(first)

    async def more() -> bool:
        if len(buffer) > MAX_HEAD:
            return False
        try:
            data = await reader.read(READ)
        except OSError:
            return False
        buffer.extend(data)
        return bool(data)

    while (end := buffer.find(b"\r\n\r\n")) < 0:
        if not await more():
            return bytes(buffer[: len(buffer) // 2])
    body = end + 4
    try:
        status_line, *lines = buffer[:end].decode("latin-1").split("\r\n")
        status = int(status_line.split(" ")[1])
        length, chunked = _framing(_fields(lines))
    except (ValueError, IndexError):
        return bytes(buffer[: len(buffer) // 2])
    if method == "HEAD" or status < 200 or status in (204, 304) or length == 0:
        return b""
    if length is not None:
        return bytes(buffer[: body + min(len(buffer) - body, length // 2)])
    if not chunked:  # read until the server closes
        return bytes(buffer[: body + (len(buffer) - body) // 2])
    while (eol := buffer.find(b"\r\n", body)) < 0:
        if not await more():
            return bytes(buffer[:body])
    try:
        size = int(buffer[body:eol].split(b";")[0], 16)
    except ValueError:
        return bytes(buffer[:body])
    chunk_end = eol + 2 + size + 2
    while size and len(buffer) < chunk_end:
        if not await more():
            return bytes(buffer[: eol + 2 + (len(buffer) - eol - 2) // 2])
    return bytes(buffer[:chunk_end]) if size else bytes(buffer[:body])
