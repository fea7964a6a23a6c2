"""kubectl's simplest calls answered over HTTPS in the calling process, with kubectl's output.

Each kubectl run costs about 75 ms of CPU before it sends a request (the Go runtime, client-go's type registry),
and the tests' polling made some 1,300 of them per suite on two saturated cores. :meth:`Rest.answer` serves the
forms the tests poll with and leaves everything else to kubectl:

* ``get --raw PATH`` and ``delete --raw PATH``: the body, as kubectl prints it;
* ``get RESOURCE [NAME] [-n NS | -A] [-l SELECTOR] -o json``: the object, or a ``List`` whose items carry their
  ``apiVersion`` and ``kind``, without ``managedFields``, as kubectl prints them. RESOURCE is resolved as kubectl
  resolves it (plural, singular, short name or kind, the core group first) from the API server's aggregated
  discovery; a name that resolves to several groups is kubectl's to settle.

Anything else, any answer that is not a success and any failure to connect go to kubectl, which then gives its own
answer and its own error. The output is kubectl's as parsed JSON (keys in the server's order, not sorted): every
caller reads it with ``json.loads``. A ``delete --raw`` whose answer was lost is sent again by kubectl: the suite's
are of collections, or read with ``check=False``.
"""

from __future__ import annotations

import http.client
import json
import ssl
import subprocess
import threading
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
TIMEOUT = 30.0


@dataclass(frozen=True)
class Resource:
    group_version: str  # "v1", "apps/v1"
    plural: str
    namespaced: bool
    kind: str

    def path(self, namespace: str | None, name: str | None) -> str:
        base = "/api/v1" if self.group_version == "v1" else f"/apis/{self.group_version}"
        where = f"/namespaces/{urllib.parse.quote(namespace, safe='')}" if self.namespaced and namespace else ""
        return f"{base}{where}/{self.plural}" + (f"/{urllib.parse.quote(name, safe='')}" if name else "")


@dataclass(frozen=True)
class Get:
    """A ``get`` this module answers."""

    resource: str
    name: str | None
    namespace: str | None  # None: every namespace (-A)
    selector: str | None


def parse_get(args: tuple[str, ...]) -> Get | None:
    """``get RESOURCE [NAME] [-n NS | -A] [-l SELECTOR] -o json`` (flags in any order), or None for any other form."""
    if len(args) < 4 or args[0] != "get" or args[-2:] != ("-o", "json"):
        return None
    positional: list[str] = []
    namespace: str | None = "default"
    every = False
    selector: str | None = None
    rest = list(args[1:-2])
    while rest:
        token = rest.pop(0)
        if token in ("-n", "--namespace", "-l", "--selector"):
            if not rest:
                return None
            value = rest.pop(0)
            if token in ("-n", "--namespace"):
                namespace = value
            else:
                selector = value
        elif token in ("-A", "--all-namespaces"):
            every = True
        elif token.startswith("-"):
            return None  # a flag of kubectl's own: it answers
        else:
            positional.append(token)
    if not 1 <= len(positional) <= 2 or any(c in positional[0] for c in "/.,"):
        return None
    if len(positional) == 2 and (every or selector is not None):  # kubectl refuses both: its error, not ours
        return None
    return Get(positional[0], positional[1] if len(positional) == 2 else None, None if every else namespace, selector)


def resources_of(discovery: dict[str, Any]) -> dict[str, list[Resource]]:
    """Every name kubectl accepts for a resource (plural, singular, short names, kind) -> the resources it names,
    from an aggregated discovery document (``APIGroupDiscoveryList``), preferred versions only."""
    names: dict[str, list[Resource]] = {}
    for group in discovery.get("items") or []:
        group_name = (group.get("metadata") or {}).get("name") or ""
        versions = group.get("versions") or []
        if not versions:
            continue
        version = versions[0]  # the preferred one first
        group_version = f"{group_name}/{version['version']}" if group_name else version["version"]
        for entry in version.get("resources") or []:
            kind = (entry.get("responseKind") or {}).get("kind") or ""
            found = Resource(group_version, entry["resource"], entry.get("scope") == "Namespaced", kind)
            for name in {entry["resource"], entry.get("singularResource") or "", *(entry.get("shortNames") or []),
                         kind.lower()} - {""}:  # fmt: skip
                names.setdefault(name, []).append(found)
    return names


def choose(candidates: list[Resource]) -> Resource | None:
    """kubectl's choice among the resources a name matches: the core group's, else the only one (None: ask
    kubectl)."""
    core = [resource for resource in candidates if resource.group_version == "v1"]
    if len(core) == 1:
        return core[0]
    return candidates[0] if len(candidates) == 1 else None


class Rest:
    """An API server reached with ``context`` (the admin's certificate: see the module docstring)."""

    def __init__(self, server: str, context: ssl.SSLContext) -> None:
        self.server = server
        self.context = context
        self.lock = threading.Lock()
        self.names: dict[str, list[Resource]] = {}

    def request(self, method: str, path: str, accept: str = "application/json") -> tuple[int, bytes]:
        """The status and body; raises OSError when the server cannot be reached."""
        request = urllib.request.Request(self.server + path, method=method, headers={"Accept": accept})
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT, context=self.context) as response:
                return int(response.status), bytes(response.read())
        except urllib.error.HTTPError as error:
            return int(error.code), bytes(error.read())

    def discover(self) -> None:
        found: dict[str, list[Resource]] = {}
        for path in ("/api", "/apis"):
            status, body = self.request("GET", path, AGGREGATED)
            document = json.loads(body) if status == 200 else {}
            if document.get("kind") != "APIGroupDiscoveryList":
                raise OSError(f"no aggregated discovery at {path}")
            for name, resources in resources_of(document).items():
                found.setdefault(name, []).extend(resources)
        with self.lock:
            self.names = found

    def resolve(self, name: str) -> Resource | None:
        with self.lock:
            known = self.names.get(name)
        if known is None:  # a CRD installed since: discovery once more
            self.discover()
            with self.lock:
                known = self.names.get(name)
        return choose(known) if known else None

    def answer(self, args: tuple[str, ...]) -> subprocess.CompletedProcess[str] | None:
        """kubectl's answer to ``args`` when it is a form this module serves and the server answered with a success;
        None: run kubectl."""
        try:
            if len(args) == 3 and args[0] in ("get", "delete") and args[1] == "--raw" and args[2].startswith("/"):
                status, body = self.request(args[0].upper(), args[2])
                return done(args, body.decode()) if 200 <= status < 300 else None
            get = parse_get(args)
            if get is None:
                return None
            resource = self.resolve(get.resource)
            if resource is None:
                return None
            query = f"?labelSelector={urllib.parse.quote(get.selector, safe='')}" if get.selector else ""
            status, body = self.request("GET", resource.path(get.namespace, get.name) + query)
            found = json.loads(body) if 200 <= status < 300 else None
        except (OSError, ValueError, http.client.HTTPException):  # unreachable, cut off, or not JSON: kubectl's
            return None
        if not isinstance(found, dict):
            return None
        if get.name is None:
            every = found.get("items") or []
            items = [{"apiVersion": resource.group_version, "kind": resource.kind, **item} for item in every]
            found = {"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}}
        for item in found["items"] if get.name is None else [found]:
            (item.get("metadata") or {}).pop("managedFields", None)  # kubectl hides them (--show-managed-fields)
        return done(args, json.dumps(found, indent=4) + "\n")


def done(args: tuple[str, ...], stdout: str) -> subprocess.CompletedProcess[str]:
    return subprocess.CompletedProcess(["kubectl", *args], 0, stdout, "")
