"""Pod bandwidth at admission: which ``kubernetes.io/*-bandwidth`` / ``*-request`` annotations to add (pure).

``admit_pod(pod, app_groups, namespace)`` follows these rules, in order of precedence:

1. Values already on the pod are validated (a quantity, not negative) and never overwritten.
2. Koordinator's ``koordinator.sh/networkQOS`` JSON (``ingressLimit``, ``egressLimit``,
   ``ingressRequest``, ``egressRequest``) fills what is missing.
3. A pod labelled as an AppGroup workload gets egress request = the sum of its workload's
   dependencies' ``minBandwidth``, and ingress request = the sum of the ``minBandwidth`` of the
   dependencies that point at its workload.
4. The Namespace annotations ``netaware.io/default-{ingress,egress}-{bandwidth,request}`` fill the rest.
   A namespace default that is not a bandwidth is skipped, never a reason to deny: the pod is admitted
   without it and the problem is returned (``Admission.namespace_problems``) for an Event and a warning.
5. A request still missing defaults to its limit; a request above its limit is denied.

A bandwidth is a quantity between 0 and 1P bits/s (:func:`operators.api.quantity.parse_bandwidth`);
anything else on the pod itself is denied with a message naming the annotation and the value.

Every added annotation is recorded, with where it came from, in ``netaware.io/bandwidth-source``
(``key=source`` pairs, comma-separated, sorted). Bandwidth is in bits/s.

With the bandwidth guarantee on (extended resources), :func:`resource_patch` also makes the pod request its
demand as netaware's extended resources, which kube-scheduler accounts itself.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from operators.api import keys
from operators.api.appgroup import AppGroup
from operators.api.errors import FieldError
from operators.api.meta import DEFAULT_NAMESPACE
from operators.api.quantity import Quantity, QuantityError, parse_bandwidth
from operators.engine.cluster.appgroups import pod_appgroup
from operators.engine.cluster.bandwidth import RESOURCES, Accounting, annotation_demand, koordinator_qos
from operators.engine.cluster.objects import Namespace

DIRECTIONS = ("ingress", "egress")
LIMIT = {"ingress": keys.INGRESS_BANDWIDTH, "egress": keys.EGRESS_BANDWIDTH}
REQUEST = {"ingress": keys.INGRESS_REQUEST, "egress": keys.EGRESS_REQUEST}
NAMESPACE_DEFAULTS = {
    keys.INGRESS_BANDWIDTH: keys.NS_DEFAULT_INGRESS_BANDWIDTH,
    keys.EGRESS_BANDWIDTH: keys.NS_DEFAULT_EGRESS_BANDWIDTH,
    keys.INGRESS_REQUEST: keys.NS_DEFAULT_INGRESS_REQUEST,
    keys.EGRESS_REQUEST: keys.NS_DEFAULT_EGRESS_REQUEST,
}
KOORDINATOR_FIELDS = {
    keys.INGRESS_BANDWIDTH: "ingressLimit",
    keys.EGRESS_BANDWIDTH: "egressLimit",
    keys.INGRESS_REQUEST: "ingressRequest",
    keys.EGRESS_REQUEST: "egressRequest",
}
BANDWIDTH_KEYS = (keys.INGRESS_BANDWIDTH, keys.EGRESS_BANDWIDTH, keys.INGRESS_REQUEST, keys.EGRESS_REQUEST)


class Denied(ValueError):
    """The pod is refused; the message names the annotation and the value."""


@dataclass(frozen=True)
class Admission:
    """The annotations to add to the pod (empty: nothing to change)."""

    added: dict[str, str] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    namespace_problems: tuple[str, ...] = ()  # namespace defaults skipped because they are not bandwidths

    def annotations(self, existing: Mapping[str, str]) -> dict[str, str]:
        """The annotations to write, the source record included (empty when nothing is added)."""
        if not self.added:
            return {}
        record = dict(_parse_sources(existing.get(keys.BANDWIDTH_SOURCE, "")))
        record.update(self.sources)
        return {**self.added, keys.BANDWIDTH_SOURCE: ",".join(f"{k}={v}" for k, v in sorted(record.items()))}


def _parse_sources(text: str) -> list[tuple[str, str]]:
    pairs = []
    for item in filter(None, text.split(",")):
        key, _, source = item.partition("=")
        pairs.append((key, source))
    return pairs


def _quantity(value: Any, where: str) -> Quantity:
    try:
        return parse_bandwidth(value, where)
    except QuantityError as error:
        raise Denied(str(error)) from None


def _koordinator(annotations: Mapping[str, str]) -> dict[str, Quantity]:
    try:
        document = koordinator_qos(annotations)
    except FieldError as error:
        raise Denied(str(error)) from None
    where = f"metadata.annotations[{keys.KOORDINATOR_NETWORK_QOS}]"
    result = {}
    for key, field_name in KOORDINATOR_FIELDS.items():
        if document.get(field_name) is not None:
            result[key] = _quantity(document[field_name], f"{where}.{field_name}")
    return result


def appgroup_requests(
    pod_labels: Mapping[str, str], pod_namespace: str, app_groups: Iterable[AppGroup]
) -> dict[str, Quantity]:
    """Requests implied by the pod's AppGroup workload (rule 3); empty when it has none."""
    name = pod_labels.get(keys.APPGROUP_LABEL)
    selector = pod_labels.get(keys.APPGROUP_WORKLOAD_LABEL)
    if not name or not selector:
        return {}
    group = pod_appgroup(name, pod_namespace, app_groups)
    if group is None:
        return {}
    egress = Quantity(0)
    ingress = Quantity(0)
    for entry in group.spec.workloads:
        for dependency in entry.dependencies or ():
            bandwidth = dependency.min_bandwidth
            if bandwidth is None:
                continue
            if entry.workload.selector == selector:
                egress = egress + bandwidth
            if dependency.workload.selector == selector:
                ingress = ingress + bandwidth
    result = {}
    if egress:
        result[keys.EGRESS_REQUEST] = egress
    if ingress:
        result[keys.INGRESS_REQUEST] = ingress
    return result


