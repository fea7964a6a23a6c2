"""The kube-scheduler extender protocol's request, ExtenderArgs, read as Go's ``encoding/json`` reads it: the pod,
and the candidate nodes as names (``nodeCacheCapable``) or as Node objects; :class:`BadArgs` names the field."""

from __future__ import annotations

import contextlib
from typing import Any

import orjson

from operators.engine.cluster.objects import Pod
from operators.extender.wire import NameListMemo

MAX_NODES = 50_000  # per request: above the largest clusters run (Kubernetes supports 5,000 nodes)


class BadArgs(ValueError):
    pass


def decode(body: bytes, memo: NameListMemo) -> tuple[Any, list[str] | None]:
    """The ExtenderArgs document, and the memo's names when the body ends with them."""
    split = memo.split(body)
    if split is not None:
        with contextlib.suppress(orjson.JSONDecodeError, RecursionError):
            head = orjson.loads(split[0])
            if isinstance(head, dict) and head:
                return head, split[1]
    try:
        return orjson.loads(body), None
    except (orjson.JSONDecodeError, RecursionError) as error:
        raise BadArgs(f"not JSON: {error}") from None


def parse_args(
    body: bytes, memo: NameListMemo | None = None
) -> tuple[Pod, list[str] | None, list[dict[str, Any]] | None]:
    """ExtenderArgs: the pod, and the candidates as names or as Node objects; ``BadArgs`` names the field."""
    memo = memo if memo is not None else NameListMemo()
    args, known = decode(body, memo)
    if isinstance(args, dict):
        args = go_fields(args, EXTENDER_ARGS_FIELDS)
    if not isinstance(args, dict) or not isinstance(args.get("Pod"), dict):
        raise BadArgs("ExtenderArgs.Pod must be a Pod object")
    try:
        pod = Pod.parse(args["Pod"])
    except (ValueError, TypeError, AttributeError, OverflowError) as error:
        raise BadArgs(f"ExtenderArgs.Pod: {error}") from None
    if known is not None:
        return pod, known, None
    names, nodes = args.get("NodeNames"), args.get("Nodes")
    if names is not None:
        if not isinstance(names, list) or not set(map(type, names)) <= {str}:
            raise BadArgs("ExtenderArgs.NodeNames must be a list of names")
        if len(names) > MAX_NODES:
            raise BadArgs(f"ExtenderArgs.NodeNames: {len(names)} nodes, more than the {MAX_NODES} allowed")
        memo.learn(body, names)
        return pod, names, None
    if not isinstance(nodes, dict):
        raise BadArgs("ExtenderArgs needs NodeNames (nodeCacheCapable) or Nodes (a NodeList)")
    items = go_fields(nodes, ("items",)).get("items")
    if items is None:  # Go marshals an empty slice of a NodeList as null
        items = []
    if not isinstance(items, list):
        raise BadArgs("ExtenderArgs.Nodes.items must be a list of Node objects")
    if len(items) > MAX_NODES:
        raise BadArgs(f"ExtenderArgs.Nodes.items: {len(items)} nodes, more than the {MAX_NODES} allowed")
    return pod, None, items


EXTENDER_ARGS_FIELDS = ("Pod", "Nodes", "NodeNames")  # the Go struct's field names (it has no json tags)


def go_fields(document: dict[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    """``document`` with its keys as Go's ``encoding/json`` matches them to ``fields``: case-insensitively (Unicode
    case folding), the last of several matching keys winning; other keys are dropped, as Go ignores them."""
    by_fold = {name.casefold(): name for name in fields}
    matched: dict[str, Any] = {}
    for key, value in document.items():
        name = by_fold.get(key.casefold())
        if name is not None:
            matched[name] = value
    return matched


def item_name(item: Any, position: int) -> str:
    """The name of a Node object as sent, whatever shape it has (``#position`` when it has none)."""
    meta = item.get("metadata") if isinstance(item, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    return name if isinstance(name, str) and name else f"#{position}"
