"""An in-process Kubernetes API server for tests and ``netaware demo``, built on kmock.

kmock's ``KubernetesEmulator`` stores objects but lacks what kopf and our controllers rely on
(docs/contributing/emulator.md). ``ApiEmulator`` keeps kmock's server, discovery and
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
import base64
import copy
import json
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any

import aiohttp.web
import attrs
import kmock
import orjson
from kmock._internal import dsl, enums, rendering
from kmock._internal.k8s import KubernetesScaffold

from operators.api.crd import ALL_CRDS
from operators.api.selectors import EVERYTHING
from operators.emulator import subresources, watch, writes
from operators.emulator.errors import render_error, status_error
from operators.emulator.faults import Faults, Injected
from operators.emulator.paths import parse_request
from operators.emulator.store import (
    HISTORY_LIMIT,
    ObjectStore,
    Write,
    clone,
    field_selector,
    label_selector,
    resource_key,
)

# The Kubernetes version the emulator reports: the one the real control plane of the e2e tier runs
# (hack/control-plane/components/go.mod), so that clients and charts see the same server.
SERVER_VERSION = {"major": "1", "minor": "37", "gitVersion": "v1.37.2", "platform": "linux/amd64"}
ALL_VERBS = {"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
__all__ = ["ApiEmulator"]


@attrs.define(kw_only=True)
class ApiEmulator(kmock.KubernetesEmulator):
    """The Kubernetes API emulator (see the module docstring): HTTP and dispatch here; the object semantics in
    ``store``, ``watch``, ``writes``, ``patching``, ``subresources``; fault injection in ``faults``."""

    history_limit: int = HISTORY_LIMIT
    store: ObjectStore = attrs.field(factory=ObjectStore, init=False)
    faults: Faults = attrs.field(factory=Faults, init=False)
    base_url: str = attrs.field(default="", init=False)  # set by whoever serves it (tests, demo)
    _arrived_in: dict[int, int] = attrs.field(factory=dict, init=False)  # request id -> the watch epoch it came in

    def __attrs_post_init__(self) -> None:
        KubernetesScaffold.__attrs_post_init__(self)  # discovery only; the object semantics are ours
        self.store.history_limit = self.history_limit
        # Creations (POST) answer 201, everything else 200; errors carry their own status.
        (self.fallback**1)[self._is_object_post] << 201 << self._dispatch
        # Watch streams are JSON, as the API server labels them (kubectl get -w checks the content type).
        (self.fallback**1)[self._is_watch_request] << rendering.Response(
            headers={"Content-Type": "application/json"}, payload=self._dispatch
        )
        # Lists go out encoded by orjson (a page of 500 pods through the stdlib encoder and a deep copy took
        # 0.7 s; a list of 100,000 pods a minute).
        (self.fallback**1)[self._is_list_request] << rendering.Response(
            headers={"Content-Type": "application/json"}, payload=self._dispatch_encoded
        )
        (self.fallback**1)[self._is_object_request] << self._dispatch
        self.resources.load_bundled()
        for info in ALL_CRDS:
            self.resources[f"{info.group}/{info.version}/{info.plural}"] = kmock.ResourceInfo(
                kind=info.kind,
                singular=info.singular,
                namespaced=info.namespaced,
                verbs=set(ALL_VERBS),
                shortnames=set(info.short_names),
                subresources={"status"},
            )
        # The namespaces every cluster starts with.
        self._store_objects(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}, "status": {"phase": "Active"}}
            for name in ("default", "kube-system", "kube-public", "kube-node-lease")
        )

    @property
    def writes(self) -> list[Write]:
        """Every successful write: (monotonic time, verb, plural, namespace, name, subresource)."""
        return self.store.writes

    # -- request plumbing --------------------------------------------------------------------------

    async def __call__(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        # A watch opened before a drop is dropped with the others, even if its stream starts after it (the drop
        # bumps the epoch; the stream compares against the one of its arrival, taken before anything is awaited).
        epoch = self.store.watch_epoch
        # kmock's path parser cannot read /api/v1/namespaces[/name]; parse the request ourselves.
        await raw_request.read()
        raw_response: aiohttp.web.StreamResponse | None = None
        try:
            request = await parse_request(raw_request, len(self._requests))
            self._arrived_in[request.id] = epoch
            self._requests.append(request)
            try:
                return await self._handle(request)
            except rendering.StreamingError as error:
                raw_response = error.args[0]
                raise error.__cause__ or error from None
            finally:
                self._arrived_in.pop(request.id, None)  # a watch took its own; any other request's is not kept
        except Exception as error:
            if self._errors and not isinstance(error, kmock.KubernetesError):
                self._errors[-1].append(error)
            if raw_response is None or not raw_response.prepared:
                return render_error(error)
            await self._stream_error(error, raw_response)
            await raw_response.write_eof()
            return raw_response

    async def _serve_version(self, request: rendering.Request) -> rendering.Payload:
        # kmock writes groupVersion "/v1" for the core group; the API server writes "v1".
        answer: dict[str, Any] = dict(await super()._serve_version(request))  # type: ignore[arg-type]
        answer["groupVersion"] = str(answer["groupVersion"]).lstrip("/")
        return answer

    async def _serve_server_version(self, request: rendering.Request) -> rendering.Payload:
        return dict(SERVER_VERSION)

    async def _handle(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        """kmock's reaction loop (apps.RawHandler._handle: by priority, the first reaction that sees the request
        answers), minus kmock's own state-changing interceptor (state changes happen in _dispatch only, so that
        user reactions of the DSL leave the state untouched), and with :meth:`_sees` for kmock's membership
        test, which walked every request ever served for every reaction: the emulator slowed down with its
        uptime (100,000 pods and 500 AppGroups: 4 status writes a second after two minutes)."""
        payloads = list(self._payloads)
        width = max((len(payload.priorities) for payload in payloads), default=0)
        order = sorted(
            range(len(payloads)),
            key=lambda i: tuple(-p for p in payloads[i].priorities) + (0,) * (width - len(payloads[i].priorities)),
        )
        for payload in (payloads[i] for i in order):
            if self._sees(payload._source, request) and not payload._disabled.is_set():
                try:
                    return await payload(request)
                except rendering.ReactionMismatchError:  # a mismatch or a depleted reaction
                    payload._disabled.set()
                except NotImplementedError:  # matched, but nothing to respond with
                    pass
        raise NotImplementedError(f"no reaction for {request.method} {request.url}")

    def _sees(self, view: kmock.View, request: rendering.Request) -> bool:
        """Whether the request just received is in ``view``: along a chain of filters and priorities, each
        filter's criteria on the request alone (O(1)); a view that depends on earlier requests (a slice, a
        group, an exclusion) asks kmock, which walks the log."""
        if view is self:
            return True
        if type(view) is dsl.Filter:
            return self._sees(view._source, request) and bool(view.criteria(request))
        if type(view) is dsl.Priority or type(view) is dsl.Reaction:
            return self._sees(view._source, request)
        return request in view

    @staticmethod
    def _is_object_request(request: rendering.Request) -> bool:
        return request.resource is not None and request.resource.plural is not None

    @staticmethod
    def _is_watch_request(request: rendering.Request) -> bool:
        return request.action == enums.action.WATCH

    @classmethod
    def _is_list_request(cls, request: rendering.Request) -> bool:
        return cls._is_object_request(request) and request.action == enums.action.LIST

    async def _dispatch_encoded(self, request: rendering.Request) -> bytes:
        return orjson.dumps(await self._dispatch(request))

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
        self.faults.check(request)
        info = self._info(request.resource)
        method = str(request.method.value if request.method else "").upper()
        sub = request.subresource
        if request.action == enums.action.WATCH:
            return self._watch(request)
        if method == "GET" and request.name is None:
            return self._list(request, info)
        if method == "GET":
            return copy.deepcopy(writes.existing(self.store, request, info))
        if method == "POST" and request.name is None:
            created = await writes.create(self.store, request, info)
            if request.resource.plural == "customresourcedefinitions" and not writes.dry_run(request):
                self._register_crd(created)
            return created
        if method == "POST" and sub == "eviction":
            return await self._evict(request, info)
        if method == "POST" and (sub == "binding" or request.resource.plural == "bindings"):
            return await subresources.bind(self.store, request.namespace, request.name, request.data)
        if method in ("PATCH", "PUT") and request.name is not None and sub in (None, "status"):
            return await writes.update(self.store, request, info, replace=method == "PUT")
        if method == "DELETE" and request.name is not None and sub is None:
            return await writes.delete(self.store, request, info)
        raise status_error(405, "MethodNotAllowed", f"{method} is not supported on this path")

    def _list(self, request: rendering.Request, info: kmock.ResourceInfo) -> dict[str, Any]:
        """A list, paged as the API server pages it: ``limit`` items and a ``continue`` token naming where the
        next page starts and the resourceVersion of the first page (a token older than the history is 410)."""
        assert request.resource is not None
        labels, fields = label_selector(request.params), field_selector(request.params)
        limit = _positive(request.params.get("limit"))
        version, after = str(self.store.last_rv), None
        if request.params.get("continue"):
            version, after = _read_token(request.params["continue"])
            if int(version) < self.store.compacted.get(resource_key(request.resource), 0):
                raise status_error(410, "Expired", "the provided continue parameter is too old")
        found, last = self.store.page(resource_key(request.resource), request.namespace, labels, fields, after, limit)
        metadata: dict[str, Any] = {"resourceVersion": version}
        if last is not None:
            metadata["continue"] = _token(version, last)
        return {
            "apiVersion": writes.api_version(request.resource),
            "kind": f"{info.kind}List",
            "metadata": metadata,
            "items": found,  # encoded before anything can change them
        }

    def _watch(self, request: rendering.Request) -> AsyncIterator[Any]:
        assert request.resource is not None
        labels, fields = label_selector(request.params), field_selector(request.params)  # 400 before streaming
        epoch = self._arrived_in.pop(request.id, self.store.watch_epoch)
        return watch.stream(self.store, request, resource_key(request.resource), labels, fields, epoch)

    async def _evict(self, request: rendering.Request, info: kmock.ResourceInfo) -> dict[str, Any]:
        assert request.resource is not None
        if request.resource.plural != "pods":
            raise status_error(404, "NotFound", "eviction is a subresource of pods only")
        subresources.check_eviction(self.store, writes.existing(self.store, request, info))
        if not writes.dry_run(request):
            await writes.remove(self.store, request.resource, writes.key_of(request, info))
        return dict(subresources.SUCCESS)

    def _register_crd(self, crd: Mapping[str, Any]) -> None:
        """A CRD created through the API becomes a served resource, one per version."""
        spec = crd.get("spec") or {}
        names = spec.get("names") or {}
        for version in spec.get("versions") or []:
            self.resources[f"{spec.get('group')}/{version.get('name')}/{names.get('plural')}"] = kmock.ResourceInfo(
                kind=names.get("kind"),
                singular=names.get("singular"),
                namespaced=spec.get("scope") == "Namespaced",
                verbs=set(ALL_VERBS),
                shortnames=set(names.get("shortNames") or []),
                subresources=set((version.get("subresources") or {}).keys()),
            )

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
        self.faults.injected.append(Injected(method.upper() if method else None, plural, subresource, code, times))

    async def outage(self, seconds: float, code: int = 503, spare: tuple[str, ...] = ()) -> None:
        """Answer every request ``code`` for ``seconds`` (resources in ``spare``, e.g. ``leases``, still work);
        open watches end at once, as when the API server goes away."""
        self.faults.outage = (asyncio.get_running_loop().time() + seconds, code, spare)
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

    async def drop_watches(self) -> None:
        """End every open watch stream now, as a load balancer or an apiserver restart would."""
        self.store.watch_epoch += 1
        await self.store.notify()

    def compact(self) -> None:
        """Forget the event history: resuming a watch from any older version now gets 410 Gone."""
        self.store.compact()

    # -- direct access (seeding and assertions, no HTTP) -------------------------------------------

    def get_object(self, resource: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        found = self.store.objects.get((_canonical(resource), namespace, name))
        return copy.deepcopy(found) if found is not None else None

    def list_objects(self, resource: str, namespace: str | None = None) -> list[dict[str, Any]]:
        return [copy.deepcopy(obj) for obj in self.store.matching(_canonical(resource), namespace, EVERYTHING, [])]

    async def seed(self, objects: Iterable[Mapping[str, Any]]) -> None:
        """Store objects as they are (status included), as if the cluster already had them."""
        self._store_objects(objects)
        await self.store.notify()

    def _store_objects(self, objects: Iterable[Mapping[str, Any]]) -> None:
        for raw in objects:
            obj = clone(dict(raw))
            resource = self._resource_of(obj)
            info = self._info(resource)
            meta = obj.setdefault("metadata", {})
            namespace = (meta.get("namespace") or "default") if info.namespaced else None
            if info.namespaced:
                meta["namespace"] = namespace
            self.store.stamp_new(obj)
            self.store.put(resource, (resource_key(resource), namespace, meta["name"]), obj, "ADDED")
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


def _positive(text: str | None) -> int | None:
    try:
        number = int(text or 0)
    except ValueError:
        raise status_error(400, "BadRequest", f"limit: {text!r} is not an integer") from None
    return number if number > 0 else None


def _token(version: str, after: tuple[str, str]) -> str:
    return base64.urlsafe_b64encode(json.dumps([version, *after]).encode()).decode()


def _read_token(text: str) -> tuple[str, tuple[str, str]]:
    try:
        version, namespace, name = json.loads(base64.urlsafe_b64decode(text.encode()))
        return str(int(version)), (str(namespace), str(name))
    except (ValueError, TypeError):
        raise status_error(400, "BadRequest", f"continue: {text[:64]!r} is not a continue token") from None


def _canonical(resource: str) -> str:
    parts = resource.split("/")
    return "/".join(parts) if len(parts) == 3 else f"/{parts[0]}/{parts[1]}"
