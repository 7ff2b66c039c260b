"""Cloud-init: the rendered document, and its download script run for real under ``sh``."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os
import stat
import subprocess
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web

from controller.relay.cloudinit import (
    ENV_PATH,
    SCRIPT_PATH,
    TOKEN_SCRIPT_PATH,
    CloudInitError,
    CloudInitInput,
    render,
    render_text,
)
from tests.controller.relay.conftest import serve

TOKEN = "0123456789abcdef" * 4
GOOD = b"#!/bin/sh\necho relay-proxy\n"
GOOD_SHA = hashlib.sha256(GOOD).hexdigest()
FETCH = 'cat "$STORED_TOKEN_FILE"'
"""Stands in for the cloud CLI call: prints what the secret store holds."""
PARAMS = CloudInitInput(
    upstream_url="https://upstream.example/v1",
    token_fetch=FETCH,
    artifact_urls=["https://one.example/relay", "https://two.example/relay"],
    artifact_sha256=GOOD_SHA,
)


def _document() -> dict[str, Any]:
    text = base64.b64decode(render(PARAMS)).decode()
    assert text.startswith("#cloud-config\n")
    loaded: dict[str, Any] = yaml.safe_load(text)
    return loaded


def _file(path: str) -> dict[str, str]:
    files = _document()["write_files"]
    assert isinstance(files, list)
    return next(f for f in files if f["path"] == path)


def test_the_document_holds_the_unit_the_script_and_the_pins() -> None:
    text = render_text(PARAMS)
    for needle in (
        "#cloud-config",
        "relay-proxy.service",
        "curl",
        "sha256sum",
        "--upstream=https://upstream.example/v1",
        "--listen=0.0.0.0:8080",
        "EnvironmentFile=/etc/relay-proxy/env",
        GOOD_SHA,
        "https://one.example/relay",
        "https://two.example/relay",
        "relay-proxy-arm64",
        "/usr/local/bin/relay-proxy",
        "FATAL",
    ):
        assert needle in text, needle


def test_the_token_and_download_run_before_the_service_starts_in_one_chained_command() -> None:
    [command] = _document()["runcmd"]
    line: str = command[-1]
    assert line.index(TOKEN_SCRIPT_PATH) < line.index(SCRIPT_PATH)
    assert line.index(SCRIPT_PATH) < line.index("systemctl start relay-proxy")
    assert " && " in line


def test_the_user_data_names_where_the_token_is_never_the_token() -> None:
    """Rule: whoever may describe the instance reads the user data, so it holds only the
    command that reads the token from the cloud's secret store, in a root-only script."""
    script = _file(TOKEN_SCRIPT_PATH)
    assert script["permissions"] == "0700" and script["owner"] == "root:root"
    assert FETCH in script["content"]
    assert ENV_PATH not in [f["path"] for f in _document()["write_files"]]
    assert "RELAY_TOKEN=" not in render_text(PARAMS).replace("RELAY_TOKEN=%s", "")
    assert _file("/etc/systemd/system/relay-proxy.service")["permissions"] == "0644"


