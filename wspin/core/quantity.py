"""Kubernetes resource quantities (``2``, ``500m``, ``1.5``, ``512Mi``, ``1e3``), read exactly
as the API server's ``resource.Quantity`` reads them. Pure.

The grammar (``k8s.io/apimachinery/pkg/api/resource``)::

    quantity        ::= signedNumber suffix
    signedNumber    ::= number | sign number          sign ::= "+" | "-"
    number          ::= digits | digits "." digits | digits "." | "." digits
    suffix          ::= binarySI | decimalSI | decimalExponent
    binarySI        ::= Ki | Mi | Gi | Ti | Pi | Ei
    decimalSI       ::= n | u | m | "" | k | M | G | T | P | E
    decimalExponent ::= ("e" | "E") signedDigits

Values are exact (``Fraction``); like the API server, a value finer than a nano-unit is
rounded up to one nano-unit and a magnitude above 2^63-1 is capped there. What a field may
ask for (positive, under a cap, whole bytes) is the policy of whoever reads the field: the
Workspace validator, the pod builder, the tenant quota.
"""

from __future__ import annotations

import functools
import math
import re
from fractions import Fraction
from typing import Final

MAX_QUANTITY_LENGTH: Final = 64
"""Longer text is refused before parsing: real quantities are a few characters, and the bound
keeps hostile input cheap (the API server caps the canonical value the same way)."""

MAX_VALUE: Final = Fraction(2**63 - 1)
"""The largest magnitude a quantity holds; larger values are capped to it."""

_NANO: Final = Fraction(1, 10**9)

_BINARY: Final = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL: Final = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY = re.compile(
    r"(?P<sign>[+-]?)(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTP]|E|[eE][+-]?[0-9]+)?",
    re.ASCII,
)
# An exponent past this many digits' worth is capped (or rounded to a nano) without computing
# 10**exponent: "1e999999999" is a valid quantity, and must not cost a huge power of ten.
_EXPONENT_BOUND: Final = 40


class QuantityError(ValueError):
    """The text is not a Kubernetes quantity; the message says what is wrong."""


def parse_quantity(text: object) -> Fraction:
    """The exact value of the quantity ``text``; ``QuantityError`` when it is not one.

    A JSON number is read as its text, as ``Quantity``'s JSON decoding does (``2`` is ``"2"``);
    a boolean, a non-finite float or any other type is not a quantity."""
    return _parse(_text(text))


def _text(text: object) -> str:
    if type(text) is str:
        return text
    if isinstance(text, bool) or not isinstance(text, str | int | float):
        raise QuantityError(f"{text!r} is not a quantity (expected a string like '500m')")
    if isinstance(text, float) and not math.isfinite(text):
        raise QuantityError(f"{text!r} is not a quantity")
    return text if isinstance(text, str) else repr(text)


@functools.lru_cache(maxsize=4096)
def _parse(text: str) -> Fraction:
    # Pods and Workspaces repeat a handful of strings ("500m", "512Mi"), and the tenant quota
    # reads every request of every pod it admits and watches. Bounded: hostile input cannot
    # grow the cache.
    if len(text) > MAX_QUANTITY_LENGTH:
        raise QuantityError(
            f"{text[:16]!r}... is {len(text)} characters; a quantity has at most "
            f"{MAX_QUANTITY_LENGTH}"
        )
    match = _QUANTITY.fullmatch(text)
    if match is None:
        raise QuantityError(
            f"{text!r} is not a quantity (write it like '2', '500m', '1.5', '512Mi' or '1e3')"
        )
    number = Fraction(match["number"])
    suffix = match["suffix"] or ""
    if suffix in _BINARY:
        value = number * _BINARY[suffix]
    elif suffix in _DECIMAL:
        value = number * _DECIMAL[suffix]
    else:
        value = _scaled(number, int(suffix[1:]))
    value = _bounded(value)
    return -value if match["sign"] == "-" else value


def _scaled(number: Fraction, exponent: int) -> Fraction:
    """``number`` times 10^``exponent`` without building an absurd power of ten."""
    if number == 0:
        return number
    if exponent > _EXPONENT_BOUND:
        return MAX_VALUE
    if exponent < -_EXPONENT_BOUND:
        return _NANO
    return number * Fraction(10) ** exponent


def _bounded(value: Fraction) -> Fraction:
    """Capped at ``MAX_VALUE``; a non-zero value finer than a nano-unit rounded up to one."""
    if value > MAX_VALUE:
        return MAX_VALUE
    if value and (value / _NANO).denominator != 1:
        return Fraction(math.ceil(value / _NANO), 10**9)
    return value


def millicores(text: object) -> int:
    """A CPU quantity in whole millicores, rounded up (``MilliValue``: ``1.5`` → 1500,
    ``100u`` → 1)."""
    return _rounded_up(_text(text), 1000)


def byte_count(text: object) -> int:
    """A memory or storage quantity in whole bytes, rounded up (``1Ki`` → 1024)."""
    return _rounded_up(_text(text), 1)


@functools.lru_cache(maxsize=4096)
def _rounded_up(text: str, unit: int) -> int:
    # Cached like _parse: the tenant quota sums every request of every pod it admits, and
    # the Fraction arithmetic costs more than the lookup.
    return math.ceil(_parse(text) * unit)


def is_whole(text: object) -> bool:
    """Whether the quantity is a whole number of its base unit (bytes, for memory): ``500m``
    of memory is half a byte, almost always a mistake for ``500Mi``."""
    return parse_quantity(text).denominator == 1


def multiply(text: str, factor: int) -> str:
    """The quantity ``text`` times ``factor``, written with the same suffix
    (by 4: ``500m`` → ``2000m``, ``1Gi`` → ``4Gi``, ``1.5`` → ``6``)."""
    parse_quantity(text)  # QuantityError for anything that is not a quantity
    match = _QUANTITY.fullmatch(text)
    assert match is not None  # parse_quantity accepted it
    number = Fraction(match["number"]) * factor
    written = str(number.numerator) if number.denominator == 1 else _decimal(number)
    return f"{match['sign']}{written}{match['suffix'] or ''}"


def _decimal(number: Fraction) -> str:
    """A fraction whose denominator divides a power of ten, in plain decimal notation."""
    places = 0
    while (number * 10**places).denominator != 1:
        places += 1
    scaled = number * 10**places
    text = str(scaled.numerator).rjust(places + 1, "0")
    return f"{text[:-places]}.{text[-places:]}".rstrip("0").rstrip(".")
