"""A TCP sender and receiver for the real node tier's pods (mounted from a ConfigMap, run by the image's Python).

python3 tcp_traffic.py receive PORT              # one connection; prints marks as it goes, then [[s, bytes], ...]
python3 tcp_traffic.py send HOST PORT SECONDS    # sends as fast as the socket takes it
"""

from __future__ import annotations

import json
import socket
import sys
import time


def receive(port: int) -> None:
    """Prints ``accepted``, then ``mark SECONDS BYTES`` every :data:`MARK_SECONDS` (so the rate can be read while
    the stream lasts, whatever delays its end), then, once the sender closes, every mark as one JSON list."""
    server = socket.create_server(("0.0.0.0", port))
    connection, peer = server.accept()
    print(f"accepted {peer[0]}", flush=True)
    start = time.monotonic()
    marks: list[tuple[float, int]] = []
    total = 0
    printed = 0.0
    while data := connection.recv(1 << 16):
        total += len(data)
        now = time.monotonic() - start
        marks.append((now, total))
        if now - printed >= MARK_SECONDS:
            print(f"mark {now:.3f} {total}", flush=True)
            printed = now
    print(json.dumps(marks[:: max(1, len(marks) // 500)] + marks[-1:]), flush=True)
    time.sleep(3600)  # stay Running: the log is read while the pod lives


MARK_SECONDS = 0.5


def send(host: str, port: int, seconds: float) -> None:
    connection = connect(host, port, within=90.0)
    chunk = b"x" * (1 << 16)
    end = time.monotonic() + seconds
    sent = 0
    while time.monotonic() < end:
        connection.sendall(chunk)
        sent += len(chunk)
    print(f"sent {sent} bytes in {seconds:g} s", flush=True)
    connection.close()


def connect(host: str, port: int, within: float) -> socket.socket:
    """The receiver's pod is Running before its Python listens (seconds on a loaded machine): retried until it does."""
    deadline = time.monotonic() + within
    while True:
        try:
            return socket.create_connection((host, port), timeout=10)
        except OSError as error:
            if time.monotonic() > deadline:
                raise
            print(f"connecting to {host}:{port}: {error}; again in 1 s", file=sys.stderr, flush=True)
            time.sleep(1.0)


if __name__ == "__main__":
    if sys.argv[1] == "receive":
        receive(int(sys.argv[2]))
    else:
        send(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