def _run_token_script(
    folder: Path, stored: str | None
) -> tuple[subprocess.CompletedProcess[str], Path]:
    script = folder / "fetch-relay-token.sh"
    script.write_text(_file(TOKEN_SCRIPT_PATH)["content"])
    script.chmod(0o700)
    store = folder / "stored"
    if stored is not None:
        store.write_text(stored + "\n")
    env_file = folder / "etc" / "env"
    env = {
        "PATH": os.environ["PATH"],
        "STORED_TOKEN_FILE": str(store),
        "RELAY_TOKEN_ENV": str(env_file),
        "RELAY_TOKEN_PAUSE": "0",
    }
    done = subprocess.run(
        ["sh", str(script)], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    return done, env_file


def test_the_boot_script_writes_the_stored_token_root_only_and_prints_none_of_it(
    tmp_path: Path,
) -> None:
    done, env_file = _run_token_script(tmp_path, TOKEN)
    assert done.returncode == 0, done.stderr
    assert env_file.read_text() == f"RELAY_TOKEN={TOKEN}\n"
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
    assert TOKEN not in done.stdout + done.stderr


@pytest.mark.parametrize("stored", [None, "", "a b; reboot", "tok$(id)"])
def test_the_boot_script_fails_without_a_well_formed_stored_token(
    tmp_path: Path, stored: str | None
) -> None:
    """No token (the role cannot read it yet, ever) or a malformed one: FATAL, exit 1, no
    environment file, so the service never starts as an open forwarder."""
    done, env_file = _run_token_script(tmp_path, stored)
    assert done.returncode == 1 and "FATAL" in done.stderr
    assert not env_file.exists()


def test_nothing_of_wireguard_is_left() -> None:
    text = render_text(PARAMS).lower()
    for gone in ("wireguard", "wg-quick", "wg0.conf", "51820", "10.42.42"):
        assert gone not in text


@pytest.mark.parametrize(
    ("change", "phrase"),
    [
        ({"upstream_url": ""}, "upstream URL"),
        ({"token_fetch": ""}, "token"),
        ({"artifact_urls": []}, "artifact URL"),
        ({"artifact_sha256": ""}, "artifact SHA-256"),
        ({"upstream_url": "https://x.example/$(reboot)"}, "upstream URL"),
        ({"token_fetch": "a\nb"}, "token"),
        ({"artifact_urls": ["https://a.example/'x"]}, "artifact URL"),
    ],
)
def test_each_required_input_is_rejected_when_missing_or_unsafe(
    change: dict[str, object], phrase: str
) -> None:
    with pytest.raises(CloudInitError, match=phrase):
        render(replace(PARAMS, **change))  # type: ignore[arg-type]


def test_the_user_data_is_padded_standard_base64() -> None:
    encoded = render(PARAMS)
    assert len(encoded) % 4 == 0
    assert base64.b64decode(encoded, validate=True)


# -- the script, run for real --------------------------------------------------------------


@pytest.fixture
def hits() -> list[str]:
    """Paths the mirrors were asked for, in order."""
    return []


@pytest.fixture
async def mirrors(hits: list[str]) -> AsyncIterator[dict[str, str]]:
    """Mirrors on loopback: 404, a corrupt file, the good file, and a second good one."""

    @web.middleware
    async def record(request: web.Request, handler: Any) -> web.StreamResponse:
        hits.append(request.path.split("/")[1])
        response: web.StreamResponse = await handler(request)
        return response

    async def missing(_: web.Request) -> web.Response:
        return web.Response(status=404, text="not found")

    async def corrupt(_: web.Request) -> web.Response:
        return web.Response(body=GOOD + b"tampered")

    async def good(_: web.Request) -> web.Response:
        return web.Response(body=GOOD)

    app = web.Application(middlewares=[record])
    app.router.add_get("/missing/relay-proxy-arm64", missing)
    app.router.add_get("/corrupt/relay-proxy-arm64", corrupt)
    app.router.add_get("/good/relay-proxy-arm64", good)
    app.router.add_get("/good2/relay-proxy-arm64", good)
    runner, url = await serve(app)
    try:
        yield {name: f"{url}/{name}" for name in ("missing", "corrupt", "good", "good2")}
    finally:
        await runner.cleanup()


def _shim_systemctl(folder: Path) -> Path:
    log = folder / "systemctl.log"
    shim = folder / "bin" / "systemctl"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\necho "$@" >> {log}\n')
    shim.chmod(0o755)
    return log


async def _run_bootstrap(folder: Path, urls: list[str]) -> subprocess.CompletedProcess[str]:
    """Render the user data for ``urls`` and run its runcmd line with the rendered script,
    the script and binary paths moved into ``folder`` and systemctl shimmed."""
    document = yaml.safe_load(render_text(replace(PARAMS, artifact_urls=urls)))
    content = next(f["content"] for f in document["write_files"] if f["path"] == SCRIPT_PATH)
    script = folder / "download-relay-proxy.sh"
    script.write_text(content)
    script.chmod(0o755)
    fetch = next(f["content"] for f in document["write_files"] if f["path"] == TOKEN_SCRIPT_PATH)
    token_script = folder / "fetch-relay-token.sh"
    token_script.write_text(fetch)
    token_script.chmod(0o700)
    (folder / "stored").write_text(TOKEN)
    [command] = document["runcmd"]
    line = str(command[-1]).replace(SCRIPT_PATH, str(script))
    line = line.replace(TOKEN_SCRIPT_PATH, str(token_script))
    env = {
        "PATH": f"{folder / 'bin'}:{os.environ['PATH']}",
        "RELAY_PROXY_PATH": str(folder / "relay-proxy"),
        "STORED_TOKEN_FILE": str(folder / "stored"),
        "RELAY_TOKEN_ENV": str(folder / "env"),
        "RELAY_TOKEN_PAUSE": "0",
    }
    return await asyncio.to_thread(
        subprocess.run, ["sh", "-c", line], env=env, capture_output=True, text=True, timeout=60
    )


async def test_the_script_skips_a_missing_and_a_corrupt_mirror_and_installs_the_good_file(
    tmp_path: Path, mirrors: dict[str, str], hits: list[str]
) -> None:
    log = _shim_systemctl(tmp_path)
    urls = [mirrors[name] for name in ("missing", "corrupt", "good", "good2")]
    done = await _run_bootstrap(tmp_path, urls)
    assert done.returncode == 0, done.stderr
    assert hits == ["missing", "corrupt", "good"]  # in order, and it stops at the first good
    binary = tmp_path / "relay-proxy"
    assert binary.read_bytes() == GOOD
    assert binary.stat().st_mode & stat.S_IXUSR
    assert not (tmp_path / "relay-proxy.download").exists()
    assert "sha256 mismatch" in done.stderr and "failed" in done.stderr
    assert log.read_text().splitlines() == [
        "daemon-reload",
        "enable relay-proxy.service",
        "start relay-proxy.service",
    ]
    assert TOKEN not in done.stdout + done.stderr


async def test_the_script_fails_with_fatal_and_never_starts_the_unit_when_no_mirror_is_good(
    tmp_path: Path, mirrors: dict[str, str]
) -> None:
    log = _shim_systemctl(tmp_path)
    done = await _run_bootstrap(tmp_path, [mirrors["missing"], mirrors["corrupt"]])
    assert done.returncode != 0
    assert "FATAL" in done.stderr
    assert not (tmp_path / "relay-proxy").exists()
    assert not (tmp_path / "relay-proxy.download").exists()
    assert not log.exists()
    assert TOKEN not in done.stdout + done.stderr


def test_a_percent_in_the_upstream_url_is_escaped_for_systemd() -> None:
    """systemd reads ``%x`` in ExecStart as a specifier; ``%%`` is a literal percent."""
    params = replace(PARAMS, upstream_url="https://upstream.example/v1/a%2Fb")
    unit = yaml.safe_load(render_text(params))["write_files"]
    content = next(f["content"] for f in unit if f["path"].endswith("relay-proxy.service"))
    [exec_start] = [line for line in content.splitlines() if line.startswith("ExecStart=")]
    assert "--upstream=https://upstream.example/v1/a%%2Fb " in exec_start
