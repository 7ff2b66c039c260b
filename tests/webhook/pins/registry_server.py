"""A real OCI registry for the pin tests: Debian's ``docker-registry`` (distribution 2.8).

Started as a subprocess on loopback with its own storage folder; content is pushed through
the registry's HTTP API exactly as a client would (monolithic blob upload, manifest PUT), so
what the resolver reads is what a real registry serves, Accept negotiation included.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from wspin.core.contract import AGENTD, OPENCODE

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"

REPOSITORY = "wspin/release"
PINS = {
    AGENTD.index_annotation("amd64"): "a" * 64,
    AGENTD.index_annotation("arm64"): "b" * 64,
    OPENCODE.index_annotation("amd64"): "c" * 64,
    OPENCODE.index_annotation("arm64"): "d" * 64,
}
AGENTD_ONLY = {k: v for k, v in PINS.items() if "/agentd." in k}
OPENCODE_ONLY = {k: v for k, v in PINS.items() if "/opencode." in k}


@dataclass(frozen=True)
class OciRegistry:
    """The session registry: where it listens, its storage, and what was pushed."""

    host: str
    storage: Path
    images: dict[str, PushedImage]

    def ref(self, variant: str, tag: str | None = None, host: str | None = None) -> str:
        return self.images[variant].ref(host or self.host, tag)


def registry_binary() -> str:
    """The registry executable; fails (never skips) the test run when it is not installed."""
    found = shutil.which("docker-registry") or (
        "/usr/bin/docker-registry" if Path("/usr/bin/docker-registry").exists() else None
    )
    if found is None:
        pytest.fail(
            "the pin tests need a real OCI registry: install Debian's docker-registry package "
            "(apt-get install -y docker-registry); make test installs it when run as root",
            pytrace=False,
        )
    return found


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class RegistryProcess:
    """One ``docker-registry serve`` process over a storage folder, on 127.0.0.1."""

    storage: Path
    workdir: Path
    auth: Mapping[str, Any] | None = None
    host: str = ""
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def start(self) -> RegistryProcess:
        # The registry cannot take an open socket, so a free port is picked and handed over;
        # the rare collision with another process shows up as an early exit and is retried.
        for _attempt in range(5):
            port = free_port()
            if self._try_start(port):
                self.host = f"127.0.0.1:{port}"
                return self
        pytest.fail("docker-registry did not start on loopback after 5 attempts", pytrace=False)

    def _try_start(self, port: int) -> bool:
        config: dict[str, Any] = {
            "version": 0.1,
            "log": {"level": "error", "accesslog": {"disabled": True}},
            "storage": {
                "filesystem": {"rootdirectory": str(self.storage)},
                "maintenance": {"uploadpurging": {"enabled": False}},
            },
            "http": {"addr": f"127.0.0.1:{port}", "secret": secrets.token_hex(16)},
        }
        if self.auth:
            config["auth"] = dict(self.auth)
        path = self.workdir / f"registry-{port}.yml"
        path.write_text(yaml.safe_dump(config))
        log = (self.workdir / f"registry-{port}.log").open("wb")
        self.process = subprocess.Popen(
            [registry_binary(), "serve", str(path)], stdout=log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=1):
                    return True
            except urllib.error.HTTPError:
                return True  # 401 from a registry with auth: it answers
            except OSError:
                time.sleep(0.02)
        self.stop()
        return False

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None


@dataclass(frozen=True)
class PushedImage:
    """An index pushed to the test registry: its repository, digest and annotations."""

    repository: str
    digest: str
    annotations: Mapping[str, str]
    media_type: str = OCI_INDEX

    def ref(self, host: str, tag: str | None = None) -> str:
        return f"{host}/{self.repository}{':' + tag if tag else ''}@{self.digest}"


class Pusher:
    """Pushes blobs and manifests through the distribution HTTP API (no auth)."""

    def __init__(self, host: str) -> None:
        self.base = f"http://{host}/v2"

    def _call(
        self, method: str, url: str, body: bytes = b"", content_type: str = ""
    ) -> tuple[int, Mapping[str, str]]:
        # Only ever http://127.0.0.1:<port>/v2/… URLs built here and by the registry.
        request = urllib.request.Request(url, data=body or None, method=method)  # noqa: S310
        if content_type:
            request.add_header("Content-Type", content_type)
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
            return response.status, response.headers

    def blob(self, repository: str, content: bytes) -> dict[str, Any]:
        digest = "sha256:" + hashlib.sha256(content).hexdigest()
        status, headers = self._call("POST", f"{self.base}/{repository}/blobs/uploads/")
        assert status == 202, status
        location = headers["Location"]
        if location.startswith("/"):
            location = self.base.removesuffix("/v2") + location
        separator = "&" if "?" in location else "?"
        status, _ = self._call(
            "PUT", f"{location}{separator}digest={digest}", content, "application/octet-stream"
        )
        assert status == 201, status
        return {"digest": digest, "size": len(content)}

    def manifest(self, repository: str, reference: str, body: bytes, media_type: str) -> str:
        status, headers = self._call(
            "PUT", f"{self.base}/{repository}/manifests/{reference}", body, media_type
        )
        assert status == 201, status
        digest = "sha256:" + hashlib.sha256(body).hexdigest()
        assert headers["Docker-Content-Digest"] == digest
        return digest

    def platform_manifests(self, repository: str) -> list[dict[str, Any]]:
        """One tiny OCI image per architecture, as the index's children."""
        children = []
        for arch in ("amd64", "arm64"):
            config = self.blob(
                repository,
                json.dumps(
                    {"architecture": arch, "os": "linux", "rootfs": {"type": "layers"}}
                ).encode(),
            )
            layer = self.blob(repository, f"binary for {arch}".encode())
            body = json.dumps(
                {
                    "schemaVersion": 2,
                    "mediaType": OCI_MANIFEST,
                    "config": {"mediaType": OCI_CONFIG, **config},
                    "layers": [{"mediaType": OCI_LAYER, **layer}],
                }
            ).encode()
            digest = self.manifest(repository, f"{arch}-only", body, OCI_MANIFEST)
            children.append(
                {
                    "mediaType": OCI_MANIFEST,
                    "digest": digest,
                    "size": len(body),
                    "platform": {"architecture": arch, "os": "linux"},
                }
            )
        return children

    def index(
        self,
        repository: str,
        tag: str,
        children: list[dict[str, Any]],
        annotations: Mapping[str, str],
        media_type: str = OCI_INDEX,
    ) -> PushedImage:
        document: dict[str, Any] = {
            "schemaVersion": 2,
            "mediaType": media_type,
            "manifests": children,
        }
        if annotations:
            document["annotations"] = dict(annotations)
        body = json.dumps(document, indent=2).encode()
        digest = self.manifest(repository, tag, body, media_type)
        return PushedImage(repository, digest, dict(annotations), media_type)


@dataclass
class TokenRegistry:
    """A registry that answers 401 + Bearer challenge, and the token service behind it."""

    service: str
    realm: str = ""
    host: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    """What the token service was asked: service, scope and any Authorization header."""
    issued: list[str] = field(default_factory=list)
    forge: bool = False
    """True: hand out tokens signed by a key the registry does not trust."""
