"""The kinds the test API server serves: core built-ins plus the chart's CRDs.

Each ``Kind`` says where the kind lives in the REST API and which server behaviours apply
to it (status subresource, generation, strategic merge, selectable fields), so the store
and the router need no per-kind branches beyond what kube-apiserver itself special-cases.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

#: The chart's CRDs: the server serves exactly what the product installs.
CHART_CRDS = Path(__file__).resolve().parents[2] / "charts" / "wspin" / "crds"

_COMMON_FIELDS = frozenset({"metadata.name", "metadata.namespace"})


@dataclass(frozen=True)
class Kind:
    """One served resource (a group/version/plural) and the server behaviour it gets."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    status_subresource: bool = False
    custom: bool = False
    #: Field selectors beyond metadata.name/metadata.namespace, as kube-apiserver allows them.
    fields: frozenset[str] = field(default_factory=frozenset)
    #: Whether DELETE echoes the object (pods, custom resources) or returns a Success Status.
    returns_deleted: bool = False
    #: A custom resource version's ``openAPIV3Schema``: writes are pruned, defaulted and
    #: validated by it (``tests.kubeapi.schema``), as kube-apiserver does.
    schema: dict[str, Any] | None = field(default=None, compare=False, hash=False)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def selectable_fields(self) -> frozenset[str]:
        return _COMMON_FIELDS | self.fields

    @property
    def tracks_generation(self) -> bool:
        """Custom resources get ``metadata.generation``; it bumps on every non-status change."""
        return self.custom


def _core(plural: str, kind: str, **kw: Any) -> Kind:
    return Kind("", "v1", plural, kind, **kw)


