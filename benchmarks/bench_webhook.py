#!/usr/bin/env python3
"""Webhook latency under load over HTTPS on loopback: open loop at fixed rates (the default), or closed loop.

    python -m benchmarks.bench_webhook [--rates 100,500,1000] [--seconds 10] [--repeat 3]
    python -m benchmarks.bench_webhook --clients 200 [--seconds 30]      (closed loop, the old figure)

Runs the real webhook (example cluster view, an AppGroup pod to mutate) in a separate process, then an aiohttp
server that answers every review with an empty patch (the floor), each loaded the same way. Open loop: requests
are sent at their scheduled times whether or not earlier ones have answered (as the API server sends admission
reviews), and each latency counts from the scheduled time, so a stall is not hidden by a client waiting
(coordinated omission). Closed loop: --clients keep-alive clients, each sending when its last answer arrived;
on two cores that measures queueing rather than the webhook. Prints requests/s, p50/p99/max latency and errors
for both, and the ratios (budget in docs/design/contracts.md: p99 < 5 ms, zero errors).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import pathlib
import socket
import ssl
import statistics
import tempfile
import time
from typing import Any

import aiohttp
import trustme

from benchmarks import records
from benchmarks.support import free_port

ROOT = pathlib.Path(__file__).resolve().parent.parent
BUDGET_MS = 5.0  # p99, docs/design/contracts.md (and at most 1.3x the empty handler)

REVIEW = json.dumps(
    {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "bench",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "operation": "CREATE",
            "namespace": "default",
            "object": {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": "p",
                    "namespace": "default",
                    "labels": {"appgroup.diktyo.x-k8s.io": "a1", "appgroup.diktyo.x-k8s.io.workload": "p2"},
                },
                "spec": {"containers": [{"name": "c", "image": "x"}]},
            },
        },
    }
).encode()


def run_server(kind: str, port: int, cert: str, key: str) -> None:
    from aiohttp import web

    from operators.serving import ReloadingTLS
    from operators.sources.files import load_snapshot
    from webhooks.server import build_app, serve
    from webhooks.view import ClusterView

    async def main() -> None:
        stop = asyncio.Event()
        tls = ReloadingTLS(cert, key)
        if kind == "netaware":
            view = ClusterView.from_snapshot(load_snapshot([str(ROOT / "hack" / "examples")]))
            await serve(build_app(view), "127.0.0.1", port, tls, stop, reload_interval=3600)
            return

        async def empty(request: web.Request) -> web.Response:
            review = await request.json()
            return web.json_response(
                {
                    "apiVersion": "admission.k8s.io/v1",
                    "kind": "AdmissionReview",
                    "response": {
                        "uid": review["request"]["uid"],
                        "allowed": True,
                        "patchType": "JSONPatch",
                        "patch": "W10=",
                    },
                }
            )

        app = web.Application()
        app.router.add_post("/mutate-pods", empty)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port, ssl_context=tls.context).start()
        await stop.wait()

    asyncio.run(main())


async def send_review(session: aiohttp.ClientSession, url: str) -> bool:
    """One AdmissionReview round trip; whether it was answered 200."""
    try:
        async with session.post(url, data=REVIEW, headers={"Content-Type": "application/json"}) as response:
            await response.read()
            return response.status == 200
    except aiohttp.ClientError:
        return False


def summary(latencies: list[float], errors: int, seconds: float) -> dict[str, Any]:
    latencies.sort()
    return {
        "requests": len(latencies),
        "rps": len(latencies) / seconds,
        "errors": errors,
        "p50": statistics.median(latencies) * 1000,
        "p99": latencies[int(len(latencies) * 0.99) - 1] * 1000,
        "max": latencies[-1] * 1000,
    }


async def load(url: str, context: ssl.SSLContext, clients: int, seconds: float) -> dict[str, Any]:
    """Closed loop: ``clients`` clients, each sending when its last answer arrived."""
    latencies: list[float] = []
    errors = 0
    deadline = time.perf_counter() + seconds
    connector = aiohttp.TCPConnector(limit=clients, ssl=context)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def client() -> None:
            nonlocal errors
            while time.perf_counter() < deadline:
                started = time.perf_counter()
                errors += not await send_review(session, url)
                latencies.append(time.perf_counter() - started)

        await asyncio.gather(*(client() for _ in range(clients)))
    return summary(latencies, errors, seconds)


async def open_loop(url: str, context: ssl.SSLContext, rate: float, seconds: float) -> dict[str, Any]:
    """``rate`` requests/s for ``seconds``, each sent at its scheduled time; latency from that time."""
    latencies: list[float] = []
    errors = 0
    connector = aiohttp.TCPConnector(limit=0, ssl=context)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one(scheduled: float) -> None:
            nonlocal errors
            errors += not await send_review(session, url)
            latencies.append(time.perf_counter() - scheduled)

        # warm the pool: the steady state does not pay the TLS handshakes the first requests would
        await asyncio.gather(*(one(time.perf_counter()) for _ in range(min(32, int(rate)))))
        latencies.clear()
        errors = 0
        start = time.perf_counter() + 0.05
        tasks = []
        for i in range(int(rate * seconds)):
            scheduled = start + i / rate
            delay = scheduled - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(scheduled)))
        await asyncio.gather(*tasks)
        elapsed = time.perf_counter() - start
    return summary(latencies, errors, elapsed)


def handler_p99(url: str, context: ssl.SSLContext) -> float:
    """The p99 upper bound (ms) of time spent in the handler, from the server's own latency histogram."""
    import urllib.request

    text = urllib.request.urlopen(url, context=context, timeout=10).read().decode()
    buckets = []
    for line in text.splitlines():
        if line.startswith("controller_runtime_webhook_latency_seconds_bucket"):
            bound = line.split('le="')[1].split('"')[0]
            buckets.append((float(bound), float(line.rsplit(" ", 1)[1])))
    total = buckets[-1][1]
    return next(bound for bound, count in buckets if count >= 0.99 * total) * 1000


