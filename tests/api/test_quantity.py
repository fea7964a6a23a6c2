"""Kubernetes resource.Quantity semantics: the edge-case table and property tests."""

from __future__ import annotations

import json
import time
from fractions import Fraction

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from operators.api.quantity import NANO, Format, Quantity, QuantityError, parse_quantity

# (input, value in nanos, canonical form, format) — canonical forms as upstream String() prints them.
VALID = [
    ("0", 0, "0", Format.DECIMAL_SI),
    ("1.5Gi", 1536 * 2**20 * NANO, "1536Mi", Format.BINARY_SI),
    ("100m", 100_000_000, "100m", Format.DECIMAL_SI),
    ("1e-3", 1_000_000, "1e-3", Format.DECIMAL_EXPONENT),
    (".5", 500_000_000, "500m", Format.DECIMAL_SI),
    ("1Ki", 1024 * NANO, "1Ki", Format.BINARY_SI),
    ("1k", 1000 * NANO, "1k", Format.DECIMAL_SI),
    ("1.5G", 1_500_000_000 * NANO, "1500M", Format.DECIMAL_SI),
    ("1000M", 10**9 * NANO, "1G", Format.DECIMAL_SI),
    ("1E6", 10**6 * NANO, "1e6", Format.DECIMAL_EXPONENT),
    ("1.5e3", 1500 * NANO, "1500", Format.DECIMAL_EXPONENT),
    ("12e+3", 12000 * NANO, "12e3", Format.DECIMAL_EXPONENT),
    ("-1.5Gi", -1536 * 2**20 * NANO, "-1536Mi", Format.BINARY_SI),
    ("+1k", 1000 * NANO, "1k", Format.DECIMAL_SI),
    ("0.1Ki", 102_400_000_000, "102400m", Format.BINARY_SI),  # BinarySI below 1024 prints as DecimalSI
    ("1024Ki", 2**20 * NANO, "1Mi", Format.BINARY_SI),
    ("8Ki", 8192 * NANO, "8Ki", Format.BINARY_SI),
    ("1e-10", 1, "1e-9", Format.DECIMAL_EXPONENT),  # below a nano rounds up, never to zero
    ("0.0001n", 1, "1n", Format.DECIMAL_SI),
    ("-0.0001n", -1, "-1n", Format.DECIMAL_SI),  # rounding is away from zero
    ("1.", NANO, "1", Format.DECIMAL_SI),
    ("100M", 10**8 * NANO, "100M", Format.DECIMAL_SI),
    ("10Gi", 10 * 2**30 * NANO, "10Gi", Format.BINARY_SI),
    ("5u", 5000, "5u", Format.DECIMAL_SI),
    ("7Ei", 7 * 2**60 * NANO, "7Ei", Format.BINARY_SI),
    ("9223372036854775807", (2**63 - 1) * NANO, "9223372036854775807", Format.DECIMAL_SI),  # the int64 edge
    ("-9223372036854775807", -(2**63 - 1) * NANO, "-9223372036854775807", Format.DECIMAL_SI),
    ("1e-999999999", 1, "1e-9", Format.DECIMAL_EXPONENT),  # a huge negative exponent is 1n, in microseconds
    ("0e99999999", 0, "0", Format.DECIMAL_EXPONENT),
]

# Beyond int64 (upstream caps BinarySI there and keeps larger decimals as big decimals; we refuse both),
# and the hostile exponents that used to compute 10**99999999 exactly.
OUT_OF_RANGE = [
    "9223372036854775808",
    "-9223372036854775808",
    "8Ei",
    "16Ei",
    "10E",
    "1e19",
    "1e30",
    "1e308",
    "1e9999999",
    "1e99999999",
    "-1e99999999",
    "0.00000000000000000000001e99999999",
]

INVALID = [
    "",
    "10Q",
    "1e",
    "1Ki5",
    "1.1.M",
    "aoeu",
    " 1",
    "1 ",
    ".5i",
    "1i",
    "-3.01e-",
    "1K",
    "1.5.5",
    "1 Gi",
    "Gi",
    ".",
    "-",
    "+",
    "e3",
]


@pytest.mark.parametrize(("text", "nanos", "canonical", "fmt"), VALID, ids=[row[0] or "empty" for row in VALID])
def test_valid_quantities_parse_exactly(text: str, nanos: int, canonical: str, fmt: Format) -> None:
    quantity = parse_quantity(text)
    assert quantity.nanos == nanos
    assert str(quantity) == canonical
    assert quantity.format is fmt
    assert quantity.text == text  # the user's spelling is kept for writing specs back


@pytest.mark.parametrize("text", INVALID)
def test_invalid_quantities_name_the_field_and_the_value(text: str) -> None:
    with pytest.raises(QuantityError) as raised:
        parse_quantity(text, "spec.workloads[3].dependencies[0].minBandwidth")
    message = str(raised.value)
    assert message.startswith("spec.workloads[3].dependencies[0].minBandwidth: not a quantity")
    assert repr(text).replace("'", '"') in message


@pytest.mark.parametrize("text", OUT_OF_RANGE)
def test_values_beyond_int64_are_refused_quickly(text: str) -> None:
    started = time.perf_counter()
    with pytest.raises(QuantityError) as raised:
        parse_quantity(text, "metadata.annotations[kubernetes.io/ingress-bandwidth]")
    elapsed = time.perf_counter() - started
    assert str(raised.value).startswith("metadata.annotations[kubernetes.io/ingress-bandwidth]: out of range")
    assert json.dumps(text) in str(raised.value)
    assert elapsed < 0.05, elapsed  # a bound on a hang (10**99999999 took minutes), not a benchmark


