"""Kubernetes ``resource.Quantity``, exactly.

Grammar (k8s.io/apimachinery/pkg/api/resource)::

    <quantity>        ::= <signedNumber><suffix>
    <signedNumber>    ::= <number> | <sign><number>
    <number>          ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
    <suffix>          ::= <binarySI> | <decimalExponent> | <decimalSI>
    <binarySI>        ::= Ki | Mi | Gi | Ti | Pi | Ei
    <decimalSI>       ::= n | u | m | "" | k | M | G | T | P | E
    <decimalExponent> ::= "e" <signedInteger> | "E" <signedInteger>

Semantics kept from upstream:

* values are exact; anything finer than a nano is rounded *up* (away from zero),
  so asking for a tiny amount never yields zero;
* the representable range is what ``Quantity.Value()`` can return, an int64: a value whose
  magnitude is above 2**63 - 1 is an error ("out of range"), where upstream caps BinarySI values
  and keeps larger decimal ones as arbitrary-precision decimals. Parsing is bounded in time and
  memory for any input: a string longer than 64 characters is refused before parsing, and the
  magnitude is checked from the digit count and the exponent before anything is raised to a power
  (``1e99999999`` is refused in microseconds, ``1e-999999999`` is 1n);
* the suffix family of the input (decimal SI, binary SI, decimal exponent) is the
  format used for canonical output: ``1.5G`` -> ``1500M``, ``1.5Gi`` -> ``1536Mi``,
  ``1000M`` -> ``1G``, ``0.5`` -> ``500m``, ``1e3`` -> ``1e3``; a BinarySI value
  that is not a whole number, or below 1024, is written as DecimalSI.

Deliberate differences: a string without a digit (``Gi``, ``.``, ``-``) is rejected, as the
API's quantity pattern does, where upstream's parser reads it as zero; and upstream keeps the
*input* string when it is already
"canonical enough", so ``+1k`` or ``01k`` print back as typed; here ``str()`` always
gives the computed canonical form (``1k``). The original text is kept in ``text`` so
that specs are written back exactly as the user wrote them.

Values are held as an integer number of nanos, so comparison and arithmetic never
round through a float.
"""

from __future__ import annotations

import enum
import functools
from typing import Annotated, Any

from pydantic import PlainSerializer, PlainValidator, WithJsonSchema

from operators.api.errors import FieldError
from operators.memo import remember

NANO = 10**9
MAX_VALUE = 2**63 - 1  # the largest magnitude, in units: upstream's Value() is an int64
MAX_TEXT_LENGTH = 64  # "-9223372036854775807" is 20; no honest quantity comes near 64
_MAX_NANOS = MAX_VALUE * NANO

_DECIMAL_SUFFIXES: dict[str, int] = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_BINARY_SUFFIXES: dict[str, int] = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_BY_EXPONENT = {exponent: suffix for suffix, exponent in _DECIMAL_SUFFIXES.items()}
_BINARY_BY_POWER = {power // 10: suffix for suffix, power in _BINARY_SUFFIXES.items()}
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")
_DIGITS = frozenset("0123456789")

# The pattern controller-gen writes for resource.Quantity fields in CRD schemas.
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
    r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)


class Format(enum.Enum):
    """The suffix family a quantity is written in."""

    DECIMAL_SI = "DecimalSI"
    BINARY_SI = "BinarySI"
    DECIMAL_EXPONENT = "DecimalExponent"


class QuantityError(FieldError):
    """A string that is not a Kubernetes quantity."""


