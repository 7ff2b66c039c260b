"""Where each kind lives in the Kubernetes REST API. Pure data, no I/O.

The plain-dict client (``wspin.kube.client``) builds its request paths from these values, and
pure code (the runtime catalogue, the caches' definitions) names kinds by them without
importing the client.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Resource:
    """Where a kind lives in the REST API: group/version, plural and whether it is namespaced."""

    group: str
    version: str
    plural: str
    namespaced: bool = True
    kind: str = ""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None, sub: str = "") -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name:
            base += f"/{name}"
        if sub:
            base += f"/{sub}"
        return base


PODS = Resource("", "v1", "pods", kind="Pod")
PVCS = Resource("", "v1", "persistentvolumeclaims", kind="PersistentVolumeClaim")
CONFIGMAPS = Resource("", "v1", "configmaps", kind="ConfigMap")
SECRETS = Resource("", "v1", "secrets", kind="Secret")
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", kind="ServiceAccount")
EVENTS = Resource("", "v1", "events", kind="Event")
NAMESPACES = Resource("", "v1", "namespaces", namespaced=False, kind="Namespace")
LEASES = Resource("coordination.k8s.io", "v1", "leases", kind="Lease")
MUTATING_WEBHOOKS = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "mutatingwebhookconfigurations",
    namespaced=False,
    kind="MutatingWebhookConfiguration",
)
VALIDATING_WEBHOOKS = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "validatingwebhookconfigurations",
    namespaced=False,
    kind="ValidatingWebhookConfiguration",
)
WORKSPACES = Resource("llmsafespaces.dev", "v1", "workspaces", kind="Workspace")
DEPLOYMENTS = Resource("apps", "v1", "deployments", kind="Deployment")
CUSTOM_RESOURCE_DEFINITIONS = Resource(
    "apiextensions.k8s.io",
    "v1",
    "customresourcedefinitions",
    namespaced=False,
    kind="CustomResourceDefinition",
)
SUBJECT_ACCESS_REVIEWS = Resource(
    "authorization.k8s.io",
    "v1",
    "subjectaccessreviews",
    namespaced=False,
    kind="SubjectAccessReview",
)
INFERENCE_RELAYS = Resource(
    "llmsafespaces.dev", "v1", "inferencerelays", namespaced=False, kind="InferenceRelay"
)
