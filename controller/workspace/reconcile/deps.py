"""What a Workspace pass works with, in one frozen object built once (``wiring.build_deps``).

The readers and writers every pass shares: the API client and the caches, the settings and
the credentials key, the metrics, the optional collaborators (relay staging, the org status,
the runtime catalogue, egress, the Namespace labels, the agent scheduler: None switches each
off), the clock, the Event recorder and the redactor. The few objects built from them (owned
writes, the verify and recovery reporters) are built once, on first use.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property

from prometheus_client import CollectorRegistry

from controller.settings import WorkspaceSettings
from controller.toolkit.events import EventRecorder
from controller.types import Obj, ObjectReader, StagingPass
from controller.workspace.agent.drain import DrainWindows
from controller.workspace.agent.metrics import AgentMetrics
from controller.workspace.agent.scheduler import AgentScheduler
from controller.workspace.egress.sync import EgressPolicies
from controller.workspace.pod.credential_keys import CredentialKeys
from controller.workspace.pod.writes import OwnedWrites
from controller.workspace.reconcile.lifecycle_metrics import LifecycleMetrics
from controller.workspace.reconcile.orgstatus import OrgStatusCache
from controller.workspace.reconcile.recovery_report import RecoveryReporter
from controller.workspace.reconcile.verify_report import VerifyReporter
from controller.workspace.recovery.metrics import RecoveryMetrics
from controller.workspace.recovery.verify_metrics import VerifyMetrics
from wspin.core.clock import Clock, utc_now
from wspin.core.tenancy import NamespaceLabels
from wspin.kube.client import Kube


def _keep(text: str) -> str:
    return text


@dataclass(frozen=True)
class ReconcileDeps:
    kube: Kube
    workspaces: ObjectReader
    pods: ObjectReader
    pvcs: ObjectReader
    settings: WorkspaceSettings
    keys: CredentialKeys
    """The key the workspace credentials are derived from (``credential_keys``)."""
    verify_metrics: VerifyMetrics
    recovery_metrics: RecoveryMetrics = field(
        default_factory=lambda: RecoveryMetrics(CollectorRegistry())
    )
    lifecycle: LifecycleMetrics = field(
        default_factory=lambda: LifecycleMetrics(CollectorRegistry())
    )
    """Phase changes, creation and resume times, deletions (the defaults register in a
    private registry)."""
    staging: StagingPass | None = None
    orgs: OrgStatusCache | None = None
    """Org status from the API service (None: ``--api-service-url`` or the internal token not
    set): an org-owned Workspace of a suspended organisation is suspended."""
    runtimes: Mapping[str, Obj] | None = None
    """The runtime catalogue (RuntimeEnvironments by name) bare runtime names resolve through;
    None: every ``spec.runtime`` is run as written."""
    egress: EgressPolicies | None = None
    """Per-Workspace egress policies (None: ``--workspace-egress=off``)."""
    namespaces: NamespaceLabels | None = None
    """The platform's labels on each Namespace (a watch): the runtime-class override and the
    organisation come from them, never from the Workspace (None: no labels)."""
    agents: AgentScheduler | None = None
    """The fleet's agent scheduler (None: agentd is not read; recycles never wait)."""
    agent_metrics: AgentMetrics | None = None
    clock: Clock = utc_now
    recorder: EventRecorder | None = None
    """The Event recorder (None: one over ``kube`` with this clock and redactor)."""
    redact: Callable[[str], str] = _keep
    """The process's redactor, applied to what the kubelet or the scheduler said."""
    drains: DrainWindows = field(default_factory=DrainWindows)
    """The session drains in progress: what the controller remembers between passes."""

    @cached_property
    def events(self) -> EventRecorder:
        if self.recorder is not None:
            return self.recorder
        return EventRecorder(self.kube, clock=self.clock, redact=self.redact)

    @cached_property
    def writes(self) -> OwnedWrites:
        return OwnedWrites(
            self.kube, self.settings.termination_grace, legacy_before=self.keys.created
        )

    @cached_property
    def verifier(self) -> VerifyReporter:
        return VerifyReporter(self.kube, self.verify_metrics, self.events)

    @cached_property
    def recovery(self) -> RecoveryReporter:
        """Failures counted and retried, pods that do not start, boot failures."""
        return RecoveryReporter(
            self.kube,
            self.recovery_metrics,
            self.events,
            clock=self.clock,
            redact=self.redact,
        )
