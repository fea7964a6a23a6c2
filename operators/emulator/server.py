"""An in-process Kubernetes API server for tests and ``netaware demo``, built on kmock.

kmock's ``KubernetesEmulator`` stores objects but lacks what kopf and our controllers rely on
(reference/python-ecosystem.md §2.1). ``ApiEmulator`` keeps kmock's server, discovery and
request DSL, and replaces the object semantics with the apiserver's:

* ``metadata.uid``, ``creationTimestamp``, ``generation`` (bumped on spec changes only) and a
  cluster-wide monotonic ``resourceVersion``; 201 on create; ``generateName``;
* the status subresource kept apart: the main resource ignores ``status``, ``/status`` only
  changes ``status``;
* JSON merge patch, JSON patch (a failed ``test`` op is 422), strategic merge patch treated as
  merge patch, PUT; 409 on a stale ``metadata.resourceVersion``; no-op writes change nothing;
* finalizers and ``deletionTimestamp``; list and watch with label and field selectors; watch
  resuming from a ``resourceVersion``, 410 Gone once that version is compacted away,
  ``timeoutSeconds``;
* ``pods/eviction`` honouring PodDisruptionBudgets (429 when the budget is spent) and
  ``pods/binding``; CRDs created through the API become served resources;
* fault injection: :meth:`fail_next` (e.g. 500s or 409s), :meth:`drop_watches`, :meth:`compact`.

User reactions of the kmock DSL still take precedence, and they run before any state change.
"""

from __future__ import annotations

import asyncio
import collections
import copy
import datetime
import itertools
import json
import uuid
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp.web
import attrs
import jsonpatch
import kmock
from kmock._internal import apps, enums, rendering
from kmock._internal.k8s import KubernetesScaffold

from operators.api.crd import ALL_CRDS
from operators.api.errors import FieldError
from operators.api.selectors import EVERYTHING, Selector, from_label_selector, parse_selector
from operators.emulator.paths import parse_path

ObjectKey = tuple[str, str | None, str]  # (resource "group/version/plural", namespace, name)

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"

HISTORY_LIMIT = 10_000  # watch events kept per resource before older versions are "compacted"
# Go's strconv.ParseBool, as the API server reads ?watch= (kubernetes-asyncio sends "True").
WATCH_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
# The Kubernetes version the emulator reports: the one the real control plane of the e2e tier runs
# (hack/control-plane/kubernetes/go.mod), so that clients and charts see the same server.
SERVER_VERSION = {"major": "1", "minor": "37", "gitVersion": "v1.37.2", "platform": "linux/amd64"}


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _resource_key(resource: kmock.resource) -> str:
    return f"{resource.group}/{resource.version}/{resource.plural}"


def status_error(
    code: int, reason: str, message: str, details: Mapping[str, Any] | None = None
) -> kmock.KubernetesError:
    return kmock.KubernetesError(status=code, reason=reason, message=message, details=dict(details or {}))


def _not_found(kind: str, name: str, plural: str, group: str) -> kmock.KubernetesError:
    return status_error(
        404,
        "NotFound",
        f'{plural}{"." + group if group else ""} "{name}" not found',
        {"name": name, "kind": plural, "group": group},
    )


@dataclass
class _Injected:
    method: str | None
    plural: str | None
    subresource: str | None
    code: int
    remaining: int


@dataclass
class _Event:
    rv: int
    type: str
    obj: dict[str, Any]


