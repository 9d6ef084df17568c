"""The send hot path on asyncio: one aiohttp session on an event loop in a helper thread.

The campaign sender hands requests to ``submit`` and gets ``concurrent.futures.Future``
objects back, exactly as with a thread pool around ``CloudApiClient.send``; only the
transport differs. Measured on this project's 2-core machine (``bench/client_throughput.py``
and ``bench/engine_rate.py``), a blocking ``requests`` call costs about 1 ms of CPU, so one
process tops out near 600 sends/s and 1,000 msg/s for one number needs several processes
and most of the machine; aiohttp costs about a third of that, so the engine keeps up with
Meta's 1,000 msg/s per number with CPU to spare. Request bodies and response parsing are
``delivery.cloud.client``'s, so both transports speak to Meta identically.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from concurrent.futures import Future

import aiohttp
from django.conf import settings

from delivery.cloud.client import (
    MAX_ERROR_TEXT,
    ApiError,
    SendRequest,
    SendResult,
    bearer,
    build_message_body,
    invalid_request,
    parse_response,
    send_url,
)


class AsyncTransport:
    """Concurrent sends over one keep-alive connection pool; thread-safe ``submit``."""

    def __init__(
        self,
        *,
        api_version: str,
        connect_timeout: float,
        read_timeout: float,
        connection_limit: int = 512,
    ) -> None:
        self.api_version = api_version
        self.timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=connect_timeout, sock_read=read_timeout
        )
        self.connection_limit = connection_limit
        self.loop = asyncio.new_event_loop()
        self._session: aiohttp.ClientSession | None = None
        ready = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(ready,), name="cloud-api-async", daemon=True
        )
        self._thread.start()
        ready.wait(10)

    def _run(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)

        async def open_session() -> None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self.connection_limit, limit_per_host=0),
                timeout=self.timeout,
                # Never retried or redirected behind the engine's back: a repeat could send twice.
                auto_decompress=True,
            )

        self.loop.run_until_complete(open_session())
        ready.set()
        self.loop.run_forever()

    def submit(self, req: SendRequest) -> Future[SendResult]:
        return asyncio.run_coroutine_threadsafe(self.send_async(req), self.loop)

    def send(self, req: SendRequest) -> SendResult:
        return self.submit(req).result()

    async def send_async(self, req: SendRequest) -> SendResult:
        """One send, awaited on this transport's own loop."""
        try:
            data = json.dumps(build_message_body(req), separators=(",", ":")).encode()
        except (KeyError, TypeError, ValueError) as exc:
            return invalid_request(exc)
        url = send_url(req, self.api_version)
        headers = {
            "Authorization": bearer(req.access_token),
            "Content-Type": "application/json",
        }
        assert self._session is not None
        started = time.perf_counter()
        try:
            async with self._session.post(
                url, data=data, headers=headers, allow_redirects=False
            ) as response:
                body = await response.read()
                status = response.status
                response_headers = response.headers
        except Exception as exc:  # every transport failure becomes a typed result
            return transport_error(exc, latency_s=time.perf_counter() - started)
        return parse_response(
            status=status,
            body=body,
            headers=response_headers,
            latency_s=time.perf_counter() - started,
        )

    def close(self) -> None:
        async def close_session() -> None:
            if self._session is not None:
                await self._session.close()

        if self.loop.is_running():
            asyncio.run_coroutine_threadsafe(close_session(), self.loop).result(10)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)


def transport_error(exc: BaseException, *, latency_s: float) -> ApiError:
    """A failure before any HTTP answer, tagged with whether the request could have left.

    Refused connections, DNS failures, connect timeouts and TLS handshake failures happen
    before the request is written; anything later (read timeout, a reset while waiting)
    may follow Meta's acceptance of the message.
    """
    never_sent = isinstance(exc, aiohttp.ClientConnectorError | aiohttp.ConnectionTimeoutError)
    return ApiError(
        http_status=None,
        code=None,
        subcode=None,
        title=type(exc).__name__,
        details=str(exc)[:MAX_ERROR_TEXT] or type(exc).__name__,
        retry_after_s=None,
        may_have_reached_meta=not never_sent,
        latency_s=latency_s,
    )


_transport: AsyncTransport | None = None
_transport_pid: int | None = None
_lock = threading.Lock()


def get_transport() -> AsyncTransport:
    """The process's transport; a forked child (RQ work horse) builds its own."""
    global _transport, _transport_pid
    with _lock:
        if _transport is None or _transport_pid != os.getpid():
            _transport_pid = os.getpid()
            _transport = AsyncTransport(
                api_version=settings.WHATSAPP_API_VERSION,
                connect_timeout=settings.WHATSAPP_CONNECT_TIMEOUT,
                read_timeout=settings.WHATSAPP_READ_TIMEOUT,
            )
        return _transport


def reset_transport() -> None:
    """Close and forget the process's transport (tests that change timeouts)."""
    global _transport
    with _lock:
        if _transport is not None and _transport_pid == os.getpid():
            _transport.close()
        _transport = None
