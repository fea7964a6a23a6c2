"""The kubernetes-asyncio client the controllers use for writes kopf does not make for them.

kopf talks to the API through its own client; writes to *other* objects than the one a handler
is called for (an AppGroup's status after a pod event) go through kubernetes-asyncio. The
factory is injectable so that tests and the demo point it at the emulator.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import aiohttp
from aiohttp.helpers import get_env_proxy_for_url
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.config.config_exception import ConfigException
from yarl import URL

from operators.api.meta import DEFAULT_NAMESPACE

ApiClientFactory = Callable[[], Awaitable[client.ApiClient]]
logger = logging.getLogger("netaware.kube")

MERGE_PATCH = "application/merge-patch+json"
ATTEMPTS = 5
# Every request without a timeout of its own gets this one (kubernetes-asyncio's default is none at all: an answer
# that never comes would hang its loop for good). Watches and long lists pass their own.
REQUEST_TIMEOUT = aiohttp.ClientTimeout(total=30, sock_connect=10)
# What a broken connection raises: kubernetes-asyncio passes aiohttp's errors through unwrapped
# (ServerDisconnectedError, ClientPayloadError, a refused connection), and a timeout is a TimeoutError.
TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (aiohttp.ClientError, TimeoutError, OSError)
# Everything an API call may fail with that is not a bug: retried (or reported) where the call is made.
API_ERRORS: tuple[type[BaseException], ...] = (ApiException, *TRANSPORT_ERRORS)


class TimedApiClient(client.ApiClient):
    """An API client whose requests time out (:data:`REQUEST_TIMEOUT`) unless they say otherwise, and whose
    environment (a proxy from ``HTTPS_PROXY``/``NO_PROXY``) is read once, when it is made.

    kubernetes-asyncio's session trusts the environment on every request: aiohttp then reads ``~/.netrc`` and the
    proxy variables in a worker thread per call. In a burst of releases that was 6 threads busy reading a file
    whose answer never changes, a fifth of the AppGroup controller's CPU and a thread hop on every write. The
    proxy is resolved here instead; ``.netrc`` credentials are not used (the API server is reached with the
    kubeconfig's or the ServiceAccount's)."""

    def __init__(self, configuration: client.Configuration | None = None) -> None:
        super().__init__(configuration)
        rest = self.rest_client
        if not rest.proxy:
            with contextlib.suppress(LookupError, ValueError):
                proxy, auth = get_env_proxy_for_url(URL(self.configuration.host or ""))
                rest.proxy = str(proxy)
                if auth is not None:
                    rest.proxy_headers = {**(rest.proxy_headers or {}), "Proxy-Authorization": auth.encode()}
        rest.pool_manager._trust_env = False  # no public setter; read on each request by aiohttp 3.x

    async def request(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["_request_timeout"] = kwargs.get("_request_timeout") or REQUEST_TIMEOUT
        return await super().request(*args, **kwargs)


def describe(error: BaseException) -> str:
    """An API call's failure in a few words: the status and reason of an API error, else the error's type and text."""
    if isinstance(error, ApiException):
        return f"{error.status} {error.reason}"
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


class NoCredentials(RuntimeError):
    """Neither in-cluster credentials nor a readable kubeconfig: what is missing and what to pass instead."""


async def cluster_api_client(kubeconfig: str | None = None) -> client.ApiClient:
    """``kubeconfig`` when given; else in-cluster service account credentials, else $KUBECONFIG or
    ~/.kube/config. ``NoCredentials`` (one line) when none of them can be used."""
    if kubeconfig is None:
        try:
            config.load_incluster_config()  # type: ignore[no-untyped-call]
            return TimedApiClient()
        except ConfigException:
            pass
    configuration = client.Configuration()
    try:
        await config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    except (ConfigException, OSError, TypeError, ValueError) as error:
        where = kubeconfig or "$KUBECONFIG or ~/.kube/config"
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise NoCredentials(
            f"no cluster credentials: not running in a cluster, and no usable kubeconfig ({where}: {reason}); "
            "pass --kubeconfig PATH or --server URL (a plain-HTTP API server)"
        ) from None
    return TimedApiClient(configuration)


def api_client_factory(server: str | None = None, kubeconfig: str | None = None) -> ApiClientFactory:
    """``server``: a plain-HTTP API server (the emulator); else :func:`cluster_api_client` with ``kubeconfig``."""
    if server:
        return url_api_client(server)

    async def make() -> client.ApiClient:
        return await cluster_api_client(kubeconfig)

    return make


def url_api_client(url: str) -> ApiClientFactory:
    """A factory for a client of a plain-HTTP API server (the emulator)."""

    async def make() -> client.ApiClient:
        return TimedApiClient(client.Configuration(host=url.rstrip("/")))

    return make


async def _json_call(
    api: client.ApiClient,
    method: str,
    path: str,
    body: Any = None,
    params: dict[str, str] | None = None,
    content_type: str | None = None,
) -> dict[str, Any] | None:
    """An API call as plain JSON (no model classes: faster for large lists); None when not found."""
    headers = {"Accept": "application/json"}
    if content_type is not None:
        headers["Content-Type"] = content_type
    try:
        result = await api.call_api(
            path,
            method,
            body=body,
            query_params=list((params or {}).items()),
            header_params=headers,
            response_types_map={200: "object", 201: "object"},
            auth_settings=["BearerToken"],
            _return_http_data_only=True,
        )
    except ApiException as error:
        if error.status == 404:
            return None
        raise
    return dict(result) if result is not None else None


async def read_json(api: client.ApiClient, path: str, **params: str) -> dict[str, Any] | None:
    """GET an API path as plain JSON; None when not found."""
    return await _json_call(api, "GET", path, params=params)


async def send_json(
    api: client.ApiClient, method: str, path: str, body: Any, content_type: str = "application/json"
) -> dict[str, Any] | None:
    """Send a JSON body (POST, PUT, PATCH) or nothing (DELETE) to an API path; None when not found."""
    return await _json_call(api, method, path, body=body, content_type=content_type)


RETRYABLE = frozenset({409, 429, 500, 502, 503, 504})


def merge_patch_between(old: Any, new: Any) -> Any:
    """The JSON merge patch (RFC 7386) that turns ``old`` into ``new``: what changed, and a null for every key
    ``new`` no longer has — a merge patch of ``new`` alone would keep those. Lists are replaced whole."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return new
    patch: dict[str, Any] = {key: None for key in old if key not in new}
    for key, value in new.items():
        if key not in old:
            patch[key] = value
        elif old[key] != value:
            patch[key] = merge_patch_between(old[key], value)
    return patch