@attrs.define(kw_only=True)
class ApiEmulator(kmock.KubernetesEmulator):
    """The Kubernetes API emulator (see the module docstring)."""

    _store: dict[ObjectKey, dict[str, Any]] = attrs.field(factory=dict, init=False)
    _history: dict[str, collections.deque[_Event]] = attrs.field(factory=dict, init=False)
    _compacted: dict[str, int] = attrs.field(factory=dict, init=False)
    _changed: asyncio.Condition | None = attrs.field(default=None, init=False)
    _rv: itertools.count[int] = attrs.field(factory=lambda: itertools.count(1000), init=False)
    _last_rv: int = attrs.field(default=999, init=False)
    _watch_epoch: int = attrs.field(default=0, init=False)
    _injected: list[_Injected] = attrs.field(factory=list, init=False)
    _outage: tuple[float, int, tuple[str, ...]] | None = attrs.field(default=None, init=False)
    history_limit: int = HISTORY_LIMIT
    base_url: str = attrs.field(default="", init=False)  # set by whoever serves it (tests, demo)
    # Every successful write: (monotonic time, verb, plural, namespace, name, subresource), for assertions.
    writes: list[tuple[float, str, str, str | None, str, str | None]] = attrs.field(factory=list, init=False)

    def __attrs_post_init__(self) -> None:
        KubernetesScaffold.__attrs_post_init__(self)  # discovery only; the object semantics are ours
        # Creations (POST) answer 201, everything else 200; errors carry their own status.
        (self.fallback**1)[self._is_object_post] << 201 << self._dispatch
        # Watch streams are JSON, as the API server labels them (kubectl get -w checks the content type).
        (self.fallback**1)[self._is_watch_request] << rendering.Response(
            headers={"Content-Type": "application/json"}, payload=self._dispatch
        )
        (self.fallback**1)[self._is_object_request] << self._dispatch
        self.resources.load_bundled()
        for info in ALL_CRDS:
            self.resources[f"{info.group}/{info.version}/{info.plural}"] = kmock.ResourceInfo(
                kind=info.kind,
                singular=info.singular,
                namespaced=info.namespaced,
                verbs={"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"},
                shortnames=set(info.short_names),
                subresources={"status"},
            )
        # The namespaces every cluster starts with.
        self._store_objects(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}, "status": {"phase": "Active"}}
            for name in ("default", "kube-system", "kube-public", "kube-node-lease")
        )

    # -- request plumbing --------------------------------------------------------------------------

    async def __call__(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        # kmock's path parser cannot read /api/v1/namespaces[/name]; parse the request ourselves.
        await raw_request.read()
        raw_response: aiohttp.web.StreamResponse | None = None
        try:
            request = await self._parse_request(raw_request)
            self._requests.append(request)
            try:
                return await self._handle(request)
            except rendering.StreamingError as error:
                raw_response = error.args[0]
                raise error.__cause__ or error from None
        except Exception as error:
            if self._errors and not isinstance(error, kmock.KubernetesError):
                self._errors[-1].append(error)
            if raw_response is None or not raw_response.prepared:
                return await self._render_error(error)
            await self._stream_error(error, raw_response)
            await raw_response.write_eof()
            return raw_response

    async def _render_error(self, exc: Exception) -> aiohttp.web.StreamResponse:
        # A Status as the API server writes it: no Python traceback in ``details`` (kmock adds one).
        status, reason, message, details = 500, "InternalError", f"internal error: {exc!r}", None
        if isinstance(exc, kmock.KubernetesError):
            status, reason, message = exc.status or 500, exc.reason or "InternalError", exc.message or repr(exc)
            details = exc.details or None
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Status",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason,
            "code": status,
        }
        if details:
            body["details"] = details
        return aiohttp.web.json_response(body, status=status)

    async def _serve_version(self, request: rendering.Request) -> rendering.Payload:
        # kmock writes groupVersion "/v1" for the core group; the API server writes "v1".
        answer: dict[str, Any] = dict(await super()._serve_version(request))  # type: ignore[arg-type]
        answer["groupVersion"] = str(answer["groupVersion"]).lstrip("/")
        return answer

    async def _serve_server_version(self, request: rendering.Request) -> rendering.Payload:
        return dict(SERVER_VERSION)

    async def _parse_request(self, raw: aiohttp.web.BaseRequest) -> rendering.Request:
        body = await raw.read()
        text = body.decode("utf-8", errors="replace")
        try:
            data = json.loads(text) if text else None
        except ValueError:
            data = None
        parsed = parse_path(raw.path)
        resource = (
            None if parsed is None else kmock.resource(group=parsed.group, version=parsed.version, plural=parsed.plural)
        )
        method = enums.method(raw.method)
        action: enums.action | None = None
        query = dict(raw.query)
        if parsed is not None and parsed.plural is not None:
            if method == enums.method.GET and query.get("watch") in WATCH_TRUE:
                action = enums.action.WATCH
            elif parsed.name is None:
                action = {enums.method.GET: enums.action.LIST, enums.method.POST: enums.action.CREATE}.get(method)
            else:
                action = {
                    enums.method.GET: enums.action.FETCH,
                    enums.method.PATCH: enums.action.UPDATE,
                    enums.method.DELETE: enums.action.DELETE,
                }.get(method)
        return rendering.Request(
            id=len(self._requests),
            raw_request=raw,
            url=raw.url,
            method=raw.method,
            params=query,
            headers=dict(raw.headers),
            cookies=dict(raw.cookies),
            data=data,
            body=body,
            text=text,
            action=action,
            resource=resource,
            namespace=parsed.namespace if parsed else None,
            name=parsed.name if parsed else None,
            subresource=parsed.subresource if parsed else None,
        )

    async def _handle(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        # Skip kmock's own state-changing interceptor: state changes happen in _dispatch only,
        # so that user reactions (fault injection through the DSL) leave the state untouched.
        return await apps.RawHandler._handle(self, request)

    @staticmethod
    def _is_object_request(request: rendering.Request) -> bool:
        return request.resource is not None and request.resource.plural is not None

    @staticmethod
    def _is_watch_request(request: rendering.Request) -> bool:
        return request.action == enums.action.WATCH

    @classmethod
    def _is_object_post(cls, request: rendering.Request) -> bool:
        return cls._is_object_request(request) and request.method == enums.method.POST

    def _info(self, resource: kmock.resource) -> kmock.ResourceInfo:
        for known in self.resources:
            if known == resource:
                return self.resources[known]
        raise status_error(
            404,
            "NotFound",
            f"the server could not find the requested resource "
            f"({resource.group}/{resource.version}, {resource.plural})",
        )

    async def _dispatch(self, request: rendering.Request) -> Any:
        assert request.resource is not None
        self._maybe_fail(request)
        info = self._info(request.resource)
        if self._changed is None:
            self._changed = asyncio.Condition()
        method = str(request.method.value if request.method else "").upper()
        sub = request.subresource
        if request.action == enums.action.WATCH:
            return self._watch(request, info)
        if method == "GET" and request.name is None:
            return self._list(request, info)
        if method == "GET":
            return self._get(request, info)
        if method == "POST" and request.name is None:
            return await self._create(request, info)
        if method == "POST" and sub == "eviction":
            return await self._evict(request, info)
        if method == "POST" and sub == "binding":
            return await self._bind(request, info)
        if method == "POST" and request.resource.plural == "bindings":
            return await self._bind(request, info)
        if method in ("PATCH", "PUT") and request.name is not None and sub in (None, "status"):
            return await self._update(request, info, replace=method == "PUT")
        if method == "DELETE" and request.name is not None and sub is None:
            return await self._delete(request, info)
        raise status_error(405, "MethodNotAllowed", f"{method} is not supported on this path")

    # -- fault injection -----------------------------------------------------------------------------

    def fail_next(
        self,
        method: str | None = None,
        plural: str | None = None,
        *,
        code: int = 500,
        times: int = 1,
        subresource: str | None = None,
    ) -> None:
        """Answer the next ``times`` matching requests with ``code`` (before any state change)."""
        self._injected.append(_Injected(method.upper() if method else None, plural, subresource, code, times))

    async def outage(self, seconds: float, code: int = 503, spare: tuple[str, ...] = ()) -> None:
        """Answer every request ``code`` for ``seconds`` (resources in ``spare``, e.g. ``leases``, still work);
        open watches end at once, as when the API server goes away."""
        self._outage = (asyncio.get_running_loop().time() + seconds, code, spare)
        await self.drop_watches()

    def requests_of(self, action: str, plural: str) -> int:
        """How many requests of an action (``list``, ``watch``, ``fetch``, ``create``...) a resource got."""
        return sum(
            1
            for request in self._requests
            if request.action is not None
            and request.action.value == action.upper()
            and request.resource is not None
            and request.resource.plural == plural
        )

    def _maybe_fail(self, request: rendering.Request) -> None:
        if self._outage is not None:
            until, code, spare = self._outage
            plural = request.resource.plural if request.resource else None
            if asyncio.get_running_loop().time() < until and plural not in spare:
                raise status_error(code, "ServiceUnavailable", "injected outage")
        method = str(request.method.value if request.method else "").upper()
        for injected in self._injected:
            if injected.remaining <= 0:
                continue
            if injected.method not in (None, method):
                continue
            if injected.plural not in (None, request.resource.plural if request.resource else None):
                continue
            if injected.subresource not in (None, request.subresource):
                continue
            injected.remaining -= 1
            reasons = {
                409: "Conflict",
                410: "Expired",
                429: "TooManyRequests",
                500: "InternalError",
                503: "ServiceUnavailable",
                504: "Timeout",
            }
            raise status_error(
                injected.code, reasons.get(injected.code, "InjectedFault"), f"injected fault: {injected.code}"
            )

    async def drop_watches(self) -> None:
        """End every open watch stream now, as a load balancer or an apiserver restart would."""
        self._watch_epoch += 1
        await self._notify()

    def compact(self) -> None:
        """Forget the event history: resuming a watch from any older version now gets 410 Gone."""
        for key, events in self._history.items():
            events.clear()
            self._compacted[key] = self._last_rv

    # -- direct access (seeding and assertions, no HTTP) -------------------------------------------

    def get_object(self, resource: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        found = self._store.get((self._canonical(resource), namespace, name))
        return copy.deepcopy(found) if found is not None else None

    def list_objects(self, resource: str, namespace: str | None = None) -> list[dict[str, Any]]:
        canonical = self._canonical(resource)
        return [
            copy.deepcopy(obj)
            for (res, ns, _), obj in sorted(self._store.items(), key=_store_order)
            if res == canonical and (namespace is None or ns == namespace)
        ]

    async def seed(self, objects: Iterable[Mapping[str, Any]]) -> None:
        """Store objects as they are (status included), as if the cluster already had them."""
        self._store_objects(objects)
        await self._notify()

    def _store_objects(self, objects: Iterable[Mapping[str, Any]]) -> None:
        for raw in objects:
            obj = copy.deepcopy(dict(raw))
            resource = self._resource_of(obj)
            info = self._info(resource)
            meta = obj.setdefault("metadata", {})
            namespace = (meta.get("namespace") or "default") if info.namespaced else None
            if info.namespaced:
                meta["namespace"] = namespace
            key = (_resource_key(resource), namespace, meta["name"])
            self._stamp_new(obj)
            self._store[key] = obj
            self._record(resource, "ADDED", obj)
            if resource.plural == "customresourcedefinitions":
                self._register_crd(obj)

    def _resource_of(self, obj: Mapping[str, Any]) -> kmock.resource:
        api_version, kind = obj.get("apiVersion", ""), obj.get("kind", "")
        group, _, version = api_version.rpartition("/")
        for known in self.resources:
            info = self.resources[known]
            same_version = known.group == group and known.version == version
            if same_version and info.kind == kind and "/" not in (known.plural or ""):
                return known
        raise ValueError(f"unknown kind {api_version} {kind}")

    def _canonical(self, resource: str) -> str:
        parts = resource.split("/")
        return "/".join(parts) if len(parts) == 3 else f"/{parts[0]}/{parts[1]}"

    # -- reading ---------------------------------------------------------------------------------------

    def _matching(self, request: rendering.Request, info: kmock.ResourceInfo) -> list[dict[str, Any]]:
        assert request.resource is not None
        key = _resource_key(request.resource)
        labels = self._label_selector(request)
        fields = self._field_selector(request)
        result = []
        for (res, namespace, _), obj in sorted(self._store.items(), key=_store_order):
            if res != key or (request.namespace is not None and namespace != request.namespace):
                continue
            if _selected(obj, labels, fields):
                result.append(obj)
        return result

    def _list(self, request: rendering.Request, info: kmock.ResourceInfo) -> dict[str, Any]:
        assert request.resource is not None
        items = [copy.deepcopy(obj) for obj in self._matching(request, info)]
        return {
            "apiVersion": _api_version(request.resource),
            "kind": f"{info.kind}List",
            "metadata": {"resourceVersion": str(self._last_rv)},
            "items": items,
        }

    def _get(self, request: rendering.Request, info: kmock.ResourceInfo) -> dict[str, Any]:
        return copy.deepcopy(self._existing(request, info))

    def _existing(self, request: rendering.Request, info: kmock.ResourceInfo) -> dict[str, Any]:
        assert request.resource is not None and request.name is not None
        key = (_resource_key(request.resource), request.namespace if info.namespaced else None, request.name)
        obj = self._store.get(key)
        if obj is None:
            raise _not_found(info.kind or "", request.name, request.resource.plural or "", request.resource.group or "")
        return obj

    def _label_selector(self, request: rendering.Request) -> Selector:
        text = request.params.get("labelSelector")
        if not text:
            return EVERYTHING
        try:
            return parse_selector(text)
        except FieldError as error:
            raise status_error(400, "BadRequest", str(error)) from None

    def _field_selector(self, request: rendering.Request) -> list[tuple[str, bool, str]]:
        text = request.params.get("fieldSelector") or ""
        result = []
        for term in filter(None, (part.strip() for part in text.split(","))):
            if "!=" in term:
                field_path, value = term.split("!=", 1)
                result.append((field_path.strip(), False, value.strip()))
            elif "=" in term:
                field_path, value = term.replace("==", "=").split("=", 1)
                result.append((field_path.strip(), True, value.strip()))
            else:
                raise status_error(400, "BadRequest", f"invalid field selector: {term!r}")
        return result

    async def _watch(self, request: rendering.Request, info: kmock.ResourceInfo) -> AsyncIterator[Any]:
        assert request.resource is not None and self._changed is not None
        key = _resource_key(request.resource)
        labels = self._label_selector(request)
        fields = self._field_selector(request)
        since_text = request.params.get("resourceVersion") or ""
        timeout = float(request.params.get("timeoutSeconds") or 0) or None
        epoch = self._watch_epoch
        return self._stream(request, key, labels, fields, since_text, timeout, epoch)

    async def _stream(
        self,
        request: rendering.Request,
        key: str,
        labels: Selector,
        fields: list[tuple[str, bool, str]],
        since_text: str,
        limit_seconds: float | None,
        epoch: int,
    ) -> AsyncIterator[Any]:
        assert self._changed is not None
        yield b""  # send the headers now, as the apiserver does
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limit_seconds if limit_seconds else None
        if since_text in ("", "0"):
            last = self._last_rv
            for obj in self._matching(request, self._info(request.resource)):  # type: ignore[arg-type]
                yield {"type": "ADDED", "object": copy.deepcopy(obj)}
        else:
            try:
                last = int(since_text)
            except ValueError:
                yield _gone_event(f"invalid resourceVersion {since_text!r}", 400)
                return
            if last < self._compacted.get(key, 0):
                yield _gone_event(f"too old resource version: {last} ({self._compacted.get(key, 0)})", 410)
                return
        while True:
            for event in list(self._history.get(key, ())):
                if event.rv <= last:
                    continue
                last = event.rv
                namespace = event.obj.get("metadata", {}).get("namespace")
                if request.namespace is not None and namespace != request.namespace:
                    continue
                if _selected(event.obj, labels, fields):
                    yield {"type": event.type, "object": copy.deepcopy(event.obj)}
            if self._watch_epoch != epoch:
                return
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                return
            # Wake up at least every second to notice a client that went away: aiohttp does not cancel the
            # handler on disconnect, and a stream parked on the condition would hold the server's shutdown.
            raw = request._raw_request
            transport = raw.transport if raw is not None else None
            if transport is None or transport.is_closing():
                return
            async with self._changed:
                try:
                    await asyncio.wait_for(self._changed.wait(), timeout=min(remaining or 1.0, 1.0))
                except TimeoutError:
                    if remaining is not None and remaining <= 1.0:
                        return

    # -- writing -----------------------------------------------------------------------------------------

    def _next_rv(self) -> str:
        self._last_rv = next(self._rv)
        return str(self._last_rv)

    def _stamp_new(self, obj: dict[str, Any]) -> None:
        meta = obj.setdefault("metadata", {})
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", _now())
        meta.setdefault("generation", 1)
        meta["resourceVersion"] = self._next_rv()

    def _record(
        self, resource: kmock.resource, event_type: str, obj: dict[str, Any], subresource: str | None = None
    ) -> None:
        meta = obj.get("metadata", {})
        self.writes.append(
            (
                asyncio.get_running_loop().time() if _has_loop() else 0.0,
                event_type,
                resource.plural or "",
                meta.get("namespace"),
                meta.get("name", ""),
                subresource,
            )
        )
        key = _resource_key(resource)
        events = self._history.setdefault(key, collections.deque())
        events.append(_Event(int(obj["metadata"]["resourceVersion"]), event_type, copy.deepcopy(obj)))
        while len(events) > self.history_limit:
            dropped = events.popleft()
            self._compacted[key] = dropped.rv

    async def _notify(self) -> None:
        if self._changed is None:
            self._changed = asyncio.Condition()
        async with self._changed:
            self._changed.notify_all()

    @staticmethod
    def _dry_run(request: rendering.Request) -> bool:
        return request.params.get("dryRun") == "All"

    async def _create(self, request: rendering.Request, info: kmock.ResourceInfo) -> dict[str, Any]:
        assert request.resource is not None
        obj = request.data
        if not isinstance(obj, dict):
            raise status_error(400, "BadRequest", "the request body must be a JSON object")
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        if not meta.get("name"):
            if meta.get("generateName"):
                meta["name"] = f"{meta['generateName']}{uuid.uuid4().hex[:5]}"
            else:
                raise status_error(
                    422,
                    "Invalid",
                    f"{info.kind} is invalid: metadata.name: Required value",
                    {"kind": info.kind, "causes": [{"field": "metadata.name", "reason": "FieldValueRequired"}]},
                )
        if info.namespaced:
            namespace = request.namespace or meta.get("namespace") or "default"
            if meta.get("namespace") not in (None, namespace):
                raise status_error(
                    400, "BadRequest", "the namespace of the object does not match the namespace of the request"
                )
            meta["namespace"] = namespace
        else:
            namespace = None
            meta.pop("namespace", None)
        obj.setdefault("apiVersion", _api_version(request.resource))
        obj.setdefault("kind", info.kind)
        for volatile in ("uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp"):
            meta.pop(volatile, None)
        if "status" in info.subresources and info.kind != "Node":
            obj.pop("status", None)  # the status subresource is written through /status only (a Node's
            # status is kept on create, as the API server does for a kubelet's registration)
        if namespace is not None and request.resource.plural != "namespaces" and not self._namespace_exists(namespace):
            raise status_error(
                404, "NotFound", f'namespaces "{namespace}" not found', {"name": namespace, "kind": "namespaces"}
            )
        key = (_resource_key(request.resource), namespace, meta["name"])
        if key in self._store:
            raise status_error(
                409,
                "AlreadyExists",
                f'{request.resource.plural} "{meta["name"]}" already exists',
                {"name": meta["name"], "kind": request.resource.plural},
            )
        _check_size(obj)
        if self._dry_run(request):
            return obj
        self._stamp_new(obj)
        self._store[key] = obj
        self._record(request.resource, "ADDED", obj)
        if request.resource.plural == "customresourcedefinitions":
            self._register_crd(obj)
        await self._notify()
        return copy.deepcopy(obj)

    def _namespace_exists(self, namespace: str) -> bool:
        return ("/v1/namespaces", None, namespace) in self._store

    def _register_crd(self, crd: Mapping[str, Any]) -> None:
        spec = crd.get("spec") or {}
        names = spec.get("names") or {}
        for version in spec.get("versions") or []:
            self.resources[f"{spec.get('group')}/{version.get('name')}/{names.get('plural')}"] = kmock.ResourceInfo(
                kind=names.get("kind"),
                singular=names.get("singular"),
                namespaced=spec.get("scope") == "Namespaced",
                verbs={"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"},
                shortnames=set(names.get("shortNames") or []),
                subresources=set((version.get("subresources") or {}).keys()),
            )

    async def _update(self, request: rendering.Request, info: kmock.ResourceInfo, replace: bool) -> dict[str, Any]:
        assert request.resource is not None
        current = self._existing(request, info)
        body = request.data
        if replace:
            if not isinstance(body, dict):
                raise status_error(400, "BadRequest", "the request body must be a JSON object")
            patched = copy.deepcopy(body)
        else:
            patched = self._apply_patch(current, body, request.headers.get("Content-Type", MERGE_PATCH))
        sent_rv = (body.get("metadata") or {}).get("resourceVersion") if isinstance(body, dict) else None
        if sent_rv and sent_rv != current["metadata"]["resourceVersion"]:
            raise status_error(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {request.resource.plural} "{request.name}": the object has been '
                "modified; please apply your changes to the latest version and try again",
                {"name": request.name, "kind": request.resource.plural},
            )
        result = self._merge_allowed(current, patched, info, status_only=request.subresource == "status")
        if result == current:
            return copy.deepcopy(current)
        _check_size(result)
        if self._dry_run(request):
            return result
        result["metadata"]["resourceVersion"] = self._next_rv()
        key = (_resource_key(request.resource), request.namespace if info.namespaced else None, request.name or "")
        meta = result["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            del self._store[key]
            self._record(request.resource, "DELETED", result)
        else:
            self._store[key] = result
            self._record(request.resource, "MODIFIED", result, request.subresource)
        await self._notify()
        return copy.deepcopy(result)

    def _apply_patch(self, current: dict[str, Any], body: Any, content_type: str) -> dict[str, Any]:
        kind = content_type.split(";", maxsplit=1)[0].strip()
        if kind == APPLY_PATCH:
            raise status_error(415, "UnsupportedMediaType", "server-side apply is not supported by the emulator")
        if kind == JSON_PATCH:
            if not isinstance(body, list):
                raise status_error(400, "BadRequest", "a JSON patch must be a list of operations")
            try:
                result: dict[str, Any] = jsonpatch.apply_patch(current, body)
            except jsonpatch.JsonPatchTestFailed as error:
                raise status_error(422, "Invalid", f"the JSON patch test failed: {error}") from None
            except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as error:
                raise status_error(422, "Invalid", f"the JSON patch could not be applied: {error}") from None
            return result
        if kind not in (MERGE_PATCH, STRATEGIC_PATCH, "application/json"):
            raise status_error(415, "UnsupportedMediaType", f"the patch type {kind!r} is not supported")
        if not isinstance(body, dict):
            raise status_error(400, "BadRequest", "a merge patch must be a JSON object")
        merged: dict[str, Any] = _merge_patch(current, body)
        return merged

    def _merge_allowed(
        self, current: dict[str, Any], patched: dict[str, Any], info: kmock.ResourceInfo, status_only: bool
    ) -> dict[str, Any]:
        """Apply only what the endpoint may change, keep what the server owns."""
        has_status = "status" in info.subresources
        if status_only:
            result = copy.deepcopy(current)
            if "status" in patched:
                result["status"] = copy.deepcopy(patched["status"])
            else:
                result.pop("status", None)
            return result
        result = copy.deepcopy(patched)
        if has_status:
            if "status" in current:
                result["status"] = copy.deepcopy(current["status"])
            else:
                result.pop("status", None)
        meta = result.setdefault("metadata", {})
        old_meta = current["metadata"]
        for owned in ("uid", "creationTimestamp", "name", "namespace", "generation", "resourceVersion"):
            if owned in old_meta:
                meta[owned] = old_meta[owned]
            else:
                meta.pop(owned, None)
        if old_meta.get("deletionTimestamp"):
            meta["deletionTimestamp"] = old_meta["deletionTimestamp"]
        else:
            meta.pop("deletionTimestamp", None)
        result["apiVersion"] = current.get("apiVersion")
        result["kind"] = current.get("kind")
        if _spec_of(result) != _spec_of(current):
            meta["generation"] = int(old_meta.get("generation", 1)) + 1
        return result

    async def _delete(self, request: rendering.Request, info: kmock.ResourceInfo) -> dict[str, Any]:
        assert request.resource is not None
        current = self._existing(request, info)
        preconditions = (request.data or {}).get("preconditions") if isinstance(request.data, dict) else None
        if preconditions:
            for field_name in ("uid", "resourceVersion"):
                wanted = preconditions.get(field_name)
                if wanted and wanted != current["metadata"].get(field_name):
                    raise status_error(
                        409,
                        "Conflict",
                        f"Precondition failed: {field_name} in precondition: {wanted}, "
                        f"in object meta: {current['metadata'].get(field_name)}",
                    )
        if self._dry_run(request):
            return copy.deepcopy(current)
        return await self._remove(
            request.resource,
            (_resource_key(request.resource), request.namespace if info.namespaced else None, request.name or ""),
        )

    async def _remove(self, resource: kmock.resource, key: ObjectKey) -> dict[str, Any]:
        current = self._store[key]
        meta = current["metadata"]
        if meta.get("finalizers"):
            if not meta.get("deletionTimestamp"):
                updated = copy.deepcopy(current)
                updated["metadata"]["deletionTimestamp"] = _now()
                updated["metadata"]["deletionGracePeriodSeconds"] = 0
                updated["metadata"]["resourceVersion"] = self._next_rv()
                self._store[key] = updated
                self._record(resource, "MODIFIED", updated)
                await self._notify()
            return copy.deepcopy(self._store[key])
        del self._store[key]
        gone = copy.deepcopy(current)
        gone["metadata"]["resourceVersion"] = self._next_rv()
        self._record(resource, "DELETED", gone)
        await self._notify()
        return gone

    # -- pods/eviction and pods/binding -------------------------------------------------------------

    async def _evict(self, request: rendering.Request, info: kmock.ResourceInfo) -> dict[str, Any]:
        assert request.resource is not None
        if request.resource.plural != "pods":
            raise status_error(404, "NotFound", "eviction is a subresource of pods only")
        pod = self._existing(request, info)
        phase = (pod.get("status") or {}).get("phase", "Pending")
        if phase == "Running" and not pod["metadata"].get("deletionTimestamp"):
            budgets = self._budgets_for(pod)
            if len(budgets) > 1:
                raise status_error(
                    500,
                    "InternalError",
                    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
                )
            for budget in budgets:
                healthy, desired = self._budget_health(budget)
                if healthy - 1 < desired:
                    name = budget["metadata"]["name"]
                    raise status_error(
                        429,
                        "TooManyRequests",
                        "Cannot evict pod as it would violate the pod's disruption budget.",
                        {
                            "causes": [
                                {
                                    "reason": "DisruptionBudget",
                                    "message": f"The disruption budget {name} needs {desired} healthy pods "
                                    f"and has {healthy} currently",
                                }
                            ]
                        },
                    )
        if not self._dry_run(request):
            key = (_resource_key(request.resource), request.namespace, request.name or "")
            await self._remove(request.resource, key)
        return {"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Success", "code": 201}

    def _budgets_for(self, pod: Mapping[str, Any]) -> list[dict[str, Any]]:
        namespace = pod["metadata"].get("namespace")
        labels = pod["metadata"].get("labels") or {}
        budgets = []
        for (res, ns, _), budget in self._store.items():
            if res != "policy/v1/poddisruptionbudgets" or ns != namespace:
                continue
            # policy/v1: an empty selector selects every pod of the namespace, a missing one none.
            selector = from_label_selector((budget.get("spec") or {}).get("selector"))
            if selector.matches(labels):
                budgets.append(budget)
        return budgets

    def _budget_health(self, budget: Mapping[str, Any]) -> tuple[int, int]:
        """(healthy pods, pods that must stay healthy), as the disruption controller computes them."""
        spec = budget.get("spec") or {}
        selector = from_label_selector(spec.get("selector"))
        namespace = budget["metadata"].get("namespace")
        members = [
            pod
            for (res, ns, _), pod in self._store.items()
            if res == "/v1/pods" and ns == namespace and selector.matches(pod["metadata"].get("labels") or {})
        ]
        healthy = sum(
            1
            for pod in members
            if (pod.get("status") or {}).get("phase") == "Running" and not pod["metadata"].get("deletionTimestamp")
        )
        # The disruption controller takes the expected count from the owning controller's scale;
        # the emulator has no controllers, so a seeded status.expectedPods stands in for it.
        expected = int((budget.get("status") or {}).get("expectedPods") or len(members))
        if spec.get("minAvailable") is not None:
            desired = _scaled(spec["minAvailable"], expected, round_up=True)
        elif spec.get("maxUnavailable") is not None:
            desired = max(0, expected - _scaled(spec["maxUnavailable"], expected, round_up=True))
        else:
            desired = expected
        return healthy, desired

    async def _bind(self, request: rendering.Request, info: kmock.ResourceInfo) -> dict[str, Any]:
        assert request.resource is not None
        body = request.data if isinstance(request.data, dict) else {}
        name = request.name or (body.get("metadata") or {}).get("name")
        target = (body.get("target") or {}).get("name")
        if not name or not target:
            raise status_error(400, "BadRequest", "a Binding needs metadata.name and target.name")
        key = ("/v1/pods", request.namespace, name)
        pod = self._store.get(key)
        if pod is None:
            raise _not_found("Pod", name, "pods", "")
        if (pod.get("spec") or {}).get("nodeName"):
            raise status_error(409, "Conflict", f'pod {name} is already assigned to node "{pod["spec"]["nodeName"]}"')
        updated = copy.deepcopy(pod)
        updated.setdefault("spec", {})["nodeName"] = target
        updated["metadata"]["resourceVersion"] = self._next_rv()
        self._store[key] = updated
        self._record(kmock.resource(group="", version="v1", plural="pods"), "MODIFIED", updated)
        await self._notify()
        return {"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Success", "code": 201}


MAX_OBJECT_BYTES = 1_572_864  # etcd's default --max-request-bytes (1.5 MiB)


def _check_size(obj: Mapping[str, Any]) -> None:
    """etcd refuses an object above 1.5 MiB, and the API server answers 413."""
    size = len(json.dumps(obj, separators=(",", ":")))
    if size > MAX_OBJECT_BYTES:
        raise status_error(413, "RequestEntityTooLarge", f"etcdserver: request is too large ({size} bytes)")


def _has_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _store_order(item: tuple[ObjectKey, Any]) -> tuple[str, str, str]:
    (resource, namespace, name), _ = item
    return resource, namespace or "", name


def _api_version(resource: kmock.resource) -> str:
    return f"{resource.group}/{resource.version}" if resource.group else str(resource.version)


def _spec_of(obj: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in obj.items() if key not in ("metadata", "status")}


def _merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge_patch(result.get(key), value)
    return result


def _field_value(obj: Mapping[str, Any], path: str) -> str:
    node: Any = obj
    for part in path.split("."):
        node = node.get(part) if isinstance(node, Mapping) else None
    return "" if node is None else str(node)


def _selected(obj: Mapping[str, Any], labels: Selector, fields: list[tuple[str, bool, str]]) -> bool:
    if not labels.matches((obj.get("metadata") or {}).get("labels") or {}):
        return False
    return all((_field_value(obj, path) == value) == equal for path, equal, value in fields)


def _scaled(value: int | str, total: int, round_up: bool) -> int:
    if isinstance(value, int):
        return value
    text = str(value)
    if text.endswith("%"):
        percent = int(text[:-1])
        scaled = total * percent
        return -(-scaled // 100) if round_up else scaled // 100
    return int(text)


def _gone_event(message: str, code: int) -> dict[str, Any]:
    return {
        "type": "ERROR",
        "object": {
            "apiVersion": "v1",
            "kind": "Status",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": "Expired" if code == 410 else "BadRequest",
            "code": code,
        },
    }
