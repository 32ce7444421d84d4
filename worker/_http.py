"""The worker's HTTP address: ``GET /livez``, ``/readyz`` and ``/metrics``.

A small server on the worker's own event loop (``asyncio.start_server``), because what it
answers is what the loop knows: a probe answered proves the loop turns, and a blocked loop
answers nothing (the probe times out, as it should). It never delays a search:

* at most :data:`MAX_CONNECTIONS` connections at once; one more closes the one that has
  waited longest without sending a request (else it is closed itself): a flood costs an
  accept and a close each, and cannot keep a probe out;
* a request head must arrive within :data:`READ_TIMEOUT_S` and fit :data:`MAX_HEAD_BYTES`;
  an answer must be taken within :data:`WRITE_TIMEOUT_S` (a slow client is dropped);
* a scrape is rendered in a thread of its own (one at a time; scrapes that arrive meanwhile
  share it), so the loop keeps serving searches while the text is built.

HTTP/1.0-style: one request per connection, ``Connection: close``. Only ``GET`` and ``HEAD``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from fs_search.worker._processes import PortTaken

log = logging.getLogger(__name__)

MAX_CONNECTIONS = 64
MAX_HEAD_BYTES = 8 * 1024
READ_TIMEOUT_S = 5.0
WRITE_TIMEOUT_S = 10.0
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"}
_REASONS[503] = "Service Unavailable"


class HttpAddressError(ValueError):
    """``--http`` is not HOST:PORT."""


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT``; an empty host: every interface) as (host, port).

    Raises:
        HttpAddressError: not HOST:PORT, or the port is not 0-65535.
    """
    host, sep, port = text.strip().rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise HttpAddressError(
            f"--http {text!r}: expected HOST:PORT (e.g. 0.0.0.0:9464, 127.0.0.1:0 for a free port)"
        )
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host or "0.0.0.0", int(port)


@dataclass
class Routes:
    """What each path answers: (healthy, checks) for the probes, the scrape's bytes."""

    livez: Callable[[], tuple[bool, dict[str, str]]]
    readyz: Callable[[], tuple[bool, dict[str, str]]]
    metrics: Callable[[], bytes] | None
    metrics_type: str = "text/plain; version=0.0.4; charset=utf-8"


class HttpServer:
    """Serves :class:`Routes` on ``host:port`` while :meth:`serving` is open."""

    def __init__(self, routes: Routes, host: str, port: int) -> None:
        self.routes = routes
        self.host = host
        self.port = port
        self.connections = 0
        self.refused = 0
        self._render: concurrent.futures.ThreadPoolExecutor | None = None
        self._scrape: asyncio.Future[bytes] | None = None
        # Connections that have sent no complete request yet, oldest first.
        self._idle: dict[asyncio.StreamWriter, None] = {}

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[HttpServer]:
        """Listen (``port`` 0: a free one, then in :attr:`port`) until closed."""
        self._render = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="fs-scrape")
        try:
            server = await asyncio.start_server(
                self._connection, self.host, self.port, limit=MAX_HEAD_BYTES, backlog=128
            )
        except OSError as e:
            self._render.shutdown(wait=False)
            where = f"{self.host}:{self.port}"
            raise PortTaken(f"--http {where}: cannot listen there ({e.strerror})") from e
        self.port = server.sockets[0].getsockname()[1]
        try:
            yield self
        finally:
            server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 2)
            self._render.shutdown(wait=False, cancel_futures=True)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.connections >= MAX_CONNECTIONS:
            # Full: the connection that has waited longest without a request makes room (a
            # flood of idle connections cannot keep a probe out); else the new one goes.
            if not self._idle:
                self.refused += 1
                writer.transport.abort()
                return
            oldest = next(iter(self._idle))
            del self._idle[oldest]
            oldest.transport.abort()
            self.refused += 1
        self.connections += 1
        done = False
        try:
            self._idle[writer] = None
            try:
                async with asyncio.timeout(READ_TIMEOUT_S):
                    head = await reader.readuntil(b"\r\n\r\n")
            except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                return
            finally:
                self._idle.pop(writer, None)
            status, content_type, body, head_only = await self._answer(head)
            headers = (
                f"HTTP/1.1 {status} {_REASONS[status]}\r\n"
                f"Content-Type: {content_type}\r\n"
                f"Content-Length: {len(body)}\r\n"
                "Cache-Control: no-store\r\n"
                "Connection: close\r\n\r\n"
            ).encode("ascii")
            writer.write(headers if head_only else headers + body)
            async with asyncio.timeout(WRITE_TIMEOUT_S):
                await writer.drain()
            done = True
        except (TimeoutError, ConnectionError):
            pass
        except Exception as e:  # noqa: BLE001 - one bad connection must not stop the server
            log.warning("HTTP request failed: %s", e)
        finally:
            self.connections -= 1
            # An answer taken is closed politely; anything else is dropped with what it holds.
            if done:
                writer.close()
            else:
                writer.transport.abort()

    async def _answer(self, head: bytes) -> tuple[int, str, bytes, bool]:
        """(status, content type, body, HEAD) for one request head."""
        line = head.split(b"\r\n", 1)[0].decode("latin-1")
        parts = line.split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            return 400, "text/plain; charset=utf-8", b"bad request\n", False
        method, target = parts[0], parts[1]
        if method not in ("GET", "HEAD"):
            return 405, "text/plain; charset=utf-8", b"only GET and HEAD\n", False
        head_only = method == "HEAD"
        path = target.split("?", 1)[0]
        if path in ("/livez", "/readyz"):
            healthy, checks = (self.routes.livez if path == "/livez" else self.routes.readyz)()
            key = "alive" if path == "/livez" else "ready"
            body = json.dumps({key: healthy, "checks": checks}, indent=1).encode() + b"\n"
            return 200 if healthy else 503, "application/json", body, head_only
        if path == "/metrics" and self.routes.metrics is not None:
            return 200, self.routes.metrics_type, await self._scraped(), head_only
        return 404, "text/plain; charset=utf-8", b"not found: /livez /readyz /metrics\n", head_only

    async def _scraped(self) -> bytes:
        """The scrape, rendered off the loop; concurrent scrapes share one rendering."""
        if self._scrape is None or self._scrape.done():
            assert self.routes.metrics is not None and self._render is not None
            loop = asyncio.get_running_loop()
            self._scrape = asyncio.ensure_future(
                loop.run_in_executor(self._render, self.routes.metrics)
            )
        return await asyncio.shield(self._scrape)