@functools.total_ordering
class Quantity:
    """An exact, immutable Kubernetes quantity."""

    __slots__ = ("format", "nanos", "text")

    nanos: int
    format: Format
    text: str

    def __init__(self, nanos: int, fmt: Format = Format.DECIMAL_SI, text: str | None = None) -> None:
        object.__setattr__(self, "nanos", nanos)
        object.__setattr__(self, "format", fmt)
        object.__setattr__(self, "text", text if text is not None else _canonical(nanos, fmt))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Quantity is immutable")

    # -- constructors ---------------------------------------------------------------------------

    @classmethod
    def parse(cls, value: object, path: str = "") -> Quantity:
        """Parse a string (or an int, as in int-or-string fields); errors name ``path`` and the value."""
        if isinstance(value, Quantity):
            return value
        if isinstance(value, str) and (known := _PARSED.get(value)) is not None:
            return known
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise QuantityError(path, value, 'not a quantity: expected a string such as "100M" or an integer')
        if isinstance(value, int):
            if abs(value) > MAX_VALUE:
                raise QuantityError(path, value, _OUT_OF_RANGE)
            return cls(value * NANO, Format.DECIMAL_SI, str(value))
        nanos, fmt = _parse(value, path)
        return remember(_PARSED, value, cls(nanos, fmt, value), _PARSED_KEPT)

    @classmethod
    def of(cls, number: int, fmt: Format = Format.DECIMAL_SI) -> Quantity:
        """A whole number of units (bits/s for bandwidth)."""
        return cls(number * NANO, fmt)

    # -- accessors --------------------------------------------------------------------------------

    def value(self) -> int:
        """The value as an integer, rounded up away from zero (``Quantity.Value()`` upstream)."""
        return _ceil_away(self.nanos, NANO)

    def milli_value(self) -> int:
        """The value in thousandths, rounded up away from zero (``Quantity.MilliValue()``)."""
        return _ceil_away(self.nanos, NANO // 1000)

    def is_zero(self) -> bool:
        return self.nanos == 0

    def canonical(self) -> str:
        return _canonical(self.nanos, self.format)

    def __str__(self) -> str:
        return self.canonical()

    def __repr__(self) -> str:
        return f"Quantity({self.canonical()!r})"

    # -- comparison and arithmetic (exact) -------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Quantity):
            return self.nanos == other.nanos
        if isinstance(other, int) and not isinstance(other, bool):
            return self.nanos == other * NANO
        return NotImplemented

    def __lt__(self, other: Quantity | int) -> bool:
        return self.nanos < _nanos_of(other)

    def __hash__(self) -> int:
        return hash(self.nanos)

    def __bool__(self) -> bool:
        return self.nanos != 0

    def __add__(self, other: Quantity | int) -> Quantity:
        return Quantity(self.nanos + _nanos_of(other), self._result_format(other))

    def __radd__(self, other: int) -> Quantity:
        return Quantity(self.nanos + _nanos_of(other), self.format)

    def __sub__(self, other: Quantity | int) -> Quantity:
        return Quantity(self.nanos - _nanos_of(other), self._result_format(other))

    def __neg__(self) -> Quantity:
        return Quantity(-self.nanos, self.format)

    def __abs__(self) -> Quantity:
        return Quantity(abs(self.nanos), self.format)

    def __mul__(self, factor: int) -> Quantity:
        if isinstance(factor, bool) or not isinstance(factor, int):
            return NotImplemented
        return Quantity(self.nanos * factor, self.format)

    __rmul__ = __mul__

    def _result_format(self, other: Quantity | int) -> Format:
        # Upstream Add/Sub keep the receiver's format unless the receiver is zero.
        if self.nanos == 0 and isinstance(other, Quantity):
            return other.format
        return self.format


def _nanos_of(value: Quantity | int) -> int:
    if isinstance(value, Quantity):
        return value.nanos
    if isinstance(value, int) and not isinstance(value, bool):
        return value * NANO
    raise TypeError(f"cannot combine a Quantity with {type(value).__name__}")


# Quantities parsed from text, shared: a cluster repeats a few hundred texts ("500m", "1Gi", "100M") across
# 100,000 pods, and a Quantity is immutable. Bounded: cleared when full.
_PARSED_KEPT = 8192
_PARSED: dict[str, Quantity] = {}


def _ceil_away(numerator: int, denominator: int) -> int:
    magnitude = -(-abs(numerator) // denominator)
    return magnitude if numerator >= 0 else -magnitude


_OUT_OF_RANGE = f"out of range: a quantity's magnitude is at most {MAX_VALUE} (2^63-1)"


def _parse(text: str, path: str) -> tuple[int, Format]:
    """Follow upstream ``ParseQuantity``; return (nanos, format)."""
    if text == "":
        raise QuantityError(path, text, "not a quantity: empty string")
    if len(text) > MAX_TEXT_LENGTH:
        raise QuantityError(
            path, text[:MAX_TEXT_LENGTH] + "...", f"not a quantity: longer than {MAX_TEXT_LENGTH} characters"
        )
    if not any(char in _DIGITS for char in text.split("e", maxsplit=1)[0].split("E", maxsplit=1)[0]):
        # Upstream's parser reads "Gi", "." or "-" as zero; the API's own quantity pattern rejects
        # them, and so do we: a value without a digit is a typo, not a request for nothing.
        raise QuantityError(path, text, "not a quantity: no digits")
    positive, num, denom, suffix = _split(text, path)
    fmt, base, exponent = _interpret_suffix(suffix, text, path)
    # The exact value is (num.denom) * base**exponent; scale everything to nanos and round up.
    significant = (num + denom).lstrip("0")
    if not significant:
        return 0, fmt
    digits = int(significant)  # at most 64 digits: far below Python's int-string conversion limit
    if base == 10:
        # digits * 10**(exponent - len(denom)) lies in [10**(order - 1), 10**order).
        order = len(significant) + exponent - len(denom)
        if order - 1 > len(str(MAX_VALUE)) - 1:
            raise QuantityError(path, text, _OUT_OF_RANGE)
        shift = exponent - len(denom) + 9  # the power of ten from digits to nanos
        if order + 9 <= 0:
            nanos = 1  # below a nano: rounds up to 1n, as upstream (never to zero)
        elif shift >= 0:
            nanos = digits * 10**shift
        else:
            nanos = -(-digits // 10**-shift)  # round up to the nano
    else:
        nanos = -(-(digits * NANO * 2**exponent) // 10 ** len(denom))
    if nanos > _MAX_NANOS:
        raise QuantityError(path, text, _OUT_OF_RANGE)
    return (nanos if positive else -nanos), fmt


def _split(text: str, path: str) -> tuple[bool, str, str, str]:
    """Upstream ``parseQuantityString``: sign, numerator digits, fraction digits, suffix."""
    end = len(text)
    pos = 0
    positive = True
    if text[0] in "+-":
        positive = text[0] == "+"
        pos = 1
    while pos < end and text[pos] == "0":
        pos += 1
    if pos >= end:
        return positive, "0", "", ""
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    num = text[start:pos] or "0"
    denom = ""
    if pos < end and text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        denom = text[start:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos < end:
        raise QuantityError(path, text, "not a quantity: unexpected characters after the number")
    return positive, num, denom, text[suffix_start:]


def _interpret_suffix(suffix: str, text: str, path: str) -> tuple[Format, int, int]:
    if suffix in _DECIMAL_SUFFIXES:
        return Format.DECIMAL_SI, 10, _DECIMAL_SUFFIXES[suffix]
    if suffix in _BINARY_SUFFIXES:
        return Format.BINARY_SI, 2, _BINARY_SUFFIXES[suffix]
    if len(suffix) > 1 and suffix[0] in "eE":
        exponent_text = suffix[1:]
        body = exponent_text[1:] if exponent_text[0] in "+-" else exponent_text
        if body and all(char in _DIGITS for char in body):
            return Format.DECIMAL_EXPONENT, 10, int(exponent_text)
    raise QuantityError(
        path,
        text,
        f"not a quantity: unknown suffix {suffix!r} (use n, u, m, k, M, G, T, P, E, Ki..Ei or e<exponent>)",
    )


def _canonical(nanos: int, fmt: Format) -> str:
    """Upstream ``CanonicalizeBytes``."""
    if nanos == 0:
        return "0"
    sign = "-" if nanos < 0 else ""
    magnitude = abs(nanos)
    if fmt is Format.BINARY_SI and magnitude >= 1024 * NANO and magnitude % NANO == 0:
        amount, power = magnitude // NANO, 0
        while amount % 1024 == 0 and power < max(_BINARY_BY_POWER):
            amount //= 1024
            power += 1
        return f"{sign}{amount}{_BINARY_BY_POWER[power]}" if power else f"{sign}{amount}"
    # Decimal: move factors of ten into the exponent, then make the exponent a multiple of three.
    amount, exponent = magnitude, -9
    while amount % 10 == 0:
        amount //= 10
        exponent += 1
    while exponent % 3 != 0:
        amount *= 10
        exponent -= 1
    if fmt is Format.DECIMAL_EXPONENT:
        return f"{sign}{amount}" + (f"e{exponent}" if exponent else "")
    while exponent > 18:  # beyond "E" there is no SI suffix: keep the digits in the mantissa
        amount *= 1000
        exponent -= 3
    return f"{sign}{amount}{_DECIMAL_BY_EXPONENT[exponent]}"


def parse_quantity(value: object, path: str = "") -> Quantity:
    """Parse a quantity; a value that does not parse raises ``QuantityError`` naming ``path``."""
    return Quantity.parse(value, path)


# Bandwidth in bits/s is a quantity between 0 and 1P (10**15 bits/s, over a thousand times today's fastest
# NIC). The bound keeps every sum the engine makes (thousands of pods on a node, doubled for duplex,
# times 100 for a score) inside int64, so the array paths cannot overflow.
MAX_BANDWIDTH = 10**15


def parse_bandwidth(value: object, path: str = "") -> Quantity:
    """A bandwidth (bits/s): a quantity, not negative, at most ``MAX_BANDWIDTH``; else ``QuantityError``."""
    quantity = Quantity.parse(value, path)
    if quantity.nanos < 0:
        raise QuantityError(path, value, "negative bandwidth")
    if quantity.nanos > MAX_BANDWIDTH * NANO:
        raise QuantityError(path, value, "out of range: a bandwidth is at most 1P (10^15 bits/s)")
    return quantity


def _validate(value: Any) -> Quantity:
    return Quantity.parse(value)


def _serialize(value: Quantity) -> str:
    return value.text


def _validate_bandwidth(value: Any) -> Quantity:
    return parse_bandwidth(value)


# A bandwidth field (bits/s): as ``QuantityField``, refusing negative values and values above 1P; the CRD
# pattern refuses a minus sign, so the API server rejects negative bandwidths before netaware sees them.
BandwidthField = Annotated[
    Quantity,
    PlainValidator(_validate_bandwidth),
    PlainSerializer(_serialize, return_type=str),
    WithJsonSchema(
        {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "minimum": 0,
            "pattern": QUANTITY_PATTERN.replace(r"^(\+|-)?", r"^\+?"),
            "x-kubernetes-int-or-string": True,
        }
    ),
]

# A pydantic field type: accepts a string or an integer, keeps the text the user wrote,
# and appears in CRD schemas as controller-gen writes resource.Quantity.
QuantityField = Annotated[
    Quantity,
    PlainValidator(_validate),
    PlainSerializer(_serialize, return_type=str),
    WithJsonSchema(
        {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY_PATTERN,
            "x-kubernetes-int-or-string": True,
        }
    ),
]
