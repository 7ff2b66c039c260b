"""``llmsafespaces_workspace_pods{artifact,digest,state}``: a release rollout, as a gauge.

Computed at scrape time from the controller's caches of workspace pods and Workspaces with
``wspin.core.rollout`` (the classification ``wspin status`` prints), so the numbers cost nothing
between scrapes, need no bookkeeping in the reconciler, and always agree with the command.
``digest`` is the 12 hex of the running digest (``none`` when not injected), the same label
the verify-failure counters carry; ``state`` is current, stale, not_injected, failing, or
injected when the controller was not told the release (``--agentd-image`` /
``--opencode-image``, which the chart passes).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from controller.settings import WorkspaceSettings
from controller.types import Listable
from wspin.core import rollout

METRIC = "llmsafespaces_workspace_pods"


def served_digests(settings: WorkspaceSettings) -> dict[str, str] | None:
    """The release the webhook serves, from the controller's delivery flags (None: unknown)."""
    served: dict[str, str] = {}
    for delivery in (settings.agentd, settings.opencode):
        if delivery is not None and (digest := rollout.digest_of(delivery.image)):
            served[delivery.artifact.name] = digest
    return served or None


def digest_label(digest: str) -> str:
    return digest.removeprefix("sha256:")[:12] or "none"


class WorkspacePodsCollector(Collector):
    """Workspace pods per (artifact, running digest, state), read from the caches."""

    def __init__(
        self, pods: Listable, workspaces: Listable, served: Mapping[str, str] | None
    ) -> None:
        self.pods = pods
        self.workspaces = workspaces
        self.served = served

    def collect(self) -> Iterator[GaugeMetricFamily]:
        gauge = GaugeMetricFamily(
            METRIC,
            "Workspace pods by delivered artifact, the digest it runs and its state against "
            "the release the webhook serves: current, stale (recreated on the next "
            "restartGeneration), not_injected, failing (verification exit 81-84).",
            labels=["artifact", "digest", "state"],
        )
        releases = rollout.pod_releases(self.pods.list(), self.workspaces.list(), self.served)
        for (artifact, digest, state), count in sorted(rollout.counts(releases).items()):
            gauge.add_metric([artifact, digest_label(digest), state], count)
        yield gauge
