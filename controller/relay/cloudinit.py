"""The cloud-init user data that turns a fresh VM into a relay. Pure: no I/O.

The VM downloads relay-proxy from the mirrors in order, keeps the first file whose sha256
matches and only then starts the service. A file with the wrong hash is deleted and the next
mirror tried, so one bad mirror never leaves a unit with an unusable binary; ``FATAL`` plus a
non-zero exit come only when every mirror failed, in which case the service is never
started.

The token is never in the user data: whoever may describe the instance reads that. The
driver stores the token in the cloud's secret store first (``Driver.store_token``) and the
user data holds only the command that reads it back with the instance's own role; a root-only
script runs it at boot, retrying while the role's credentials arrive, and writes the token
into one root-only environment file, the only place on the VM that holds it: not the
world-readable unit file, not on relay-proxy's command line (every local user reads argv
through ``ps`` and ``/proc/<pid>/cmdline``; relay-proxy reads ``RELAY_TOKEN`` from its
environment), and not the output of any script, so cloud-init's output log cannot contain it.
The service runs as a user of its own (``DynamicUser``), so no other process on the VM shares
the uid that may read its environment (``/proc/<pid>/environ``), and it cannot reach the
instance metadata service (``IPAddressDeny``), which hands the instance's role credentials
(able to read the token) to any process on the VM that asks; the drivers also launch with the
metadata service's older, header-less protocol turned off, so a forwarded plain GET gets
nothing.
"""

from __future__ import annotations

import base64
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from wspin.core.errors import WspinError

BINARY_PATH = "/usr/local/bin/relay-proxy"
SCRIPT_PATH = "/usr/local/bin/download-relay-proxy.sh"
TOKEN_SCRIPT_PATH = "/usr/local/bin/fetch-relay-token.sh"  # noqa: S105 (a path)
UNIT_PATH = "/etc/systemd/system/relay-proxy.service"
ENV_PATH = "/etc/relay-proxy/env"
LISTEN = "0.0.0.0:8080"
RELAY_PORT = 8080
DEFAULT_BINARY = "relay-proxy-arm64"

_FETCH_ATTEMPTS = 30
_FETCH_PAUSE_SECONDS = 10
SAFE_URL = re.compile(r"^https?://[^\s'\"`$\\]+$")
"""An http(s) URL with nothing a shell or the unit file could read as syntax."""


class CloudInitError(WspinError):
    """An input the user data cannot be rendered from; the message names the input."""


@dataclass(frozen=True)
class CloudInitInput:
    upstream_url: str
    token_fetch: str
    """The sh command that prints the VM token (``TokenRef.fetch``): the token itself never
    enters the user data."""
    artifact_urls: Sequence[str]
    artifact_sha256: str
    binary_name: str = DEFAULT_BINARY


def render(params: CloudInitInput) -> str:
    """The ``#cloud-config`` document, base64-encoded with padding (both clouds want base64)."""
    return base64.b64encode(render_text(params).encode()).decode()


def render_text(params: CloudInitInput) -> str:
    """The ``#cloud-config`` document as text (what ``render`` encodes)."""
    _check(params)
    binary = params.binary_name or DEFAULT_BINARY
    document: dict[str, Any] = {
        "package_update": True,
        "packages": ["curl"],
        "write_files": [
            {
                "path": TOKEN_SCRIPT_PATH,
                "owner": "root:root",
                "permissions": "0700",
                "content": token_script(params.token_fetch),
            },
            {
                "path": SCRIPT_PATH,
                "owner": "root:root",
                "permissions": "0755",
                "content": download_script(
                    [u.rstrip("/") for u in params.artifact_urls], params.artifact_sha256, binary
                ),
            },
            {
                "path": UNIT_PATH,
                "owner": "root:root",
                "permissions": "0644",
                "content": _unit(params.upstream_url),
            },
        ],
        # One shell line, so a failed download stops it before systemctl: the unit starts
        # only after a verified download (cloud-init runs the runcmd lines without -e).
        "runcmd": [
            [
                "sh",
                "-c",
                f"{TOKEN_SCRIPT_PATH} && {SCRIPT_PATH} && systemctl daemon-reload && "
                "systemctl enable relay-proxy.service && systemctl start relay-proxy.service",
            ]
        ],
    }
    body = yaml.dump(document, Dumper=_LiteralDumper, sort_keys=False, width=1000)
    return "#cloud-config\n" + body


