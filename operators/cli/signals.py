"""Running a long-lived command until SIGTERM or SIGINT, gracefully."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any


def run_until_signal(body: Callable[[Any], Awaitable[None]], log_format: str = "text") -> None:
    """Run ``body(stop)`` until SIGTERM or SIGINT sets ``stop`` (graceful: ``body`` finishes its work)."""
    import asyncio
    import logging
    import signal

    from operators import collector, logs

    logs.configure(log_format)
    collector.for_a_long_run()

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()

        def stopping(signum: int) -> None:
            logging.getLogger("netaware").info("%s received: stopping", signal.Signals(signum).name)
            stop.set()

        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stopping, signum)
        await body(stop)

    asyncio.run(main())