def admit_pod(pod: Mapping[str, Any], app_groups: Iterable[AppGroup], namespace: Namespace | None) -> Admission:
    """What to add to a pod being created (see the module docstring); raises ``Denied``."""
    meta = pod.get("metadata") or {}
    annotations: Mapping[str, str] = meta.get("annotations") or {}
    labels: Mapping[str, str] = meta.get("labels") or {}
    pod_namespace = meta.get("namespace") or (namespace.name if namespace else DEFAULT_NAMESPACE)
    values: dict[str, Quantity] = {}
    sources: dict[str, str] = {}
    for key in BANDWIDTH_KEYS:  # rule 1
        if key in annotations:
            values[key] = _quantity(annotations[key], f"metadata.annotations[{key}]")
    layers: list[tuple[str, dict[str, Quantity]]] = [
        (keys.KOORDINATOR_NETWORK_QOS, _koordinator(annotations)),
        ("appgroup", appgroup_requests(labels, pod_namespace, app_groups)),
    ]
    defaults, problems = namespace_defaults(namespace)
    layers.append(("namespace", defaults))
    for source, layer in layers:  # rules 2-4
        for key, quantity in layer.items():
            if key not in values:
                values[key] = quantity
                sources[key] = source
    for direction in DIRECTIONS:  # rule 5
        limit, request = LIMIT[direction], REQUEST[direction]
        if request not in values and limit in values:
            values[request] = values[limit]
            sources[request] = "limit"
        if request in values and limit in values and values[request] > values[limit]:
            raise Denied(
                f"{request} {_render(values[request], sources.get(request), annotations.get(request))} is above "
                f"{limit} {_render(values[limit], sources.get(limit), annotations.get(limit))}"
            )
    added = {key: str(values[key]) for key in BANDWIDTH_KEYS if key in sources}
    return Admission(added, {key: sources[key] for key in added}, problems)


