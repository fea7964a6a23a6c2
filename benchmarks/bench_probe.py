#!/usr/bin/env python3
"""What `netaware probe` costs and how well it measures (loopback; endpoints in their own process).

    python -m benchmarks.bench_probe [--peers 20 --seconds 10]

1. **Cost per peer** at the chart's defaults (10 transactions per peer every 5 s): the prober's CPU seconds
   per second and the bytes per second per peer on the loopback interface (requests and answers, TCP/IP
   headers and ACKs included), with ``--peers`` endpoints; the same rounds at 1 s to see it scale. Floor,
   same run: a bare asyncio ping-pong of the same transactions (no windows, no metrics) — CPU per
   transaction, prober / floor.
2. **Measurement error** against a known injected delay: endpoints holding each answer 1, 5, 20 and 50 ms;
   the P90 measured over 100 transactions minus the delay, and the value written to the row (upstream's
   truncated milliseconds) beside the delay.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import pathlib
import subprocess
import sys
import time

from benchmarks import records
from benchmarks.support import free_ports
from operators.engine.measurement.probe import Peer, reported_ms
from operators.probe import ProbeMetrics, ProbeOptions, Prober

ROOT = pathlib.Path(__file__).resolve().parent.parent

ENDPOINTS = """
import asyncio, sys
from operators.probe import serve_endpoint
async def main():
    servers = [await serve_endpoint("127.0.0.1", int(port), float(delay))
               for port, delay in (item.split(":") for item in sys.argv[1:])]
    print("ready", flush=True)
    await asyncio.Event().wait()
asyncio.run(main())
"""


def loopback_bytes() -> int:
    for line in pathlib.Path("/proc/net/dev").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name.strip() == "lo":
            fields = rest.split()
            return int(fields[8])  # sent (on loopback every packet is also counted as received)
    return 0


def start_endpoints(ports_delays: list[tuple[int, float]]) -> subprocess.Popen[str]:
    args = [f"{port}:{delay}" for port, delay in ports_delays]
    process = subprocess.Popen([sys.executable, "-c", ENDPOINTS, *args], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "ready"
    return process


def prober(transactions: int) -> Prober:
    options = ProbeOptions("bench", "default", "nt", "default", "", transactions=transactions, timeout=2.0)
    return Prober(options, None, ProbeMetrics())  # type: ignore[arg-type]  # rounds driven by hand, no cache


async def rounds(peers: list[Peer], seconds: float, interval: float, transactions: int) -> tuple[float, int, int]:
    """(CPU seconds, loopback bytes, transactions) of the prober's rounds over ``seconds``."""
    probe = prober(transactions)
    limit = asyncio.Semaphore(8)

    async def one(peer: Peer) -> None:
        async with limit:
            await probe.measure(peer)

    await asyncio.gather(*(one(peer) for peer in peers))  # connections opened before measuring
    cpu, wire, done = time.process_time(), loopback_bytes(), 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        started = time.monotonic()
        await asyncio.gather(*(one(peer) for peer in peers))
        done += transactions * len(peers)
        await asyncio.sleep(max(interval - (time.monotonic() - started), 0))
    return time.process_time() - cpu, loopback_bytes() - wire, done


async def floor(peers: list[Peer], transactions: int, repeat: int) -> tuple[float, int]:
    """CPU seconds and transactions of a bare ping-pong: the same round trips, nothing recorded."""
    connections = [await asyncio.open_connection(peer.address, peer.port) for peer in peers]
    cpu = time.process_time()
    for _ in range(repeat):
        for reader, writer in connections:
            for _ in range(transactions):
                writer.write(b"r")
                await writer.drain()
                await reader.readexactly(1)
    used = time.process_time() - cpu
    for _, writer in connections:
        writer.close()
    return used, repeat * transactions * len(peers)


