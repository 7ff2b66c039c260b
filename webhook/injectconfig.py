"""What the injector writes into a workspace pod, computed once per configuration.

The webhook answers every admission request with the same configuration, so the desired
volumes, env pins and receipt, and their JSON encodings, are computed on first use and kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import orjson

from webhook.patch import Appends, subsets
from wspin.core.contract import ARCHES, DELIVERY_ANNOTATION
from wspin.core.delivery import ResolvedArtifact
from wspin.core.workspace_pod import build_receipt


@dataclass(frozen=True)
class InjectConfig:
    """What the injector writes into a workspace pod: both artifacts, resolved and checked."""

    agentd: ResolvedArtifact
    opencode: ResolvedArtifact

    # The desired values below are computed once per configuration, not once per pod: the
    # webhook answers every admission request with the same configuration.

    @property
    def artifacts(self) -> tuple[ResolvedArtifact, ResolvedArtifact]:
        return (self.agentd, self.opencode)

    @cached_property
    def receipt(self) -> str:
        """The receipt annotation value: artifact → digest, compact JSON with sorted keys."""
        return build_receipt({r.artifact.name: r.digest for r in self.artifacts})

    @cached_property
    def digests(self) -> str:
        """Both artifacts with their short digests, as decision messages show them."""
        return ", ".join(f"{r.artifact.name}@sha256:{r.digest[:12]}" for r in self.artifacts)

    @cached_property
    def volumes(self) -> tuple[dict[str, Any], ...]:
        """The two image volumes, digest-pinned, pulled only when a node lacks them."""
        return tuple(
            {
                "name": r.artifact.volume,
                "image": {"reference": r.image, "pullPolicy": "IfNotPresent"},
            }
            for r in self.artifacts
        )

    @cached_property
    def env(self) -> tuple[dict[str, str], ...]:
        """The eight pins of the ``workspace`` container, in the order the verifier documents."""
        env: list[dict[str, str]] = []
        for resolved in self.artifacts:
            artifact = resolved.artifact
            env.append({"name": artifact.marker_env, "value": "1"})
            env.append({"name": artifact.binary_env, "value": artifact.binary_path})
            for arch in ARCHES:
                env.append(
                    {"name": artifact.sha256_env(arch), "value": resolved.pins.for_arch(arch)}
                )
        return tuple(env)

    @cached_property
    def env_by_name(self) -> dict[str, dict[str, str]]:
        return {entry["name"]: entry for entry in self.env}

    # ... and encoded once, for the patch (``webhook.patch``).

    @cached_property
    def volume_json(self) -> dict[str, bytes]:
        """Volume name → the encoded image volume (a replacement's value)."""
        return {volume["name"]: orjson.dumps(volume) for volume in self.volumes}

    @cached_property
    def volume_appends(self) -> dict[tuple[str, ...], Appends]:
        """The volumes a pod lacks (their names, in order) → the ops that add them."""
        return {
            names: Appends("/spec/volumes", [self.volume_json[name] for name in names])
            for names in subsets([volume["name"] for volume in self.volumes])
        }

    @cached_property
    def env_appends(self) -> Appends:
        """The ops that add the eight pins, in order, to a container's ``env``."""
        return Appends("/env", [orjson.dumps(entry) for entry in self.env])

    @cached_property
    def receipt_json(self) -> bytes:
        return orjson.dumps(self.receipt)

    @cached_property
    def annotations_json(self) -> bytes:
        """``metadata.annotations`` holding only the receipt, for a pod without any."""
        return orjson.dumps({DELIVERY_ANNOTATION: self.receipt})
