"""Running ``wspin controller`` as a separate process and reading its JSON log lines."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from datetime import datetime
from typing import Any

import aiohttp

from wspin.core.clock import parse_time

Line = dict[str, Any]
"""One JSON log line of the process."""

SHORT_LEASE = {
    "WSPIN_LEASE_DURATION": "2s",
    "WSPIN_RENEW_DEADLINE": "1500ms",
    "WSPIN_RETRY_PERIOD": "200ms",
}


def clean_env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("WSPIN_") and k not in ("KUBECONFIG", "POD_NAMESPACE", "POD_NAME")
    }
    env.update(extra)
    return env


class Controller:
    """A ``wspin controller`` subprocess whose JSON log lines are collected as they come."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.lines: list[Line] = []
        self.stdout: list[str] = []
        """What the process printed on stdout (nothing, the log goes to stderr)."""
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def start(cls, *argv: str, env: dict[str, str]) -> Controller:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "wspinctl.cli",
            "controller",
            *argv,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        return cls(process)

    async def _read(self) -> None:
        await asyncio.gather(self._read_log(), self._read_stdout())

    async def _read_stdout(self) -> None:
        assert self.process.stdout is not None
        async for raw in self.process.stdout:
            self.stdout.append(raw.decode(errors="replace"))

    @property
    def not_json(self) -> list[str]:
        """Every line on either stream that is not one JSON object."""
        return [str(line["msg"]) for line in self.lines if line.get("raw")] + self.stdout

    async def _read_log(self) -> None:
        assert self.process.stderr is not None
        async for raw in self.process.stderr:
            text = raw.decode(errors="replace").strip()
            if not text:
                continue
            try:
                line = json.loads(text)
            except ValueError:
                line = {"msg": text, "raw": True}
            self.lines.append(line if isinstance(line, dict) else {"msg": text, "raw": True})

    @property
    def leading(self) -> bool:
        """Whether this process's last word on the lease was that it acquired it."""
        for line in reversed(self.lines):
            if line.get("msg") == "acquired the leader lease":
                return True
            if line.get("msg") == "lost the leader lease":
                return False
        return False

    def terms(self, until: datetime) -> list[tuple[datetime, datetime]]:
        """The (start, end) of each leadership term this process logged; a term still open
        ends at ``until``."""
        terms: list[tuple[datetime, datetime]] = []
        began: datetime | None = None
        for line in self.lines:
            moment = parse_time(line.get("ts"))
            if moment is None:
                continue
            if line.get("msg") == "acquired the leader lease":
                began = moment
            elif line.get("msg") == "lost the leader lease" and began is not None:
                terms.append((began, moment))
                began = None
        if began is not None:
            terms.append((began, until))
        return terms

    def find(self, msg: str) -> list[Line]:
        return [line for line in self.lines if line.get("msg") == msg]

    async def wait_for(self, msg: str, timeout: float = 15) -> Line:
        async with asyncio.timeout(timeout):
            while not self.find(msg):
                if self.process.returncode is not None and self._reader.done():
                    raise AssertionError(f"exited {self.process.returncode}: {self.text()}")
                await asyncio.sleep(0.05)
        return self.find(msg)[0]

    async def exit_code(self, timeout: float = 20) -> int:
        code = await asyncio.wait_for(self.process.wait(), timeout)
        await asyncio.wait_for(self._reader, 5)
        return code

    def text(self) -> str:
        return "\n".join(json.dumps(line) for line in self.lines)

    async def wait_ready(self, port: int, timeout: float = 20) -> None:
        """Poll ``/readyz`` on ``port`` until it answers 200.

        The port comes from the controller's own log line, so it is listening; a refused or
        reset connection is still retried (a loaded machine, a socket not yet accepting), and
        a controller that exits meanwhile fails at once with its log instead of a bare
        connection error."""
        url = f"http://127.0.0.1:{port}/readyz"
        last = "no answer yet"
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as http:
            try:
                async with asyncio.timeout(timeout):
                    while True:
                        if self.process.returncode is not None:
                            raise AssertionError(
                                f"exited {self.process.returncode} before ready: {self.text()}"
                            )
                        try:
                            async with http.get(url) as response:
                                if response.status == 200:
                                    return
                                last = f"HTTP {response.status}: {await response.text()}"
                        except (aiohttp.ClientConnectionError, TimeoutError) as err:
                            last = repr(err)
                        await asyncio.sleep(0.05)
            except TimeoutError:
                raise AssertionError(
                    f"not ready after {timeout}s ({last}): {self.text()}"
                ) from None

    async def close(self) -> None:
        if self.process.returncode is None:
            self.process.kill()
            await self.process.wait()
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader
