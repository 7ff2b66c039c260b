"""SIGTERM with slow readers attached stops ``wspin webhook`` within its drain deadline, under
every supported Python on this machine (3.11's and 3.12+'s ``asyncio`` close servers
differently; see ``tests/support/pythons.py`` for how each gets its dependencies).

Attached at SIGTERM: clients pipelining reviews that never read their answers, a body that
never completes, and idle keep-alive connections. The process stops accepting, aborts what is
left after ``--drain-timeout`` and exits 0.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import time
from pathlib import Path

import pytest

from tests.support.pythons import ROOT, found, interpreter
from tests.webhook.conftest import SERVICE_HOST
from tests.webhook.process import clean_env
from tests.webhook.rawhttps import REVIEW, answered, request_bytes, webhook_process

DRAIN = 2.0
"""Seconds: --drain-timeout."""


@pytest.mark.parametrize("version", list(found()))
async def test_sigterm_with_slow_readers_stops_within_the_drain_deadline(
    tmp_path: Path, version: str
) -> None:
    python = interpreter(version)
    env = {**clean_env(), "PYTHONPATH": str(ROOT)}
    flags = ("--shutdown-delay", "0", "--drain-timeout", str(DRAIN), "--send-timeout", "60")
    async with webhook_process(tmp_path, *flags, python=python, env=env) as webhook:
        server = webhook.server
        attached = []
        for _ in range(3):  # pipelined reviews, answers never read
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.setblocking(False)
            await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", server.port))
            reader, writer = await asyncio.open_connection(
                sock=sock, ssl=server.trust, server_hostname=SERVICE_HOST
            )
            writer.write(request_bytes() * 400)
            attached.append(writer)
        _, stalled = await server.connect()  # a body that never completes
        whole = request_bytes()
        stalled.write(whole[: len(whole) - len(REVIEW) // 2])
        attached.append(stalled)
        for _ in range(3):  # idle keep-alive
            reader, writer = await server.connect()
            assert await answered(reader, writer)
            attached.append(writer)
        while not await webhook.sample("wspin_http_queued_output_bytes", port="admission"):
            await asyncio.sleep(0.05)  # the slow readers' answers are backed up

        started = time.monotonic()
        webhook.process.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(webhook.process.wait(), DRAIN + 10)
        stopped = time.monotonic() - started
        assert code == 0, webhook.output()
        assert stopped < DRAIN + 3, f"Python {version}: stopped after {stopped:.1f} s"
        for writer in attached:
            writer.transport.abort()
