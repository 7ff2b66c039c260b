"""The verify-failure counters (one increment per failure episode).

The artifact label (``agentd`` or ``opencode``) is the 12 hex of the injected image's digest,
so an alert names the build that failed; cardinality stays small (digests change per release,
nodes are bounded). Names and labels are the ones LLMSafeSpaces dashboards and alerts use.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter

from controller.workspace.recovery.verify import VerifyFailure
from wspin.core.contract import AGENTD, OPENCODE


class VerifyMetrics:
    """``llmsafespaces_workspace_agentd_verify_failures_total{outcome,node,agentd}`` and
    ``llmsafespaces_workspace_opencode_verify_failures_total{outcome,node,opencode}``."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.counters = {
            artifact.name: Counter(
                f"llmsafespaces_workspace_{artifact.name}_verify_failures_total",
                f"Workspace pods whose {artifact.name} binary failed verification against its "
                "pinned sha256 (exit codes 81-84), once per failure episode.",
                ["outcome", "node", artifact.name],
                registry=registry,
            )
            for artifact in (AGENTD, OPENCODE)
        }

    def record(self, failure: VerifyFailure) -> None:
        self.counters[failure.artifact.name].labels(
            failure.kind.outcome, failure.node, failure.digest
        ).inc()
