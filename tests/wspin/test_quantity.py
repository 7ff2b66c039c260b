"""Kubernetes quantities, read as the API server's resource.Quantity reads them."""

from __future__ import annotations

from fractions import Fraction

import pytest

from wspin.core.quantity import (
    MAX_VALUE,
    QuantityError,
    byte_count,
    is_whole,
    millicores,
    multiply,
    parse_quantity,
)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("2", Fraction(2)),
        ("2000m", Fraction(2)),
        ("1.5", Fraction(3, 2)),
        ("0.5", Fraction(1, 2)),
        (".5", Fraction(1, 2)),
        ("5.", Fraction(5)),
        ("0", Fraction(0)),
        ("+1", Fraction(1)),
        ("-1", Fraction(-1)),
        ("100u", Fraction(1, 10**4)),
        ("1n", Fraction(1, 10**9)),
        ("1k", Fraction(1000)),
        ("1M", Fraction(10**6)),
        ("1G", Fraction(10**9)),
        ("1T", Fraction(10**12)),
        ("1P", Fraction(10**15)),
        ("1E", Fraction(10**18)),
        ("1Ki", Fraction(1024)),
        ("512Mi", Fraction(512 * 2**20)),
        ("4Gi", Fraction(4 * 2**30)),
        ("1.5Gi", Fraction(3 * 2**29)),
        ("1Ti", Fraction(2**40)),
        ("1Pi", Fraction(2**50)),
        ("1Ei", Fraction(2**60)),
        ("1e3", Fraction(1000)),
        ("1E3", Fraction(1000)),
        ("1e+3", Fraction(1000)),
        ("1e-3", Fraction(1, 1000)),
        ("1.0e3", Fraction(1000)),
        ("128974848", Fraction(128974848)),
        ("9223372036854775807", MAX_VALUE),
    ],
)
def test_quantities_the_api_server_accepts_have_their_exact_value(
    text: str, value: Fraction
) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0.0000000001", Fraction(1, 10**9)),  # finer than a nano-unit: one nano-unit
        ("1e-30", Fraction(1, 10**9)),
        ("9223372036854775808", MAX_VALUE),  # above 2^63-1: capped
        ("16Ei", MAX_VALUE),
        ("1e100", MAX_VALUE),
        ("1e999999999", MAX_VALUE),  # no power of ten is built for it
        ("0e999999999", Fraction(0)),
    ],
)
def test_values_out_of_range_are_rounded_and_capped_like_the_api_server(
    text: str, value: Fraction
) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize(
    "text",
    [
        "",
        " 1",
        "1 ",
        "1.2.3",
        "5 Mi",
        "Mi",
        ".",
        "1x",
        "1KI",
        "1ki",
        "1mi",
        "1e",
        "e3",
        "1e3.5",
        "--1",
        "+-1",
        "0x10",
        "1_000",
        "\u0661",  # an Arabic-Indic digit one
        "1" * 65,
        "inf",
        "NaN",
    ],
)
def test_text_that_is_not_a_quantity_is_refused_saying_so(text: str) -> None:
    with pytest.raises(QuantityError, match="quantity"):
        parse_quantity(text)


@pytest.mark.parametrize(("value", "expected"), [(2, Fraction(2)), (0.5, Fraction(1, 2))])
def test_a_json_number_is_read_as_its_text(value: object, expected: Fraction) -> None:
    assert parse_quantity(value) == expected


@pytest.mark.parametrize("value", [True, None, [1], float("inf"), float("nan")])
def test_other_types_are_not_quantities(value: object) -> None:
    with pytest.raises(QuantityError, match="not a quantity"):
        parse_quantity(value)


@pytest.mark.parametrize(
    ("text", "millis"),
    [("500m", 500), ("1", 1000), ("2", 2000), ("1.5", 1500), ("0.001", 1), ("100u", 1)],
)
def test_cpu_is_whole_millicores_rounded_up(text: str, millis: int) -> None:
    assert millicores(text) == millis


@pytest.mark.parametrize(
    ("text", "count"), [("512Mi", 512 * 2**20), ("1G", 10**9), ("1e3", 1000), ("500m", 1)]
)
def test_memory_is_whole_bytes_rounded_up(text: str, count: int) -> None:
    assert byte_count(text) == count


def test_half_a_byte_is_not_whole() -> None:
    assert is_whole("1.5Gi") and is_whole("1e3") and is_whole("2")
    assert not is_whole("500m") and not is_whole("0.5")


@pytest.mark.parametrize(
    ("text", "factor", "expected"),
    [
        ("500m", 4, "2000m"),
        ("1Gi", 4, "4Gi"),
        ("2", 4, "8"),
        ("1.5", 4, "6"),
        ("0.3", 4, "1.2"),
        ("1.25Gi", 4, "5Gi"),
        ("1e3", 4, "4e3"),
        (".5", 3, "1.5"),
    ],
)
def test_a_multiple_keeps_the_suffix(text: str, factor: int, expected: str) -> None:
    assert multiply(text, factor) == expected
    assert parse_quantity(expected) == parse_quantity(text) * factor


def test_a_multiple_of_a_non_quantity_is_refused() -> None:
    with pytest.raises(QuantityError):
        multiply("lots", 4)


def test_hostile_exponents_are_capped_without_computing_them() -> None:
    # 10**(10**9) would take minutes and gigabytes; the test would hit its timeout.
    for exponent in range(10**9, 10**9 + 200):
        assert parse_quantity(f"1e{exponent}") == MAX_VALUE
        assert parse_quantity(f"1e-{exponent}") == Fraction(1, 10**9)
