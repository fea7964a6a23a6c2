"""Shared building blocks of the CRD models: the base class, object metadata, conditions, times."""

from __future__ import annotations

import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer, PlainValidator, WithJsonSchema, field_validator
from pydantic.alias_generators import to_camel

from operators.api.errors import FieldError


class ApiModel(BaseModel):
    """camelCase on the wire, snake_case in Python; immutable; unknown fields ignored (the apiserver prunes them)."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
        extra="ignore",
        serialize_by_alias=True,
    )

    def to_wire(self) -> dict[str, Any]:
        """The object as the API server stores it: camelCase, no nulls."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class OpenModel(ApiModel):
    """A model that keeps fields it does not know (for objects other controllers also write)."""

    model_config = ConfigDict(extra="allow")


def parse_time(value: Any) -> datetime.datetime:
    """RFC 3339 as the API server writes it (``2026-11-22T06:49:00Z``)."""
    if isinstance(value, datetime.datetime):
        moment = value
    elif isinstance(value, str):
        try:
            moment = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError as error:
            raise FieldError("", value, "not an RFC 3339 time") from error
    else:
        raise FieldError("", value, "not an RFC 3339 time")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment.astimezone(datetime.UTC)


def format_time(moment: datetime.datetime) -> str:
    return moment.astimezone(datetime.UTC).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


Timestamp = Annotated[
    datetime.datetime,
    PlainValidator(parse_time),
    PlainSerializer(format_time, return_type=str),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]


class ObjectMeta(OpenModel):
    """The metadata fields netaware reads; every other field is kept as it came."""

    name: str
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: Timestamp | None = None
    deletion_timestamp: Timestamp | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


DEFAULT_NAMESPACE = "default"


class NamespacedMeta(ObjectMeta):
    """The metadata of a namespaced object: its namespace is always set. An object read without one (a snapshot
    file, ``kubectl create`` without ``-n``) is in ``default``, as the API server places it; this is the one
    place that fallback is written."""

    namespace: str = DEFAULT_NAMESPACE

    @field_validator("namespace", mode="before")
    @classmethod
    def _defaulted(cls, value: object) -> object:
        return value or DEFAULT_NAMESPACE


class Condition(ApiModel):
    """A ``metav1.Condition``."""

    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str = Field(pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$", max_length=1024)
    message: str = Field(default="", max_length=32768)
    last_transition_time: Timestamp
    observed_generation: int | None = Field(default=None, ge=0)


IntOrString = Annotated[
    int | str,
    WithJsonSchema({"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True}),
]