BUILTIN_KINDS: tuple[Kind, ...] = (
    _core(
        "namespaces",
        "Namespace",
        namespaced=False,
        status_subresource=True,
        fields=frozenset({"status.phase"}),
    ),
    _core(
        "pods",
        "Pod",
        status_subresource=True,
        returns_deleted=True,
        fields=frozenset(
            {
                "status.phase",
                "status.podIP",
                "status.nominatedNodeName",
                "spec.nodeName",
                "spec.restartPolicy",
                "spec.schedulerName",
                "spec.serviceAccountName",
                "spec.hostNetwork",
            }
        ),
    ),
    _core("persistentvolumeclaims", "PersistentVolumeClaim", status_subresource=True),
    # Where tests' pods run: a cluster's pod garbage collector deletes a pod bound to a node
    # that does not exist, so tests create the node their pods name.
    _core("nodes", "Node", namespaced=False, status_subresource=True),
    _core("configmaps", "ConfigMap"),
    _core("secrets", "Secret", fields=frozenset({"type"})),
    _core("serviceaccounts", "ServiceAccount"),
    _core(
        "events",
        "Event",
        fields=frozenset(
            {
                "involvedObject.kind",
                "involvedObject.namespace",
                "involvedObject.name",
                "involvedObject.uid",
                "involvedObject.apiVersion",
                "involvedObject.resourceVersion",
                "involvedObject.fieldPath",
                "reason",
                "reportingComponent",
                "source",
                "type",
            }
        ),
    ),
    Kind("coordination.k8s.io", "v1", "leases", "Lease"),
    # What pods name in spec.runtimeClassName; a missing one refuses the pod
    # (``runtime_classes``).
    Kind("node.k8s.io", "v1", "runtimeclasses", "RuntimeClass", namespaced=False),
    Kind("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy"),
    # Only what clients of the webhook Service's slices read; the EndpointSlice controller
    # itself is not emulated (tests write the slices it would write).
    Kind("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice"),
    Kind(
        "admissionregistration.k8s.io",
        "v1",
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        namespaced=False,
    ),
    Kind(
        "admissionregistration.k8s.io",
        "v1",
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        namespaced=False,
    ),
    # Judged on every write by ``policies`` (CEL), as kube-apiserver's validating-policy
    # admission plugin does.
    Kind(
        "admissionregistration.k8s.io",
        "v1",
        "validatingadmissionpolicies",
        "ValidatingAdmissionPolicy",
        namespaced=False,
        status_subresource=True,
    ),
    Kind(
        "admissionregistration.k8s.io",
        "v1",
        "validatingadmissionpolicybindings",
        "ValidatingAdmissionPolicyBinding",
        namespaced=False,
    ),
    # What an installation consists of, so `wspin check` reads it as on a cluster: the CRDs
    # (seeded from the chart, Established), Services, Deployments (status written by the test
    # in place of the deployment controller) and RBAC (evaluated by SubjectAccessReview).
    Kind(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        namespaced=False,
        status_subresource=True,
    ),
    _core("services", "Service", status_subresource=True),
    Kind("apps", "v1", "deployments", "Deployment", status_subresource=True),
    Kind("rbac.authorization.k8s.io", "v1", "roles", "Role"),
    Kind("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding"),
    Kind("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False),
    Kind(
        "rbac.authorization.k8s.io",
        "v1",
        "clusterrolebindings",
        "ClusterRoleBinding",
        namespaced=False,
    ),
)


def kinds_from_crd(crd: dict[str, Any]) -> Iterator[Kind]:
    """Every served version of one CustomResourceDefinition manifest."""
    spec = crd["spec"]
    for version in spec["versions"]:
        if not version.get("served", True):
            continue
        selectable = frozenset(
            str(f["jsonPath"]).lstrip(".") for f in version.get("selectableFields") or ()
        )
        yield Kind(
            group=spec["group"],
            version=version["name"],
            plural=spec["names"]["plural"],
            kind=spec["names"]["kind"],
            namespaced=spec.get("scope", "Namespaced") == "Namespaced",
            status_subresource="status" in (version.get("subresources") or {}),
            custom=True,
            fields=selectable,
            returns_deleted=True,
            schema=(version.get("schema") or {}).get("openAPIV3Schema"),
        )


def load_crds(paths: Iterable[Path]) -> list[Kind]:
    """Kinds from CRD YAML files (multi-document files and non-CRD documents allowed)."""
    kinds: list[Kind] = []
    for path in paths:
        kinds.extend(_crd_kinds(path.resolve(), path.stat().st_mtime_ns))
    return kinds


@functools.cache
def _crd_kinds(path: Path, mtime_ns: int) -> tuple[Kind, ...]:
    """Parsed once per file version: every test starts a server, YAML parsing is the slow part."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    kinds: list[Kind] = []
    for doc in yaml.load_all(path.read_text(), Loader=loader):
        if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
            kinds.extend(kinds_from_crd(doc))
    return tuple(kinds)


def crd_documents(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """The CustomResourceDefinition manifests in ``paths``, as the server stores them."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return [
        doc
        for path in paths
        for doc in yaml.load_all(path.read_text(), Loader=loader)
        if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition"
    ]


def chart_crd_files(folder: Path = CHART_CRDS) -> list[Path]:
    """The chart's CRD files; an empty folder is an error, not an empty API."""
    files = sorted([*folder.glob("*.yaml"), *folder.glob("*.yml")])
    if not files:
        raise FileNotFoundError(
            f"no CRD manifests under {folder}; the test API server serves the chart's CRDs, "
            "so add them there or pass crd_files= explicitly"
        )
    return files


class KindRegistry:
    """Look kinds up the way the router sees them: by group and plural."""

    def __init__(self, kinds: Iterable[Kind]) -> None:
        self._by_path: dict[tuple[str, str, str], Kind] = {}
        for kind in kinds:
            self._by_path[(kind.group, kind.version, kind.plural)] = kind

    def find(self, group: str, version: str, plural: str) -> Kind | None:
        return self._by_path.get((group, version, plural))

    def __iter__(self) -> Iterator[Kind]:
        return iter(self._by_path.values())