def token_script(fetch: str) -> str:
    """A POSIX sh script: run ``fetch`` until it prints a well-formed token, write it to the
    root-only environment file, print nothing of it; FATAL and exit 1 when it never does.

    The token stays in a shell variable and goes to the file through the ``printf`` builtin,
    so it is in no argv; the errors of every command in ``fetch`` (a pipeline too) are
    discarded, so cloud-init's log holds none of them. ``RELAY_TOKEN_ENV`` overrides the file
    (tests) and ``RELAY_TOKEN_PAUSE`` the seconds between attempts.
    """
    return f"""#!/bin/sh
set -u
umask 077
env_file="${{RELAY_TOKEN_ENV:-{ENV_PATH}}}"
pause="${{RELAY_TOKEN_PAUSE:-{_FETCH_PAUSE_SECONDS}}}"
mkdir -p "$(dirname "$env_file")"
attempt=0
while [ "$attempt" -lt {_FETCH_ATTEMPTS} ]; do
  attempt=$((attempt + 1))
  token="$( ( {fetch} ) 2>/dev/null)" || token=""
  case "$token" in
    ""|*[!A-Za-z0-9._~-]*) ;;
    *)
      printf 'RELAY_TOKEN=%s\n' "$token" > "$env_file.partial"
      mv -f "$env_file.partial" "$env_file"
      echo "relay-proxy: token read from the cloud's secret store"
      exit 0
      ;;
  esac
  echo "relay-proxy: cannot read the token yet (attempt $attempt)" >&2
  sleep "$pause"
done
echo "FATAL: could not read the relay token from the cloud's secret store" >&2
exit 1
"""


def download_script(urls: Sequence[str], sha256: str, binary: str) -> str:
    """A POSIX sh script: first mirror whose file matches ``sha256`` wins, else FATAL, exit 1.

    ``RELAY_PROXY_PATH`` overrides the install path (tests run the script in a temp folder).
    """
    mirrors = " ".join(shlex.quote(url) for url in urls)
    return f"""#!/bin/sh
set -eu
target="${{RELAY_PROXY_PATH:-{BINARY_PATH}}}"
partial="$target.download"
want={shlex.quote(sha256.lower())}
for base in {mirrors}; do
  rm -f "$partial"
  if curl -fsS --connect-timeout 10 --max-time 300 -o "$partial" "$base/{binary}"; then
    if echo "$want  $partial" | sha256sum -c - >/dev/null 2>&1; then
      chmod 0755 "$partial"
      mv -f "$partial" "$target"
      echo "relay-proxy: downloaded and verified $base/{binary}"
      exit 0
    fi
    echo "relay-proxy: sha256 mismatch for $base/{binary}, trying the next mirror" >&2
  else
    echo "relay-proxy: download of $base/{binary} failed, trying the next mirror" >&2
  fi
  rm -f "$partial"
done
echo "FATAL: could not download and verify relay-proxy from any mirror" >&2
exit 1
"""


def _unit(upstream_url: str) -> str:
    # systemd expands "%x" specifiers in ExecStart; "%%" is a literal percent sign. The token
    # stays out of ExecStart, also as ${RELAY_TOKEN}: systemd would expand it into argv.
    # IPAddressDeny: the instance metadata service serves the instance role's credentials,
    # which read the token, to whoever asks from the VM; relay-proxy forwards requests, so it
    # must never reach it.
    upstream = upstream_url.replace("%", "%%")
    return f"""[Unit]
Description=LLMSafeSpaces inference relay proxy
After=network-online.target
Wants=network-online.target
ConditionFileIsExecutable={BINARY_PATH}

[Service]
EnvironmentFile={ENV_PATH}
ExecStart={BINARY_PATH} --upstream={upstream} --listen={LISTEN}
Restart=always
RestartSec=5
DynamicUser=yes
IPAddressDeny=169.254.169.254 fd00:ec2::254

[Install]
WantedBy=multi-user.target
"""


def _check(params: CloudInitInput) -> None:
    if not params.upstream_url:
        raise CloudInitError("relay cloud-init needs the upstream URL", "set spec.upstreamURL")
    if not SAFE_URL.match(params.upstream_url):
        raise CloudInitError(
            f"upstream URL {params.upstream_url!r} must be an http(s) URL without whitespace, "
            "quotes, backslashes or $",
            "fix spec.upstreamURL",
        )
    if not params.token_fetch.strip():
        raise CloudInitError(
            "relay cloud-init needs the command that reads the token: without a token the VM "
            "would be an open forwarder"
        )
    if "\n" in params.token_fetch:
        raise CloudInitError("the token fetch command must be one line")
    if not params.artifact_urls:
        raise CloudInitError(
            "relay cloud-init needs at least one artifact URL: otherwise the binary never arrives",
            "set --relay-artifact-url",
        )
    for url in params.artifact_urls:
        if not SAFE_URL.match(url):
            raise CloudInitError(
                f"artifact URL {url!r} must be an http(s) URL without whitespace or quotes",
                "fix --relay-artifact-url",
            )
    if not params.artifact_sha256:
        raise CloudInitError(
            "relay cloud-init needs the artifact SHA-256: the download is always verified",
            "set --relay-artifact-sha256-amd64 / --relay-artifact-sha256-arm64",
        )
    if not re.fullmatch(r"[0-9a-fA-F]+", params.artifact_sha256):
        raise CloudInitError("the artifact SHA-256 must be hex", "fix the sha256 flags")


class _LiteralDumper(yaml.SafeDumper):
    """Multi-line strings as ``|`` blocks, so the scripts read as scripts in the user data."""


def _str_representer(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_LiteralDumper.add_representer(str, _str_representer)
