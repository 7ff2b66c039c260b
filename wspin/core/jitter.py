"""Jitter fixed by an identity: the fraction in [0, 1) a key (a Workspace's uid, say) always
maps to, spread uniformly over many keys.

A deadline shifted by ``fraction_of(uid)`` of some window lands at the same point of that
window in every pass and after every restart, yet a fleet created in one burst (a Helm
upgrade, a rotation) is spread over the window instead of falling due at once. Not a secret:
the fraction only spreads load.
"""

from __future__ import annotations

import hashlib


def fraction_of(key: str) -> float:
    """A number in [0, 1) fixed by ``key``: the first 32 bits of its sha256, over 2^32."""
    return int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) / 2**32
