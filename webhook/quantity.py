"""Kubernetes resource quantities (``500m``, ``1.5``, ``512Mi``, ``1G``, ``1e3``) as integers.

Pure. The tenant quota sums pod requests, which the API server has already validated as
quantities, so this parser accepts the full quantity grammar; it returns exact integer
millicores and bytes (rounded up, as the scheduler does for fractional millicores).
"""

from __future__ import annotations

import functools
import re
from fractions import Fraction
from typing import Final

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
# The API server caps quantities at 2^63-1 in their canonical form; 64 characters is far
# above any real value and keeps the regex linear on hostile input.
MAX_QUANTITY_LENGTH: Final = 64
_QUANTITY = re.compile(
    r"^([+-]?)([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]{1,3})?$"
)


def parse_quantity(value: object) -> Fraction:
    """The quantity's exact value, or ValueError naming what is wrong."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a quantity")
    if isinstance(value, int | float):
        return Fraction(value)
    if not isinstance(value, str) or len(value) > MAX_QUANTITY_LENGTH:
        raise ValueError(f"{value!r} is not a quantity")
    match = _QUANTITY.match(value)
    if match is None:
        raise ValueError(f"{value!r} is not a quantity")
    sign, number, suffix = match.groups()
    amount = Fraction(number)
    if suffix is None:
        scale = Fraction(1)
    elif suffix in _BINARY:
        scale = Fraction(_BINARY[suffix])
    elif suffix in _DECIMAL:
        scale = _DECIMAL[suffix]
    else:
        scale = Fraction(10) ** int(suffix[1:])
    result = amount * scale
    return -result if sign == "-" else result


def millicores(value: object) -> int:
    """CPU as whole millicores, rounded up."""
    return _millicores(value) if isinstance(value, str) else _ceil(parse_quantity(value) * 1000)


def byte_count(value: object) -> int:
    """Memory as whole bytes, rounded up."""
    return _bytes(value) if isinstance(value, str) else _ceil(parse_quantity(value))


# Pods repeat a handful of request strings ("500m", "512Mi"), so answers are cached: the quota
# reads every request of every pod it admits and watches. Bounded, so hostile input cannot
# grow it.
@functools.lru_cache(maxsize=4096)
def _millicores(value: str) -> int:
    return _ceil(parse_quantity(value) * 1000)


@functools.lru_cache(maxsize=4096)
def _bytes(value: str) -> int:
    return _ceil(parse_quantity(value))


def _ceil(q: Fraction) -> int:
    return -((-q.numerator) // q.denominator)