def test_long_strings_are_refused_before_parsing() -> None:
    for text in ("1" * 65, "1" * 5000, "0." + "0" * 10_000 + "1", "1" * 100_000 + "k"):
        with pytest.raises(QuantityError, match="longer than 64 characters"):
            parse_quantity(text, "x")
    assert parse_quantity("0." + "0" * 61 + "1").nanos == 1  # 64 characters still parse


def test_integers_beyond_int64_are_refused() -> None:
    assert parse_quantity(2**63 - 1).value() == 2**63 - 1
    with pytest.raises(QuantityError, match="out of range"):
        parse_quantity(2**63)
    with pytest.raises(QuantityError, match="out of range"):
        parse_quantity(-(10**5000))  # no int-to-string conversion error either


def test_binary_and_decimal_kilo_differ() -> None:
    assert parse_quantity("1Ki") > parse_quantity("1k")
    assert parse_quantity("1Ki").value() == 1024
    assert parse_quantity("1k").value() == 1000


def test_integers_are_read_as_in_int_or_string_fields() -> None:
    assert parse_quantity(100) == parse_quantity("100")
    with pytest.raises(QuantityError):
        parse_quantity(1.5)
    with pytest.raises(QuantityError):
        parse_quantity(True)


def test_value_rounds_up_away_from_zero() -> None:
    assert parse_quantity("100m").value() == 1
    assert parse_quantity("-100m").value() == -1
    assert parse_quantity("1.5").milli_value() == 1500
    assert parse_quantity("1n").milli_value() == 1


def test_arithmetic_is_exact_and_keeps_the_receivers_format() -> None:
    total = parse_quantity("0.1") + parse_quantity("0.2")
    assert total == parse_quantity("0.3")  # no float rounding
    assert str(parse_quantity("1Gi") + parse_quantity("512Mi")) == "1536Mi"
    assert str(parse_quantity("1G") - parse_quantity("1Gi")) == "-73741824"
    assert str(parse_quantity("0") + parse_quantity("1Gi")) == "1Gi"  # a zero receiver takes the other format
    assert parse_quantity("100M") * 3 == parse_quantity("300M")
    assert sum([parse_quantity("1M"), parse_quantity("2M")], Quantity(0)) == parse_quantity("3M")


# --- property tests -----------------------------------------------------------------------------

decimal_suffixes = st.sampled_from(["n", "u", "m", "", "k", "M", "G", "T", "P", "E"])
binary_suffixes = st.sampled_from(["Ki", "Mi", "Gi", "Ti", "Pi"])


@st.composite
def quantity_texts(draw: st.DrawFn) -> str:
    sign = draw(st.sampled_from(["", "-", "+"]))
    whole = draw(st.integers(min_value=0, max_value=10**12))
    fraction = draw(st.one_of(st.just(""), st.integers(min_value=0, max_value=999_999).map(lambda n: f".{n}")))
    suffix = draw(
        st.one_of(decimal_suffixes, binary_suffixes, st.integers(min_value=-9, max_value=18).map(lambda e: f"e{e}"))
    )
    return f"{sign}{whole}{fraction}{suffix}"


SUFFIX_VALUE = {
    **{suffix: Fraction(10) ** power for suffix, power in [("n", -9), ("u", -6), ("m", -3), ("", 0), ("k", 3)]},
    **{suffix: Fraction(10) ** power for suffix, power in [("M", 6), ("G", 9), ("T", 12), ("P", 15), ("E", 18)]},
    **{suffix: Fraction(2) ** power for suffix, power in [("Ki", 10), ("Mi", 20), ("Gi", 30), ("Ti", 40), ("Pi", 50)]},
}


def exact_value(text: str) -> Fraction:
    """The rational value of a generated quantity, computed independently of the parser."""
    if "e" in text:
        mantissa, exponent = text.split("e")
        return Fraction(mantissa) * Fraction(10) ** int(exponent)
    suffix = max((s for s in SUFFIX_VALUE if s and text.endswith(s)), key=len, default="")
    return Fraction(text[: len(text) - len(suffix)]) * SUFFIX_VALUE[suffix]


def in_range(text: str) -> bool:
    return abs(exact_value(text)) <= 2**63 - 1


@given(quantity_texts())
def test_range_is_exactly_int64(text: str) -> None:
    if in_range(text):
        assert parse_quantity(text).nanos == pytest.approx(int(exact_value(text) * NANO), abs=1)
    else:
        with pytest.raises(QuantityError, match="out of range"):
            parse_quantity(text)


@given(quantity_texts())
def test_canonical_form_round_trips(text: str) -> None:
    assume(in_range(text))
    quantity = parse_quantity(text)
    again = parse_quantity(str(quantity))
    assert again == quantity
    assert str(again) == str(quantity)  # canonical is a fixed point


@given(quantity_texts(), quantity_texts())
def test_ordering_matches_exact_rational_values(left: str, right: str) -> None:
    assume(in_range(left) and in_range(right))
    a, b = parse_quantity(left), parse_quantity(right)
    assert (a < b) == (a.nanos < b.nanos)
    assert (a == b) == (a.nanos == b.nanos)
    assert (a + b) - b == a


@given(st.integers(min_value=-(10**15), max_value=10**15))
def test_whole_numbers_round_trip_in_every_format(number: int) -> None:
    for fmt in Format:
        quantity = Quantity.of(number, fmt)
        assert parse_quantity(str(quantity)) == quantity
        assert quantity.value() == number
