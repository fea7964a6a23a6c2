"""Kubernetes label selectors, both forms, hand-written (no maintained async-friendly package).

* the string form of ``?labelSelector=`` (``a=b,c!=d,e in (f,g),!h``), as parsed by
  ``k8s.io/apimachinery/pkg/labels.Parse``;
* the structured ``metav1.LabelSelector`` (``matchLabels`` + ``matchExpressions`` with
  ``In``, ``NotIn``, ``Exists``, ``DoesNotExist``), as ``LabelSelectorAsSelector``.

An empty selector matches everything; a ``None`` structured selector matches nothing
(upstream semantics for e.g. PodDisruptionBudget).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from operators.api.errors import FieldError, join_path

_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist (=, == are In; != is NotIn)
    values: frozenset[str]

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator == "Exists":
            return self.key in labels
        if self.operator == "DoesNotExist":
            return self.key not in labels
        if self.operator == "In":
            return self.key in labels and labels[self.key] in self.values
        # NotIn: true when the label is absent, as upstream
        return self.key not in labels or labels[self.key] not in self.values


@dataclass(frozen=True)
class Selector:
    requirements: tuple[Requirement, ...] = ()
    matches_nothing: bool = False

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.matches_nothing:
            return False
        return all(requirement.matches(labels) for requirement in self.requirements)

    @property
    def is_empty(self) -> bool:
        return not self.requirements and not self.matches_nothing


EVERYTHING = Selector()
NOTHING = Selector(matches_nothing=True)

_TOKEN = re.compile(r"\s*(!=|==|=|!|,|\(|\)|[^\s!=,()]+)")


def parse_selector(text: str, path: str = "labelSelector") -> Selector:
    """Parse the string form (``?labelSelector=``)."""
    tokens = [match.group(1) for match in _TOKEN.finditer(text or "")]
    if "".join(tokens).replace(" ", "") != re.sub(r"\s+", "", text or ""):
        raise FieldError(path, text, "not a label selector")
    requirements: list[Requirement] = []
    position = 0

    def expect(condition: bool, reason: str) -> None:
        if not condition:
            raise FieldError(path, text, f"not a label selector: {reason}")

    while position < len(tokens):
        token = tokens[position]
        if token == "!":
            expect(position + 1 < len(tokens), "a key must follow '!'")
            requirements.append(Requirement(tokens[position + 1], "DoesNotExist", frozenset()))
            position += 2
        else:
            key = token
            expect(key not in ",()=", f"unexpected {key!r}")
            following = tokens[position + 1] if position + 1 < len(tokens) else ","
            if following in ("=", "==", "!="):
                value = tokens[position + 2] if position + 2 < len(tokens) else ""
                if value == ",":
                    value = ""
                    position -= 1
                operator = "NotIn" if following == "!=" else "In"
                requirements.append(Requirement(key, operator, frozenset({value})))
                position += 3
            elif following in ("in", "notin"):
                expect(position + 2 < len(tokens) and tokens[position + 2] == "(", "expected '(' after in/notin")
                values: set[str] = set()
                position += 3
                while position < len(tokens) and tokens[position] != ")":
                    if tokens[position] != ",":
                        values.add(tokens[position])
                    position += 1
                expect(position < len(tokens), "missing ')'")
                requirements.append(Requirement(key, "In" if following == "in" else "NotIn", frozenset(values)))
                position += 1
            else:
                requirements.append(Requirement(key, "Exists", frozenset()))
                position += 1
        if position < len(tokens):
            expect(tokens[position] == ",", f"expected ',' but found {tokens[position]!r}")
            position += 1
    return Selector(tuple(requirements))


def from_label_selector(raw: Any, path: str = "selector") -> Selector:
    """A structured ``metav1.LabelSelector``; ``None`` matches nothing, ``{}`` everything."""
    if raw is None:
        return NOTHING
    if not isinstance(raw, Mapping):
        raise FieldError(path, raw, "expected a label selector object")
    requirements: list[Requirement] = []
    match_labels = raw.get("matchLabels") or {}
    if not isinstance(match_labels, Mapping) or not all(
        isinstance(key, str) and isinstance(value, str) for key, value in match_labels.items()
    ):
        raise FieldError(join_path(path, "matchLabels"), match_labels, "expected a map of strings")
    for key, value in sorted(match_labels.items()):
        requirements.append(Requirement(key, "In", frozenset({value})))
    expressions = raw.get("matchExpressions") or []
    if not isinstance(expressions, list):
        raise FieldError(join_path(path, "matchExpressions"), expressions, "expected a list")
    for index, expression in enumerate(expressions):
        where = join_path(path, f"matchExpressions[{index}]")
        if not isinstance(expression, Mapping) or not isinstance(expression.get("key"), str):
            raise FieldError(where, expression, "expected {key, operator, values}")
        operator = expression.get("operator")
        if operator not in _OPERATORS:
            raise FieldError(f"{where}.operator", operator, f"expected one of {', '.join(_OPERATORS)}")
        raw_values = expression.get("values") or []
        if not isinstance(raw_values, list) or not all(isinstance(value, str) for value in raw_values):
            raise FieldError(f"{where}.values", raw_values, "expected a list of strings")
        values = list(raw_values)
        if operator in ("In", "NotIn") and not values:
            raise FieldError(f"{where}.values", values, f"{operator} needs at least one value")
        if operator in ("Exists", "DoesNotExist") and values:
            raise FieldError(f"{where}.values", values, f"{operator} takes no values")
        requirements.append(Requirement(expression["key"], operator, frozenset(values)))
    return Selector(tuple(requirements))