async def patch_status(
    api: client.ApiClient,
    group: str,
    version: str,
    plural: str,
    namespace: str | None,
    name: str,
    status: dict[str, Any],
    previous: dict[str, Any] | None = None,
) -> dict[str, Any] | None:
    """Merge-patch the status subresource of a custom object; the object as written (None: it is gone). With
    ``previous`` (the status as last read or written), what it has and ``status`` has not is removed.

    Transient answers (409, 429, 5xx) and broken connections are retried a few times with a growing delay (a merge
    patch applied twice is applied once); a missing object (deleted meanwhile) is not an error; anything else
    raises (one of :data:`API_ERRORS`).
    """
    custom = client.CustomObjectsApi(api)
    # kubernetes-asyncio would send a dict body as a JSON patch unless told otherwise.
    options: dict[str, Any] = {"_content_type": MERGE_PATCH}
    if previous is not None:
        status = merge_patch_between(previous, status)
    for attempt in range(ATTEMPTS):
        try:
            if namespace is None:
                written = await custom.patch_cluster_custom_object_status(
                    group, version, plural, name, {"status": status}, **options
                )
            else:
                written = await custom.patch_namespaced_custom_object_status(
                    group, version, namespace, plural, name, {"status": status}, **options
                )
            return dict(written) if isinstance(written, dict) else None
        except ApiException as error:
            if error.status == 404:
                return None
            if error.status not in RETRYABLE or attempt == ATTEMPTS - 1:
                raise
        except TRANSPORT_ERRORS:
            if attempt == ATTEMPTS - 1:
                raise
        await asyncio.sleep(0.1 * 2**attempt)
    return None


async def post_event(
    api: client.ApiClient,
    involved: Mapping[str, Any],
    event_type: str,
    reason: str,
    message: str,
    component: str,
) -> None:
    """Post a core/v1 Event about ``involved`` (apiVersion, kind, name, namespace, uid). An Event is a
    courtesy: a refused one is logged, never raised. Namespaced objects get it in their namespace,
    cluster-scoped ones (a Namespace, a Node) in ``default``."""
    namespace = involved.get("namespace") or DEFAULT_NAMESPACE
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    body = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{involved['name']}.{secrets.token_hex(8)}", "namespace": namespace},
        "involvedObject": {key: value for key, value in involved.items() if value},
        "reason": reason,
        "message": message[:1024],
        "type": event_type,
        "source": {"component": component},
        "reportingComponent": component,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }
    try:
        await send_json(api, "POST", f"/api/v1/namespaces/{namespace}/events", body)
    except API_ERRORS as error:
        logger.warning(
            "event %s on %s %s not posted: %s", reason, involved.get("kind"), involved["name"], describe(error)
        )
