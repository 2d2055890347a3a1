"""A small HTTP/1.1 client on asyncio streams: one request per connection, bodies by ``Content-Length``, chunked or
until close, server-sent events, and a hard disconnect.

Why not aiohttp or httpx: the GPU host's staged vLLM dependencies (``shared/gpu-host/vllm-0.26.0-deps-cp312.txt``) do
not list either, and the soak needs exactly what an abort is on the wire, a closed socket mid-stream, which the
standard library gives directly. uvicorn (vLLM's server) streams with chunked transfer encoding.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any, AsyncIterator


class ProtocolError(Exception):
    """The peer broke HTTP (a bad status line, a truncated chunk, a closed connection mid-body)."""


@dataclass
class Response:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""

    def json(self) -> Any:
        return json.loads(self.body)


class Connection:
    """One request on one connection. ``open`` sends it and reads the head; ``chunks`` yields the body's bytes;
    ``events`` the ``data:`` payloads of a server-sent-event body; ``close(abort=True)`` drops the connection at once,
    as a client that goes away does."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.status = 0
        self.headers: dict[str, str] = {}

    async def open(self, method: str, path: str, body: bytes | None = None,
                   content_type: str = "application/json") -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        head = [f"{method} {path} HTTP/1.1", f"Host: {self.host}:{self.port}", "Connection: close",
                "Accept: */*"]
        if body is not None:
            head += [f"Content-Type: {content_type}", f"Content-Length: {len(body)}"]
        self.writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + (body or b""))
        await self.writer.drain()
        status_line = await self.reader.readline()
        parts = status_line.decode("latin-1").split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
            raise ProtocolError(f"bad status line {status_line[:80]!r}")
        self.status = int(parts[1])
        while True:
            line = await self.reader.readline()
            if not line:
                raise ProtocolError("connection closed inside the response head")
            if line in (b"\r\n", b"\n"):
                break
            name, _, value = line.decode("latin-1").partition(":")
            self.headers[name.strip().lower()] = value.strip()

    async def chunks(self) -> AsyncIterator[bytes]:
        assert self.reader is not None
        if "chunked" in self.headers.get("transfer-encoding", "").lower():
            while True:
                size_line = await self.reader.readline()
                if not size_line:
                    raise ProtocolError("connection closed inside a chunked body")
                size = int(size_line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    await self.reader.readline()  # the empty trailer line
                    return
                try:
                    data = await self.reader.readexactly(size)
                except asyncio.IncompleteReadError as exc:
                    raise ProtocolError("connection closed inside a chunk") from exc
                await self.reader.readline()
                yield data
        elif "content-length" in self.headers:
            try:
                yield await self.reader.readexactly(int(self.headers["content-length"]))
            except asyncio.IncompleteReadError as exc:
                raise ProtocolError("connection closed before Content-Length bytes") from exc
        else:
            while data := await self.reader.read(65536):
                yield data

    async def body(self) -> bytes:
        return b"".join([part async for part in self.chunks()])

    async def events(self) -> AsyncIterator[str]:
        """The ``data:`` payload of each server-sent event, in order (``[DONE]`` included)."""
        buffer = b""
        async for part in self.chunks():
            buffer += part.replace(b"\r\n", b"\n")
            while b"\n\n" in buffer:
                event, buffer = buffer.split(b"\n\n", 1)
                data = [line[5:].lstrip() for line in event.split(b"\n") if line.startswith(b"data:")]
                if data:
                    yield b"\n".join(data).decode()
        if buffer.strip():
            raise ProtocolError(f"stream ended inside an event: {buffer[:80]!r}")

    def close(self, abort: bool = False) -> None:
        """Close the connection; ``abort``: reset it at once (no orderly shutdown), a client that vanished."""
        if self.writer is None:
            return
        transport = self.writer.transport
        if abort:
            transport.abort()
        else:
            self.writer.close()


async def fetch(host: str, port: int, method: str, path: str, payload: Any = None, timeout_s: float = 10.0) -> Response:
    """One whole request and response (JSON ``payload`` if given), within ``timeout_s``."""
    conn = Connection(host, port)

    async def run() -> Response:
        body = None if payload is None else json.dumps(payload).encode()
        await conn.open(method, path, body)
        return Response(conn.status, conn.headers, await conn.body())

    try:
        return await asyncio.wait_for(run(), timeout_s)
    finally:
        conn.close()
