"""When each pod was bound, seen by a watch on the API server (the benchmarks against a real control plane).

Polling with ``kubectl get`` every 0.2 s, as the peers comparison first did, sees a binding up to ~0.35 s late
(the pause plus kubectl's own run): a quantum as long as a whole 33-pod run. A watch sees each change as the API
server sends it. The watch starts from the resourceVersion of a list made before the pods are created, so no
event is missed.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

from hack.control_plane.cluster import ControlPlane


def admin_connections(plane: ControlPlane, timeout: float) -> Callable[[], http.client.HTTPSConnection]:
    """A maker of HTTPS connections to ``plane``'s API server as its admin (one TLS context for all)."""
    context = plane.admin_context()
    url = urllib.parse.urlsplit(plane.server)
    return lambda: http.client.HTTPSConnection(url.hostname or "127.0.0.1", url.port, context=context, timeout=timeout)


class BindingWatch:
    """A thread watching the pods of ``namespace`` with ``selector``: when each was first seen bound and first
    seen without scheduling gates (monotonic seconds), and the pods as last seen."""

    def __init__(self, plane: ControlPlane, namespace: str, selector: str) -> None:
        self.bound_at: dict[str, float] = {}
        self.ungated_at: dict[str, float] = {}
        self.pods: dict[str, dict[str, Any]] = {}
        self.changed = threading.Condition()
        self._connect = admin_connections(plane, timeout=30)
        self._path = f"/api/v1/namespaces/{namespace}/pods?labelSelector={urllib.parse.quote(selector)}"
        self._watching: http.client.HTTPSConnection | None = None
        self._closed = False
        self.restarts = 0  # watches started again after their stream ended (a pod changed meanwhile: seen late)
        self._version = ""
        self._list()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _see(self, pod: dict[str, Any], now: float) -> None:
        name = pod["metadata"]["name"]
        self.pods[name] = pod
        spec = pod.get("spec") or {}
        if spec.get("nodeName"):
            self.bound_at.setdefault(name, now)
        if not spec.get("schedulingGates"):
            self.ungated_at.setdefault(name, now)

    def _list(self) -> None:
        connection = self._connect()
        try:
            connection.request("GET", self._path)
            listed = json.loads(connection.getresponse().read())
        finally:
            connection.close()
        now = time.monotonic()
        with self.changed:
            for pod in listed["items"]:
                self._see(pod, now)
            self.changed.notify_all()
        self._version = listed["metadata"]["resourceVersion"]

    def _run(self) -> None:
        """Watch from the last version seen; when the stream ends (the server's timeout, an expired version, a
        loaded API server closing it) list again and watch on: a watch that ended quietly once lost two thirds
        of a burst's bindings."""
        while not self._closed:
            with contextlib.suppress(OSError, ValueError, http.client.HTTPException):
                self._watch()
            if self._closed:
                return
            self.restarts += 1
            try:
                self._list()
            except (OSError, ValueError, http.client.HTTPException):
                time.sleep(0.5)

    def _watch(self) -> None:
        self._watching = connection = self._connect()
        try:
            connection.request("GET", f"{self._path}&watch=1&resourceVersion={self._version}&timeoutSeconds=600")
            response = connection.getresponse()
            while line := response.readline():
                event = json.loads(line)
                if event["type"] == "ERROR":  # e.g. 410: the version expired
                    return
                now = time.monotonic()
                meta = event["object"]["metadata"]
                with self.changed:
                    if event["type"] == "DELETED":
                        self.pods.pop(meta["name"], None)
                    elif event["type"] in ("ADDED", "MODIFIED"):
                        self._see(event["object"], now)
                    self.changed.notify_all()
                self._version = meta.get("resourceVersion", self._version)
        finally:
            connection.close()

    def wait(self, count: int, settle: float) -> None:
        """Until ``count`` pods are bound, or none was for ``settle`` seconds."""
        last = time.monotonic()
        with self.changed:
            while len(self.bound_at) < count:
                seen = len(self.bound_at)
                self.changed.wait(timeout=0.2)
                now = time.monotonic()
                if len(self.bound_at) > seen:
                    last = now
                elif now - last >= settle:
                    return

    def close(self) -> None:
        self._closed = True
        if self._watching is not None and self._watching.sock is not None:
            with contextlib.suppress(OSError):  # the watch's connection closed meanwhile (a restart under way)
                self._watching.sock.shutdown(socket.SHUT_RDWR)
        self._thread.join(timeout=5)
