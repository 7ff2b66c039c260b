"""Redaction: registered secrets out of every log line, Event and condition message, and
credentials out of URLs a user wrote.

``Redactor`` holds the process's secrets, each under a group name (the controller's internal
token, each staged provider key), and ``redact(text)`` replaces every occurrence of any of
them with ``REPLACEMENT``. A secret is found in every form our output can carry it:

- as written, and in base64 (standard and URL-safe, padded or not): keys travel encoded;
- JSON-escaped once or twice, as we write it (non-ASCII as ``\\u00fc``) and as Go's
  encoding/json writes it (non-ASCII raw, ``<>&`` as ``\\u003c``...): a router's JSON error
  body quoted inside a JSON log line is escaped twice;
- percent-encoded, character by character in any mix, either hex case, ``+`` for a space,
  and encoded twice (``%2522``): messages quote redirect targets and request URLs that
  other systems chose.

Matching decodes the text as it walks a trie of the secrets in one pass, so the cost per
character does not grow with the number of secrets (thousands of staged keys sharing a
``sk-proj-`` prefix), and no regex alternation tries every secret at every position. Every
span that decodes to a secret is replaced, overlapping spans as one.

``strip_url_credentials`` is the other half: text a tenant wrote (a package source, a
registry URL) may carry ``user:token@`` in a URL; it becomes ``***@`` before the text reaches
a log line, an Event or a condition.

Pure, apart from the lock: logging may render from any thread.
"""

from __future__ import annotations

import base64
import re
import threading
from collections.abc import Iterable
from typing import Final

REPLACEMENT: Final = "[redacted]"

MIN_SECRET_LENGTH: Final = 4
"""Shorter values are not registered: redacting a 1 to 3 character string would shred every
log line while protecting nothing a brute force would not find anyway."""

_JSON_ESCAPES: Final = {
    '"': '"',
    "\\": "\\",
    "/": "/",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
}
_HEX: Final = frozenset("0123456789abcdefABCDEF")
_PREFIX: Final = 8
"""Characters of each value the start search looks for: enough that ordinary words rarely
start a walk through the trie."""


def encoded_forms(secret: str) -> tuple[str, ...]:
    """The values registered for ``secret``: the text and its base64 encodings. (Escaped and
    percent-encoded forms need no registration: the matcher decodes them as it reads.)"""
    raw = secret.encode()
    standard = base64.b64encode(raw).decode()
    urlsafe = base64.urlsafe_b64encode(raw).decode()
    values = {secret, standard, urlsafe, standard.rstrip("="), urlsafe.rstrip("=")}
    return tuple(sorted(v for v in values if len(v) >= MIN_SECRET_LENGTH))


class Redactor:
    """The secrets of one process, by group; ``redact`` replaces them in any text.

    One per process, shared by everything that emits text: ``wspin.core.logs.add_scrubber``
    gets its ``redact`` for every log line, and Event and condition writers call it too.
    """

    def __init__(self) -> None:
        self._groups: dict[str, tuple[str, ...]] = {}
        self._lock = threading.Lock()
        self._trie: _Trie | None = None

    def register(self, group: str, secret: str) -> None:
        """Add (or replace) ``group``'s secret; idempotent for the same secret. A secret
        shorter than ``MIN_SECRET_LENGTH`` is not registered."""
        values = encoded_forms(secret)
        with self._lock:
            if self._groups.get(group) == values:
                return
            self._groups[group] = values
            self._trie = None

    def unregister(self, group: str) -> None:
        """Forget ``group``'s secret (a no-op for an unknown group)."""
        with self._lock:
            if self._groups.pop(group, None) is not None:
                self._trie = None

    def groups(self) -> frozenset[str]:
        """The registered group names."""
        with self._lock:
            return frozenset(self._groups)

    def redact(self, text: str) -> str:
        """``text`` with every registered secret, in any of its forms, replaced."""
        trie = self._current_trie()
        if trie.empty:
            return text
        spans = trie.matches(text)
        if not spans:
            return text
        pieces: list[str] = []
        kept = 0
        for start, end in spans:
            pieces += (text[kept:start], REPLACEMENT)
            kept = end
        pieces.append(text[kept:])
        return "".join(pieces)

    def _current_trie(self) -> _Trie:
        with self._lock:
            if self._trie is None:
                self._trie = _Trie(v for values in self._groups.values() for v in values)
            return self._trie


