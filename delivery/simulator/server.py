"""Running the simulator: in a background thread (tests) or in the foreground (command)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from aiohttp import web

from delivery.simulator.app import build_app
from delivery.simulator.config import SimConfig
from delivery.simulator.core import Simulator

T = TypeVar("T")


async def serve(simulator: Simulator, *, host: str, port: int) -> tuple[web.AppRunner, int]:
    """Start listening; returns the runner and the bound port (``port=0`` picks a free one)."""
    # A short shutdown: answers held to simulate read timeouts must not delay stopping.
    runner = web.AppRunner(
        build_app(simulator), access_log=None, handle_signals=False, shutdown_timeout=0.25
    )
    await runner.setup()
    # A deep backlog: load generators open hundreds of connections at once.
    site = web.TCPSite(runner, host, port, backlog=4096, reuse_address=True)
    await site.start()
    return runner, int(runner.addresses[0][1])


class SimulatorServer:
    """The simulator on its own event loop in a daemon thread, with a thread-safe facade.

    Every method runs on the simulator's loop, so state is only ever touched there.
    """

    def __init__(
        self,
        config: SimConfig | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        numbers: list[dict[str, Any]] | None = None,
        templates: list[dict[str, Any]] | None = None,
    ) -> None:
        self.simulator = Simulator(config)
        for number in numbers or ():
            self.simulator.add_number(number)
        for template in templates or ():
            self.simulator.add_template(template)
        self.host = host
        self.port = port
        self.loop = asyncio.new_event_loop()
        self.thread: threading.Thread | None = None
        self.runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> SimulatorServer:
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            asyncio.set_event_loop(self.loop)
            try:
                self.runner, self.port = self.loop.run_until_complete(
                    serve(self.simulator, host=self.host, port=self.port)
                )
            except BaseException as exc:  # reported to the starting thread
                failure.append(exc)
                ready.set()
                return
            ready.set()
            self.loop.run_forever()

        self.thread = threading.Thread(target=run, name="cloud-api-simulator", daemon=True)
        self.thread.start()
        ready.wait(10)
        if failure:
            raise failure[0]
        return self

    def stop(self) -> None:
        if self.thread is None:
            return
        if self.runner is not None:
            asyncio.run_coroutine_threadsafe(self._shutdown(self.runner), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()
        self.thread = None

    @staticmethod
    async def _shutdown(runner: web.AppRunner) -> None:
        await runner.cleanup()
        # Answers still held (simulated read timeouts) would outlive the loop otherwise.
        current = asyncio.current_task()
        rest = [task for task in asyncio.all_tasks() if task is not current]
        for task in rest:
            task.cancel()
        await asyncio.gather(*rest, return_exceptions=True)

    def __enter__(self) -> SimulatorServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- facade -------------------------------------------------------------------------

    def call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the simulator's loop and return its result."""

        async def wrapper() -> T:
            return fn()

        return asyncio.run_coroutine_threadsafe(wrapper(), self.loop).result(30)

    def configure(self, **changes: Any) -> dict[str, Any]:
        return self.call(lambda: self.simulator.configure(changes))

    def add_number(self, **spec: Any) -> None:
        self.call(lambda: self.simulator.add_number(spec))

    def add_template(self, **spec: Any) -> None:
        self.call(lambda: self.simulator.add_template(spec))

    def event(self, kind: str, **data: Any) -> dict[str, Any]:
        """Post a callback Meta sends on its own (see ``POST /_sim/events``)."""
        return self.call(lambda: self.simulator.event_post(kind, data))

    def template_ids(self) -> dict[tuple[str, str], str]:
        """Each registered template's id by (name, language)."""
        return self.call(lambda: {k: t.id for k, t in self.simulator.templates.items()})

    def reset(self, *, numbers: bool = False, templates: bool = False) -> None:
        self.call(lambda: self.simulator.reset(numbers=numbers, templates=templates))

    def stats(self) -> dict[str, Any]:
        return self.call(self.simulator.stats)

    def records(
        self, *, after: int = 0, limit: int | None = None, bodies: bool = False
    ) -> list[dict[str, Any]]:
        return self.call(
            lambda: self.simulator.recorder.rows_json(after=after, limit=limit, bodies=bodies)
        )

    def histogram(self, phone_number_id: str) -> dict[str, int]:
        return self.call(lambda: self.simulator.recorder.histogram(phone_number_id))

    def duplicates(self) -> dict[str, dict[str, int]]:
        return self.call(self.simulator.recorder.accepted_per_recipient)

    def wait_webhooks_idle(self, timeout: float = 10.0) -> bool:
        future = asyncio.run_coroutine_threadsafe(self.simulator.webhooks_idle(timeout), self.loop)
        return future.result(timeout + 5)
