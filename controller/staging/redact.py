"""Redaction of staged keys from everything the controller emits.

Each staged plaintext is a *group* of exact values: the raw key, its standard base64, its
URL-safe base64 (padded and unpadded), and their JSON-escaped forms, once and twice (a JSON
log line renders a key holding a quote or a non-ASCII character escaped, a Go router's error
body escapes it its own way, and an exact-match rule on the raw form alone would miss both).
Groups are keyed by ``group_id(envelope)``, registered at seal time and dropped when the
envelope is superseded, revoked or cleaned up.

The same engine is registered with ``wspin.core.logs.add_scrubber`` (every rendered log line) and
applied to every Event and condition message the staging pass writes.

One engine per process, shared by all passes (it is the logger's view of what is secret);
a lock guards it because logging may render from any thread.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from typing import Final

REPLACEMENT: Final = "[REDACTED-STAGED-KEY]"
GROUP_PREFIX: Final = "staged:"
MIN_SECRET_LENGTH: Final = 4
"""Shorter values are not registered: redacting a 1 to 3 character string would shred every
log line while protecting nothing a brute force would not find anyway."""


def group_id(envelope: str) -> str:
    """``staged:`` + unpadded base64url of the first 12 bytes of SHA-256(envelope)."""
    digest = hashlib.sha256(envelope.encode()).digest()[:12]
    return GROUP_PREFIX + base64.urlsafe_b64encode(digest).decode().rstrip("=")


def _escaped(value: str) -> set[str]:
    """``value`` inside a JSON string as we write it (non-ASCII as ``\\uXXXX``) and as Go's
    encoding/json writes it (router bodies: non-ASCII raw, ``<``, ``>``, ``&`` escaped)."""
    utf8 = json.dumps(value, ensure_ascii=False)[1:-1]
    go = utf8.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return {json.dumps(value)[1:-1], utf8, go}


def forms(secret: str) -> set[str]:
    """Every form of ``secret`` that can show up in our output: raw, base64 (standard and
    URL-safe, padded or not), JSON-escaped, and escaped twice (a router's JSON error body
    quoted inside a JSON log line). For a key of plain ASCII letters, digits, ``-`` and
    ``_`` the escaped forms are the raw one."""
    raw = secret.encode()
    standard = base64.b64encode(raw).decode()
    urlsafe = base64.urlsafe_b64encode(raw).decode()
    values = {secret, standard, urlsafe, standard.rstrip("="), urlsafe.rstrip("=")}
    once = {escaped for value in values for escaped in _escaped(value)}
    twice = {escaped for value in once for escaped in _escaped(value)}
    return {v for v in values | once | twice if len(v) >= MIN_SECRET_LENGTH}


PREFIX_LENGTH: Final = 16
"""Values at least this long are found through an index of their first 16 characters; real
keys share long prefixes (``sk-proj-``, and their base64 forms), so a short index would put
thousands of candidates behind one entry."""


class Redactor:
    """Exact-value rules by group; ``redact`` replaces every registered value, longest first
    (so a base64 form that contains a shorter registered value is still removed whole).

    Every log line of the process passes through here, so matching is a dictionary lookup per
    position (long values by their first ``PREFIX_LENGTH`` characters, short ones by length)
    rather than one regex alternation that would try every value at every position.
    """

    def __init__(self) -> None:
        self._groups: dict[str, frozenset[str]] = {}
        self._lock = threading.Lock()
        self._index: _Index | None = None

    def register(self, group: str, secret: str) -> None:
        """Add (or replace) ``group``'s values; idempotent for the same secret."""
        values = frozenset(forms(secret))
        with self._lock:
            if self._groups.get(group) == values:
                return
            self._groups[group] = values
            self._index = None

    def unregister(self, group: str) -> None:
        with self._lock:
            if self._groups.pop(group, None) is not None:
                self._index = None

    def groups(self) -> frozenset[str]:
        with self._lock:
            return frozenset(self._groups)

    def redact(self, text: str) -> str:
        """``text`` with every registered value replaced by ``REPLACEMENT``."""
        index = self._current_index()
        if index.empty:
            return text
        pieces: list[str] = []
        start = position = 0
        while position <= len(text) - MIN_SECRET_LENGTH:
            length = index.match(text, position)
            if not length:
                position += 1
                continue
            pieces += (text[start:position], REPLACEMENT)
            position = start = position + length
        pieces.append(text[start:])
        return "".join(pieces)

    def _current_index(self) -> _Index:
        with self._lock:
            if self._index is None:
                self._index = _Index({v for group in self._groups.values() for v in group})
            return self._index


class _Index:
    """The registered values, arranged for a lookup per text position."""

    def __init__(self, values: set[str]) -> None:
        self.long: dict[str, list[str]] = {}
        for value in sorted((v for v in values if len(v) >= PREFIX_LENGTH), key=len, reverse=True):
            self.long.setdefault(value[:PREFIX_LENGTH], []).append(value)
        self.short: list[tuple[int, frozenset[str]]] = [
            (length, frozenset(v for v in values if len(v) == length))
            for length in sorted({len(v) for v in values if len(v) < PREFIX_LENGTH}, reverse=True)
        ]
        self.empty = not values

    def match(self, text: str, position: int) -> int:
        """The length of the longest value starting at ``position``, 0 when none does."""
        for value in self.long.get(text[position : position + PREFIX_LENGTH], ()):
            if text.startswith(value, position):
                return len(value)
        for length, values in self.short:
            if text[position : position + length] in values:
                return length
        return 0