def namespace_defaults(namespace: Namespace | None) -> tuple[dict[str, Quantity], tuple[str, ...]]:
    """(the namespace's default bandwidths, the problems of the defaults that are not bandwidths)."""
    defaults: dict[str, Quantity] = {}
    problems: list[str] = []
    for key, annotation in NAMESPACE_DEFAULTS.items():
        if namespace is not None and annotation in namespace.annotations:
            where = f"Namespace {namespace.name} metadata.annotations[{annotation}]"
            try:
                defaults[key] = parse_bandwidth(namespace.annotations[annotation], where)
            except QuantityError as error:
                problems.append(f"{error}; the default is ignored")
    return defaults, tuple(problems)


def _render(value: Quantity, source: str | None, original: str | None) -> str:
    text = json.dumps(original if original is not None and source is None else str(value))
    return f"{text} (from {source})" if source else text


def json_patch(pod: Mapping[str, Any], annotations: Mapping[str, str]) -> list[dict[str, Any]]:
    """RFC 6902 operations adding ``annotations`` to ``pod`` (keys escaped; the map created when absent)."""
    if not annotations:
        return []
    if not isinstance(pod.get("metadata"), Mapping):
        return [{"op": "add", "path": "/metadata", "value": {"annotations": dict(annotations)}}]
    existing = pod["metadata"].get("annotations")
    if existing is None:
        return [{"op": "add", "path": "/metadata/annotations", "value": dict(annotations)}]
    return [
        {
            "op": "replace" if key in existing else "add",
            "path": "/metadata/annotations/" + _escape(key),
            "value": value,
        }
        for key, value in sorted(annotations.items())
    ]


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def resource_patch(
    pod: Mapping[str, Any], annotations: Mapping[str, str], accounting: Accounting
) -> list[dict[str, Any]]:
    """RFC 6902 operations that make the pod request its bandwidth as netaware's extended resources of the
    accounting mode, so that kube-scheduler accounts it (``operators.engine.cluster.bandwidth``).

    1. The demand is read from ``annotations``: the pod's own with what admission adds (its final ones).
    2. Nothing when the pod already names one of netaware's resources in any container's requests or limits
       (a reinvocation, or the user's own: never overwritten, never added twice) or asks for no bandwidth.
    3. Requests = limits (an extended resource cannot be overcommitted), on the first container only (the pod's
       effective request is the containers' sum), as integers in bits/s; maps created where absent."""
    spec = pod.get("spec")
    containers = spec.get("containers") if isinstance(spec, Mapping) else None
    if not isinstance(spec, Mapping) or not isinstance(containers, list) or not containers:
        return []  # the API server refuses a pod without containers itself
    if not isinstance(containers[0], Mapping):
        return []  # nor one whose container is not an object
    for group in ("containers", "initContainers"):
        listed = spec.get(group)
        for container in listed if isinstance(listed, list) else ():
            resources = container.get("resources") if isinstance(container, Mapping) else None
            for section in ("requests", "limits"):
                named = resources.get(section) if isinstance(resources, Mapping) else None
                if isinstance(named, Mapping) and any(name in named for name in RESOURCES):
                    return []
    wanted = {name: str(amount) for name, amount in accounting.requests(*annotation_demand(annotations)).items()}
    if not wanted:
        return []
    base = "/spec/containers/0/resources"
    resources = containers[0].get("resources")
    if not isinstance(resources, Mapping):
        return [{"op": "add", "path": base, "value": {"requests": dict(wanted), "limits": dict(wanted)}}]
    operations = []
    for section in ("requests", "limits"):
        if not isinstance(resources.get(section), Mapping):
            operations.append({"op": "add", "path": f"{base}/{section}", "value": dict(wanted)})
            continue
        for name, amount in sorted(wanted.items()):
            operations.append({"op": "add", "path": f"{base}/{section}/{_escape(name)}", "value": amount})
    return operations