class _Node:
    __slots__ = ("next", "terminal")

    def __init__(self) -> None:
        self.next: dict[str, _Node] = {}
        self.terminal = False


class _Trie:
    """The registered values as a character trie, read through the decoders below."""

    def __init__(self, values: Iterable[str]) -> None:
        self.root = _Node()
        prefixes: set[str] = set()
        for value in values:
            node = self.root
            for char in value:
                node = node.next.setdefault(char, _Node())
            node.terminal = True
            prefixes.add(value[:_PREFIX])
        self.empty = not prefixes
        # Where a match can start: the first characters of a value, in any form the decoders
        # read. A C-level search finds them, so a line holding none costs one regex scan.
        self.starts = re.compile(
            "|".join("".join(_char_pattern(char) for char in prefix) for prefix in prefixes)
        )

    def matches(self, text: str) -> list[tuple[int, int]]:
        """The spans of ``text`` that decode to a registered value, overlapping ones merged,
        in order.

        One pass from left to right keeps, for each position ahead, the trie nodes partial
        matches will be at when they get there (with the earliest start for each node: its
        match covers the later ones'), so the work per character is bounded by the secrets'
        length, however the text is built."""
        spans: list[tuple[int, int]] = []
        ahead: dict[int, dict[_Node, int]] = {}
        position = 0
        while position < len(text):
            states = ahead.pop(position, None)
            if states is None:
                if not ahead:
                    found = self.starts.search(text, position)
                    if found is None:
                        break
                    position = found.start()
                states = {}
            states.setdefault(self.root, position)
            for char, length in _units(text, position):
                end = position + length
                for node, start in states.items():
                    child = node.next.get(char)
                    if child is None:
                        continue
                    if child.terminal:
                        spans.append((start, end))
                    if child.next:
                        slot = ahead.setdefault(end, {})
                        if slot.get(child, end) > start:
                            slot[child] = start
            position += 1
        return _merged(spans)


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``spans`` sorted, with overlapping ones joined: everything any match covered."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def _char_pattern(char: str) -> str:
    """A regex for every text ``_units`` reads as ``char``."""
    forms = [re.escape(char)]
    if char == " ":
        forms.append(r"\+")
    forms.append("".join(f"%(?:25)?{_hex_pattern(byte, 2)}" for byte in char.encode()))
    for letter, meaning in _JSON_ESCAPES.items():
        if meaning != char:
            continue
        forms.append(re.escape("\\" + letter))  # escaped once
        if letter in ('"', "\\", "/"):
            forms.append(re.escape("\\\\\\" + letter))  # twice: both backslashes escaped
        if letter not in ('"', "\\"):
            forms.append(re.escape("\\\\" + letter))  # twice: the letter as it was
    units = char.encode("utf-16-be")
    codes = [int.from_bytes(units[i : i + 2], "big") for i in range(0, len(units), 2)]
    for marker in (r"\\u", r"\\\\u"):
        forms.append("".join(marker + _hex_pattern(code, 4) for code in codes))
    return "(?:" + "|".join(forms) + ")"


def _hex_pattern(number: int, digits: int) -> str:
    """``number`` in hex, each letter digit matching either case."""
    text = f"{number:0{digits}x}"
    return "".join(f"[{d}{d.upper()}]" if d.isalpha() else d for d in text)


def _units(text: str, position: int) -> list[tuple[str, int]]:
    """Every character the text at ``position`` can stand for, with the text it takes: the
    character itself, and what a ``+``, a percent-encoding or a JSON escape there decodes to."""
    if position >= len(text):
        return []
    char = text[position]
    units = [(char, 1)]
    if char == "+":
        units.append((" ", 1))
    elif char == "%":
        units += _percent_units(text, position)
    elif char == "\\":
        units += _escape_units(text, position)
    return units


