"""Waiting for what the code under test does: one poll for a condition, bounded.

The poll interval is short and the timeout generous: the timeout only bounds a broken test,
it is never what the test measures. Code that decides by time is tested on a fake clock
(``tests/support/clock.py``) instead of by waiting.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable

POLL = 0.01
"""Seconds between two looks at the condition."""


async def eventually(
    check: Callable[[], Awaitable[object] | object], what: str = "", timeout: float = 15.0
) -> None:
    """Return once ``check()`` (sync or async) is truthy; fail naming ``what`` after
    ``timeout`` seconds."""
    try:
        async with asyncio.timeout(timeout):
            while True:
                result = check()
                if inspect.isawaitable(result):
                    result = await result
                if result:
                    return
                await asyncio.sleep(POLL)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what or 'the condition'}") from None