async def accuracy(delays: list[float]) -> list[dict[str, float]]:
    ports = free_ports(len(delays))
    process = start_endpoints(list(zip(ports, delays, strict=True)))
    try:
        results = []
        for port, delay in zip(ports, delays, strict=True):
            probe = prober(100)
            peer = Peer(f"d{delay}", "z", "127.0.0.1", port)
            await probe.measure(peer)
            p90 = probe.windows[peer.node].p90() or 0.0
            results.append(
                {
                    "delayMs": delay * 1000,
                    "p90Ms": round(p90 * 1000, 3),
                    "errorMs": round((p90 - delay) * 1000, 3),
                    "rowMs": reported_ms(p90),
                }
            )
        return results
    finally:
        process.terminate()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--peers", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--record", default=None, help="also write the figures as JSON to this file")
    args = parser.parse_args()
    ports = free_ports(args.peers)
    process = start_endpoints([(port, 0.0) for port in ports])
    try:
        peers = [Peer(f"n{i}", "z", "127.0.0.1", port) for i, port in enumerate(ports)]
        cost = {}
        for interval in (5.0, 1.0):
            cpu, wire, done = await rounds(peers, args.seconds, interval, 10)
            cost[f"interval{interval:g}s"] = {
                "cpuPercent": round(100 * cpu / args.seconds, 3),
                "bytesPerSecondPerPeer": round(wire / args.seconds / args.peers, 1),
                "cpuMicrosecondsPerTransaction": round(1e6 * cpu / max(done, 1), 1),
            }
        floor_cpu, floor_done = await floor(peers, 10, 20)
    finally:
        process.terminate()
    per_transaction_floor = 1e6 * floor_cpu / floor_done
    errors = await accuracy([0.001, 0.005, 0.020, 0.050])
    default = cost["interval5s"]
    print(f"probe, {args.peers} peers on loopback, {args.seconds:g} s per setting")
    print(
        f"  defaults (10 transactions / peer / 5 s): CPU {default['cpuPercent']} % of a core, "
        f"{default['bytesPerSecondPerPeer']} B/s per peer on the wire"
    )
    fast = cost["interval1s"]
    rate = fast["bytesPerSecondPerPeer"]
    print(f"  every 1 s:                               CPU {fast['cpuPercent']} %, {rate} B/s per peer")
    ratio = default["cpuMicrosecondsPerTransaction"] / per_transaction_floor
    print(
        f"  CPU per transaction: {default['cpuMicrosecondsPerTransaction']} µs (bare ping-pong floor "
        f"{per_transaction_floor:.1f} µs): {ratio:.2f}x"
    )
    print("  injected delay   P90 measured   error     row (ms)")
    for item in errors:
        print(f"  {item['delayMs']:>8g} ms   {item['p90Ms']:>9.3f} ms   {item['errorMs']:>+7.3f}   {item['rowMs']}")
    print(
        json.dumps(
            {"cost": cost, "floorMicrosecondsPerTransaction": round(per_transaction_floor, 1), "accuracy": errors}
        )
    )
    if args.record:
        figures = {
            "defaults: bytes/s per peer": records.figure(
                [default["bytesPerSecondPerPeer"]], "B/s", budget="<= 4000 B/s"
            ),
            "defaults: CPU": records.figure([default["cpuPercent"]], "% of a core"),
            "every 1 s: bytes/s per peer": records.figure([rate], "B/s"),
            "every 1 s: CPU": records.figure([fast["cpuPercent"]], "% of a core"),
            "CPU per transaction": records.figure([default["cpuMicrosecondsPerTransaction"]], "µs"),
            "bare ping-pong floor per transaction": records.figure([per_transaction_floor], "µs"),
            **{
                f"P90 measured, {item['delayMs']:g} ms injected": records.figure([item["p90Ms"]], "ms")
                for item in errors
            },
            **{f"row value, {item['delayMs']:g} ms injected": records.figure([item["rowMs"]], "ms") for item in errors},
        }
        records.write(args.record, "bench_probe", vars(args), figures)


if __name__ == "__main__":
    asyncio.run(main())