def _percent_byte(text: str, position: int) -> list[tuple[int, int]]:
    """The byte a ``%XX`` (or ``%25XX``, encoded twice) at ``position`` stands for."""
    found: list[tuple[int, int]] = []
    if text.startswith("%", position):
        hex_digits = text[position + 1 : position + 3]
        if len(hex_digits) == 2 and set(hex_digits) <= _HEX:
            found.append((int(hex_digits, 16), 3))
        if text[position + 1 : position + 3] == "25":
            hex_digits = text[position + 3 : position + 5]
            if len(hex_digits) == 2 and set(hex_digits) <= _HEX:
                found.append((int(hex_digits, 16), 5))
    return found


def _percent_units(text: str, position: int) -> list[tuple[str, int]]:
    """The characters a run of percent-encoded UTF-8 bytes at ``position`` decodes to."""
    units: list[tuple[str, int]] = []
    for first, length in _percent_byte(text, position):
        size = 1 if first < 0x80 else 2 if first >> 5 == 6 else 3 if first >> 4 == 14 else 4
        partial = [(bytes([first]), length)]
        for _ in range(size - 1):
            partial = [
                (got + bytes([byte]), taken + more)
                for got, taken in partial
                for byte, more in _percent_byte(text, position + taken)
            ]
        for got, taken in partial:
            try:
                decoded = got.decode()
            except UnicodeDecodeError:
                continue
            units.append((decoded, taken))
    return units


def _escape_units(text: str, position: int) -> list[tuple[str, int]]:
    """The character a JSON escape at ``position`` stands for, escaped once (``\\"``,
    ``\\u00fc``) or twice (``\\\\\\"``, ``\\\\u00fc``)."""
    units: list[tuple[str, int]] = []
    nxt = text[position + 1 : position + 2]
    if nxt in _JSON_ESCAPES:
        units.append((_JSON_ESCAPES[nxt], 2))
    elif nxt == "u":
        units += _unicode_escape(text, position, "\\u")
    if nxt == "\\":
        # Escaped twice: the backslash of the inner escape is itself escaped.
        inner = text[position + 2 : position + 4]
        if inner in ('\\"', "\\\\", "\\/"):
            units.append((inner[1], 4))
        elif inner[:1] in _JSON_ESCAPES and inner[:1] not in ('"', "\\"):
            units.append((_JSON_ESCAPES[inner[:1]], 3))
        elif inner[:1] == "u":
            units += _unicode_escape(text, position, "\\\\u")
    return units


def _unicode_escape(text: str, position: int, marker: str) -> list[tuple[str, int]]:
    """A ``\\u`` escape of four hex digits (``marker`` is its lead-in); a surrogate pair is
    one character."""
    digits = text[position + len(marker) : position + len(marker) + 4]
    if not text.startswith(marker, position) or len(digits) != 4 or not set(digits) <= _HEX:
        return []
    code = int(digits, 16)
    taken = len(marker) + 4
    if 0xD800 <= code < 0xDC00:
        low_start = position + taken
        low = text[low_start + len(marker) : low_start + len(marker) + 4]
        if text.startswith(marker, low_start) and len(low) == 4 and set(low) <= _HEX:
            low_code = int(low, 16)
            if 0xDC00 <= low_code < 0xE000:
                pair = 0x10000 + ((code - 0xD800) << 10) + (low_code - 0xDC00)
                return [(chr(pair), taken * 2)]
        return []
    return [(chr(code), taken)]


# -- credentials in URLs ---------------------------------------------------------------------

# The userinfo runs to the last "@" before the authority ends (the first "/", "?", "#",
# whitespace or quote): a password with a raw "@" is taken whole, as URL parsers take it.
_URL_USERINFO = re.compile(
    r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<userinfo>[^\s/?#'\"<>\\]*)@", re.ASCII
)


def strip_url_credentials(text: str) -> str:
    """``text`` with the user and password of every URL in it replaced by ``***``:
    ``https://user:token@host/x`` → ``https://***@host/x``, ``git+https://...`` alike.

    For values a tenant wrote (``spec.packages``, registry URLs) on their way into a log line,
    an Event or a condition; the rest of the text is kept so the message still says which
    source was meant."""
    if "://" not in text:
        return text  # most text: no URL at all, no regex walk
    return _URL_USERINFO.sub(lambda m: f"{m.group('scheme')}***@", text)
