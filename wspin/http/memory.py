"""Give memory freed by closed connections back to the system.

A TLS connection's buffers live in OpenSSL's allocations, and after a flood closes, glibc
keeps the freed pages of its heap (they sit below live ones, so its own trimming never reaches
them): a process that held a thousand handshakes stays at that size. ``malloc_trim`` returns
them. Elsewhere (musl, macOS) there is no such call, and nothing is done.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable

_trim: Callable[[int], int] | None = None
_looked = False


def release_freed_memory() -> bool:
    """Return the C heap's free pages to the system; False where the C library cannot."""
    global _trim, _looked
    if not _looked:
        _looked = True
        name = ctypes.util.find_library("c")
        if name is not None:
            try:
                _trim = ctypes.CDLL(name).malloc_trim
            except (OSError, AttributeError):
                _trim = None
    if _trim is None:
        return False
    _trim(0)
    return True