def measure(
    kind: str, cert: str, key: str, context: ssl.SSLContext, clients: int, seconds: float, rate: float = 0.0
) -> dict[str, Any]:
    port = free_port()
    process = multiprocessing.get_context("spawn").Process(target=run_server, args=(kind, port, cert, key), daemon=True)
    process.start()
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.1)
        url = f"https://127.0.0.1:{port}/mutate-pods"
        figures = asyncio.run(open_loop(url, context, rate, seconds) if rate else load(url, context, clients, seconds))
        if kind == "netaware":
            figures["handler_p99"] = handler_p99(f"https://127.0.0.1:{port}/metrics", context)
        return figures
    finally:
        process.terminate()
        process.join(5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rates", default="100,500,1000", help="open loop: requests/s, comma-separated")
    parser.add_argument("--clients", type=int, default=0, help="closed loop with this many clients instead")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--repeat", type=int, default=3, help="runs per rate (min/median/max of the p99)")
    parser.add_argument("--record", default=None, help="also write the figures as JSON to this file")
    args = parser.parse_args()
    recorded: dict[str, Any] = {}
    ca = trustme.CA()
    leaf = ca.issue_cert("127.0.0.1")
    rates = [0.0] if args.clients else [float(rate) for rate in args.rates.split(",")]
    with tempfile.TemporaryDirectory() as folder:
        cert, key = f"{folder}/tls.crt", f"{folder}/tls.key"
        leaf.private_key_and_cert_chain_pem.write_to_path(cert)
        leaf.private_key_pem.write_to_path(key)
        context = ssl.create_default_context()
        ca.configure_trust(context)
        for rate in rates:
            what = f"open loop {rate:.0f} req/s" if rate else f"{args.clients} concurrent clients"
            runs: dict[str, list[dict[str, Any]]] = {"netaware": [], "floor": []}
            for _ in range(args.repeat):  # alternating, so a slow spell of the machine hits both
                for kind, figures in runs.items():
                    figures.append(measure(kind, cert, key, context, args.clients, args.seconds, rate))
            print(f"webhook, {what}, HTTPS on loopback, {args.seconds:.0f} s each, {args.repeat} run(s)")
            for kind, figures in runs.items():
                median = sorted(figures, key=lambda f: f["p99"])[len(figures) // 2]
                print(
                    f"  {kind:9s} {median['rps']:8.0f} req/s  p50 {median['p50']:7.2f} ms  "
                    f"p99 {median['p99']:7.2f} ms  max {median['max']:7.2f} ms  "
                    f"errors {sum(f['errors'] for f in figures)}"
                )
                if args.repeat > 1:
                    p99s = sorted(f["p99"] for f in figures)
                    spread = f"min {p99s[0]:.2f}  median {p99s[len(p99s) // 2]:.2f}  max {p99s[-1]:.2f} ms"
                    print(f"  {'':9s} p99 over the runs: {spread}")
            ours = sorted(runs["netaware"], key=lambda f: f["p99"])[args.repeat // 2]
            floor = sorted(runs["floor"], key=lambda f: f["p99"])[args.repeat // 2]
            print(f"  netaware time in the handler: p99 <= {ours['handler_p99']:.1f} ms (server-side histogram bucket)")
            ratios = f"req/s {ours['rps'] / floor['rps']:.2f}, p99 {ours['p99'] / floor['p99']:.2f}"
            print(f"  ratio netaware/floor (medians): {ratios}")
            recorded[f"{what}: netaware p99"] = records.figure(
                (f["p99"] for f in runs["netaware"]), "ms", budget=f"< {BUDGET_MS:g} ms"
            )
            recorded[f"{what}: empty handler p99"] = records.figure((f["p99"] for f in runs["floor"]), "ms")
            recorded[f"{what}: p99 / empty handler"] = records.figure(
                [ours["p99"] / floor["p99"]], "x", budget="<= 1.3x"
            )
            recorded[f"{what}: netaware req/s"] = records.figure((f["rps"] for f in runs["netaware"]), "req/s")
    if args.record:
        records.write(args.record, "bench_webhook", vars(args), recorded)


if __name__ == "__main__":
    main()
