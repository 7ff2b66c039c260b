"""Run the real ``helm`` binary against charts/wspin and parse what it renders.

The Makefile fetches helm into ``.tools/bin/helm`` and exports its absolute path as
``WSPIN_HELM``; without it these tests fail and say how to get it, rather than skip.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from webhook.demo import DEMO_CONFIG

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "wspin"
VALUES = Path(__file__).resolve().parent / "values"
NAMESPACE = "wspin"
RELEASE = "wspin"
# The first release with image volumes on by default; every render states its version so a
# Helm upgrade cannot change what the tests see. Other versions are rendered explicitly.
KUBE_VERSION = "1.35.0"

Manifest = dict[str, Any]


def helm_binary() -> str:
    configured = os.environ.get("WSPIN_HELM")
    candidate = Path(configured) if configured else REPO / ".tools" / "bin" / "helm"
    if not candidate.is_file():
        raise RuntimeError(
            f"helm not found at {candidate}: run `make .tools/bin/helm` once, or set WSPIN_HELM "
            "to a helm v3 binary (make test does both)"
        )
    return str(candidate)


@dataclass(frozen=True)
class HelmResult:
    returncode: int
    stdout: str
    stderr: str


def run_helm(args: Sequence[str]) -> HelmResult:
    proc = subprocess.run(
        [helm_binary(), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        # No user helm config or repositories leak into the render.
        env={**os.environ, "HELM_CONFIG_HOME": "/nonexistent", "HELM_CACHE_HOME": "/tmp/helm"},
    )
    return HelmResult(proc.returncode, proc.stdout, proc.stderr)


def template_args(
    values: Sequence[str] = ("minimal.yaml",),
    sets: Mapping[str, Any] | None = None,
    *,
    kube_version: str | None = KUBE_VERSION,
    namespace: str = NAMESPACE,
    api_versions: Sequence[str] = (),
) -> list[str]:
    """``helm template`` arguments; ``kube_version=None`` leaves Helm's own default (what a
    GitOps render that passes no version gets)."""
    args = ["template", RELEASE, str(CHART), "--namespace", namespace, "--include-crds"]
    if kube_version is not None:
        args += ["--kube-version", kube_version]
    for api_version in api_versions:  # what `.Capabilities.APIVersions` reports
        args += ["--api-versions", api_version]
    for name in values:
        args += ["--values", str(VALUES / name)]
    for key, value in (sets or {}).items():
        # As JSON: strings stay strings (a 64-digit hash is not a number) and commas or
        # braces inside a value are not --set syntax.
        args += ["--set-json", f"{key}={json.dumps(value)}"]
    return args


def template(
    values: Sequence[str] = ("minimal.yaml",),
    sets: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> HelmResult:
    return run_helm(template_args(values, sets, **kwargs))


def parse_documents(text: str) -> list[Manifest]:
    return [doc for doc in yaml.safe_load_all(text) if doc]


@dataclass(frozen=True)
class Rendered:
    """One successful render, with lookups by kind and name."""

    documents: tuple[Manifest, ...]

    def __iter__(self) -> Iterator[Manifest]:
        return iter(self.documents)

    def of_kind(self, kind: str) -> list[Manifest]:
        return [doc for doc in self.documents if doc["kind"] == kind]

    def get(self, kind: str, name: str) -> Manifest:
        matches = [doc for doc in self.of_kind(kind) if doc["metadata"]["name"] == name]
        if len(matches) != 1:
            names = [doc["metadata"]["name"] for doc in self.of_kind(kind)]
            raise AssertionError(f"expected one {kind} {name!r}, rendered {names}")
        return matches[0]

    def one(self, kind: str) -> Manifest:
        docs = self.of_kind(kind)
        if len(docs) != 1:
            raise AssertionError(f"expected one {kind}, rendered {len(docs)}")
        return docs[0]

    def deployment(self, component: str) -> Manifest:
        return self.get("Deployment", f"{RELEASE}-{component}")

    def container(self, component: str) -> Manifest:
        containers: list[Manifest] = self.deployment(component)["spec"]["template"]["spec"][
            "containers"
        ]
        assert len(containers) == 1
        return containers[0]

    def args(self, component: str) -> list[str]:
        args: list[str] = self.container(component)["args"]
        return args


def render(
    values: Sequence[str] = ("minimal.yaml",),
    sets: Mapping[str, Any] | None = None,
    api_versions: Sequence[str] = (),
    namespace: str = NAMESPACE,
) -> Rendered:
    result = template(values, sets, api_versions=api_versions, namespace=namespace)
    if result.returncode != 0:
        raise AssertionError(f"helm template failed: {result.stderr}")
    return Rendered(tuple(parse_documents(result.stdout)))


def flag_values(args: Sequence[str], flag: str) -> list[str]:
    """Every value given for ``flag`` as ``--flag=value`` (bare ``--flag`` counts as "")."""
    found = []
    for arg in args:
        if arg == flag:
            found.append("")
        elif arg.startswith(flag + "="):
            found.append(arg[len(flag) + 1 :])
    return found


PINS = {
    "agentdDelivery.image": DEMO_CONFIG.agentd.image,
    "opencodeDelivery.image": DEMO_CONFIG.opencode.image,
    "agentdDelivery.binarySHA256Amd64": "a" * 64,
    "agentdDelivery.binarySHA256Arm64": "b" * 64,
    "opencodeDelivery.binarySHA256Amd64": "c" * 64,
    "opencodeDelivery.binarySHA256Arm64": "d" * 64,
}
"""Delivery values with both images and their pins (the demo release's)."""
