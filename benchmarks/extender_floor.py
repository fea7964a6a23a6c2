#!/usr/bin/env python3
"""The latency floor the extender is measured against: a process that speaks the extender protocol and decides
nothing. ``/filter`` parses ExtenderArgs and passes every node it was sent; ``/prioritize`` parses them and gives
every node the score 0. Same server stack as ``netaware extender`` (aiohttp, orjson, plain HTTP), so what it
costs is what moving and parsing the bodies costs.

    python -m benchmarks.extender_floor PORT

prints ``READY`` once it serves.
"""

from __future__ import annotations

import argparse
import asyncio
import signal

import orjson
from aiohttp import web

MAX_BODY = 32 * 1024 * 1024


async def filter_nothing(request: web.Request) -> web.Response:
    args = orjson.loads(await request.read())
    answer = {"NodeNames": args["NodeNames"], "Nodes": None, "FailedNodes": {}, "FailedAndUnresolvableNodes": {},
              "Error": ""}  # fmt: skip
    return web.Response(body=orjson.dumps(answer), content_type="application/json")


async def score_nothing(request: web.Request) -> web.Response:
    args = orjson.loads(await request.read())
    answer = [{"Host": name, "Score": 0} for name in args["NodeNames"]]
    return web.Response(body=orjson.dumps(answer), content_type="application/json")


async def serve(port: int) -> None:
    app = web.Application(client_max_size=MAX_BODY)
    app.router.add_post("/filter", filter_nothing)
    app.router.add_post("/prioritize", score_nothing)
    app.router.add_get("/readyz", lambda _: web.Response(text="ok"))  # type: ignore[arg-type,return-value]
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    print("READY", flush=True)
    await stop.wait()
    await runner.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("port", type=int)
    asyncio.run(serve(parser.parse_args().port))


if __name__ == "__main__":
    main()
