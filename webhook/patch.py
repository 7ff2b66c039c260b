"""JSON Patch ops written as encoded bytes, spliced from values encoded once per configuration.

Every value the injector writes (the image volumes, the mounts, the env pins, the receipt) is
fixed by its configuration, and a review's patch is a dozen or more small ops. Encoding the
values once and splicing bytes per review costs a fraction of building op dicts and encoding
them again for every pod. The bytes are exactly what ``orjson.dumps`` writes for the
equivalent list of ``{"op", "path", "value"}`` dicts, so ``orjson.loads`` gives those dicts
back for callers that want them.

Paths are spliced unescaped: the injector builds them only from fixed field names, integer
indexes and the escaped receipt key, none of which holds a character JSON escapes (``"``,
``\\`` or a control character). ``encoded_path`` checks the fixed parts once, at import.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

Op = bytes
"""Encoded ops: one JSON object ``{"op":…,"path":…[,"value":…]}``, or a comma-joined run
of them (``appends``)."""

_ESCAPED: Final = frozenset('"\\') | frozenset(chr(c) for c in range(0x20))


def encoded_path(path: str) -> bytes:
    """A fixed path part as spliced into an op; refuses any character JSON would escape."""
    if _ESCAPED.intersection(path):
        raise ValueError(f"JSON Patch path {path!r} needs escaping")
    return path.encode()


def add(path: str, value: bytes) -> Op:
    return b'{"op":"add","path":"' + path.encode() + b'","value":' + value + b"}"


def replace(path: str, value: bytes) -> Op:
    return b'{"op":"replace","path":"' + path.encode() + b'","value":' + value + b"}"


def remove(path: str) -> Op:
    return b'{"op":"remove","path":"' + path.encode() + b'"}'


def array(values: Iterable[bytes]) -> bytes:
    """Encoded JSON values as one JSON array."""
    return b"[" + b",".join(values) + b"]"


_ADD = b'{"op":"add","path":"'


class Appends:
    """Fixed values added to one list of a pod: ``field`` under a ``prefix`` chosen per call
    (a container's path, or nothing for ``/spec/volumes``).

    Both forms are encoded once, around the place where the prefix goes, so one review's run
    of pins or mounts costs one ``bytes.join``: one op per value appended to a list that
    exists, or one op that creates the list holding all of them.
    """

    __slots__ = ("_create", "_extend")

    def __init__(self, field: str, values: Sequence[bytes]) -> None:
        if not values:
            raise ValueError("a run of appends needs at least one value")
        tail = encoded_path(field)
        each = [tail + b'/-","value":' + value + b"}" for value in values]
        self._extend = [_ADD, *(op + b"," + _ADD for op in each[:-1]), each[-1]]
        self._create = [_ADD, tail + b'","value":' + array(values) + b"}"]

    def extend(self, prefix: bytes) -> Op:
        """Append every value to the list at ``prefix + field``, which exists."""
        return prefix.join(self._extend)

    def create(self, prefix: bytes) -> Op:
        """Add the list at ``prefix + field``, which is absent, holding every value."""
        return prefix.join(self._create)


def subsets(names: Sequence[str]) -> list[tuple[str, ...]]:
    """Every non-empty subset of ``names``, each in the order of ``names``."""
    return [
        tuple(name for bit, name in enumerate(names) if mask >> bit & 1)
        for mask in range(1, 1 << len(names))
    ]
