"""The Workspace validator: which Workspaces the API server may store.

Pure: an AdmissionReview ``request`` dict and a frozen ``ValidatorConfig`` in, ``None`` (allow)
or a denial message out. No I/O, no logging, no clock, no flags (``webhook.settings`` builds
the config). The HTTP edge and the response constructors live elsewhere; this module is only
the policy.

Every denial names the field and says why, so ``kubectl apply`` shows the user what to change.
Checks run in a fixed order and the first failure wins, so a message never depends on dict order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from webhook.tenant_quota import MemberWorkspaces, member_workspaces_problem
from webhook.workspace_syntax import domain_problem, requirement_problem
from wspin.core.namespaces import ALWAYS_EXCLUDED, excluded_namespace_problem
from wspin.core.objects import Obj, nesting_depth, same_json
from wspin.core.owners import (
    LABEL_QUOTA_MEMBER,
    NO_TRUSTED_WRITERS,
    TrustedWriters,
    decide_owner,
    record_problem,
)
from wspin.core.quantity import QuantityError, byte_count, is_whole, millicores
from wspin.core.runtimes import image_syntax_problem, registry_problem
from wspin.core.tenancy import (
    NamespaceLabels,
    org_problem,
    runtime_class_problem,
    writers_problem,
)
from wspin.core.workspace import WorkspaceSpec
from wspin.core.workspace_defaults import (
    DEFAULT_CPU_REQUEST,
    DEFAULT_MEMORY_REQUEST,
    LIMIT_BURST_FACTOR,
)

MI: Final = 2**20
GI: Final = 2**30

# Kubernetes object names (and so StorageClass names) cap at 253 characters (DNS subdomain).
MAX_STORAGE_CLASS_LENGTH: Final = 253
MAX_NAME_LENGTH: Final = 63
"""A Workspace's name is a label value on everything it owns."""
MAX_SPEC_DEPTH: Final = 32
"""Levels of objects and lists a Workspace spec may nest. The spec keeps fields it does not
declare, so without a cap its author picks the depth, up to the JSON decoders' ~1,024, where
comparing or copying it recursively fails; the declared fields go six levels deep."""


@dataclass(frozen=True)
class ValidatorConfig:
    """Caps and allow-lists for Workspaces; 0 disables a numeric cap."""

    max_storage_gi: int = 1024
    """Largest ``spec.storage.size`` in GiB (a size is counted in whole GiB, rounded up)."""
    max_cpu_millicores: int = 16000
    """Largest cpu request or limit, in millicores (16 cores)."""
    max_memory_mi: int = 65536
    """Largest memory request or limit, in MiB (64 GiB)."""
    allowed_runtime_registries: tuple[str, ...] = ()
    """Registry prefixes an image-shaped ``spec.runtime`` must start with, each ending in "/".
    Empty: only RuntimeEnvironment names (no "/") are accepted. A bare name is never pulled
    as an image: the controller runs the named RuntimeEnvironment's digest-pinned image, and
    that image must come from one of these prefixes too."""
    allowed_storage_classes: tuple[str, ...] = ()
    """StorageClass names a Workspace may ask for; empty allows any. An empty
    ``storageClassName`` (the cluster default) always passes."""
    excluded_namespaces: frozenset[str] = frozenset({ALWAYS_EXCLUDED})
    """``--excluded-namespaces`` plus kube-system and the webhook's own namespace: the pod
    webhook never sees pods there, so no Workspace may be created there."""
    allowed_runtime_classes: frozenset[str] = frozenset()
    """``--allowed-runtime-classes``: classes any Workspace may name in ``spec.runtimeClass``;
    any other (and "") only in a namespace the platform labelled
    ``llmsafespaces.dev/allow-runtime-class-override=true``."""
    trusted_writers: TrustedWriters = NO_TRUSTED_WRITERS
    """``--trusted-workspace-writers``: whose ``spec.owner`` is believed as written."""
    workspaces_namespace: str = ""
    """``--workspaces-namespace``: the platform API's namespace, trusted writers only."""
    max_workspaces_per_member: int = 0
    """``--max-workspaces-per-member``: Workspaces one vouched owner user may own; 0: no cap."""


# -- the checks ------------------------------------------------------------------------------


def validate_workspace(
    request: Obj,
    cfg: ValidatorConfig,
    catalogue: Mapping[str, Obj] | None = None,
    namespaces: NamespaceLabels | None = None,
    members: MemberWorkspaces | None = None,
) -> str | None:
    """None to allow the Workspace in ``request``, else why it is denied (naming the field).

    ``members`` counts the Workspaces each vouched owner user owns (None: not watched), for
    ``max_workspaces_per_member`` on CREATE.

    ``namespaces`` gives the labels the platform set on the Workspace's namespace, which alone
    decide the runtime-class override and the organisation (``wspin.core.tenancy``); None (no
    API access) counts as a namespace without labels.

    Writes through the ``status`` subresource are allowed unchecked: the API server resets the
    spec on them, so re-checking the spec would only wedge the controller's status writes on a
    Workspace admitted under older caps. CREATE, and any UPDATE that changes the spec, get
    every check. An UPDATE that leaves the spec as stored (finalizers, labels, annotations,
    deletion) gets only the status check: the spec was admitted when it was written, and
    re-judging it against caps lowered since would deny the controller's own finalizer
    removal and leave the Workspace stuck in Terminating.
    """
    operation = request.get("operation")
    if operation not in ("CREATE", "UPDATE"):
        return None
    if request.get("subResource"):
        return None
    workspace = request.get("object")
    if not isinstance(workspace, dict):
        return f"request.object must be a Workspace object on {operation} (got none)"
    spec = workspace.get("spec")
    if spec is None:
        spec = {}
    if not isinstance(spec, dict):
        return "spec must be an object"
    namespace = str(
        request.get("namespace") or (workspace.get("metadata") or {}).get("namespace") or ""
    )
    if len(namespace) > MAX_NAME_LENGTH:
        # Not a namespace the API server sent: answered without quoting or keeping it.
        return "request.namespace is not a namespace name"
    labels = namespaces.of(namespace) if namespaces is not None else {}
    # Who may write here, and the owner record, before anything else: a metadata-only UPDATE
    # could otherwise set the record by hand.
    trusted = cfg.trusted_writers.trusts(request.get("userInfo"))
    problem = writers_problem(
        namespace, labels, trusted=trusted, api_namespace=cfg.workspaces_namespace
    )
    if problem:
        return problem
    owner = decide_owner(request, cfg.trusted_writers)
    if owner.problem is not None:
        return owner.problem
    problem = record_problem(request, owner)
    if problem:
        return problem
    vouched = owner.record is not None and owner.record.vouched
    if operation == "UPDATE" and _spec_unchanged(request, spec):
        return _status_problem(request, workspace)
    if nesting_depth(spec, MAX_SPEC_DEPTH) > MAX_SPEC_DEPTH:
        return (
            f"spec nests objects and lists more than {MAX_SPEC_DEPTH} levels deep; no "
            "Workspace field needs that, so flatten the fields you added"
        )
    if operation == "CREATE":
        # CREATE only: a Workspace stored before its namespace was excluded must still be
        # deletable (the controller's finalizer removal is an UPDATE); the controller reports it.
        problem = excluded_namespace_problem(namespace, cfg.excluded_namespaces)
        if problem:
            return problem
        problem = _name_problem(workspace)
        if problem:
            return problem
        member = (
            owner.record.quota_labels().get(LABEL_QUOTA_MEMBER, "")
            if owner.record is not None and owner.record.vouched
            else ""
        )
        problem = member_workspaces_problem(member, cfg.max_workspaces_per_member, members)
        if problem:
            return problem
    for check in (
        _runtime_problem(spec, cfg),
        _catalogue_problem(request, spec, catalogue),
        _storage_problem(spec, cfg),
        _resources_problem(spec, cfg),
        _packages_problem(spec),
        _egress_problem(spec),
        runtime_class_problem(
            spec.get("runtimeClass"), namespace, labels, cfg.allowed_runtime_classes
        ),
        # A vouched owner's org is the trusted writer's word, not the Namespace's.
        None if trusted or vouched else _owner_problem(spec, namespace, labels),
        _status_problem(request, workspace),
    ):
        if check is not None:
            return check
    return None


def _name_problem(workspace: Obj) -> str | None:
    name = str((workspace.get("metadata") or {}).get("name") or "")
    if len(name) > MAX_NAME_LENGTH:
        return (
            f"metadata.name is {len(name)} characters; a Workspace's pod and claim carry its "
            f"name as a label value, which holds at most {MAX_NAME_LENGTH}: choose a shorter name"
        )
    return None


def _spec_unchanged(request: Obj, spec: Obj) -> bool:
    """The UPDATE carries the spec exactly as stored (a missing ``oldObject`` never counts)."""
    old = request.get("oldObject")
    if not isinstance(old, dict):
        return False
    old_spec = old.get("spec")
    return same_json(spec, old_spec if old_spec is not None else {})


def _runtime_problem(spec: Obj, cfg: ValidatorConfig) -> str | None:
    runtime = spec.get("runtime")
    if runtime is None or (isinstance(runtime, str) and not runtime.strip()):
        return "spec.runtime is required: name a RuntimeEnvironment (like 'python') or an image"
    problem = image_syntax_problem("spec.runtime", runtime)
    if problem is None and isinstance(runtime, str) and "/" in runtime:
        problem = registry_problem("spec.runtime", runtime, cfg.allowed_runtime_registries)
    return problem


def _catalogue_problem(request: Obj, spec: Obj, catalogue: Mapping[str, Obj] | None) -> str | None:
    """A bare runtime name must name a RuntimeEnvironment, checked when the name is set or
    changed: a Workspace whose runtime was removed later can still be suspended or deleted
    (the controller reports it as RuntimeNotFound). ``catalogue`` is None only when the
    webhook runs without API access (``wspin demo``), where no Workspace is admitted."""
    runtime = spec.get("runtime")
    if catalogue is None or not isinstance(runtime, str) or "/" in runtime:
        return None
    old = request.get("oldObject")
    kept = isinstance(old, dict) and WorkspaceSpec.of(old.get("spec")).runtime == runtime
    if (request.get("operation") == "UPDATE" and kept) or runtime in catalogue:
        return None
    known = sorted(catalogue)
    listed = ", ".join(known[:20]) + (", ..." if len(known) > 20 else "") if known else "none"
    return (
        f"spec.runtime {runtime!r} names no RuntimeEnvironment (known: {listed}); ask the "
        "platform team to publish one (kubectl get runtimeenvironments), or use an image "
        "from an allowed registry"
    )


def _storage_problem(spec: Obj, cfg: ValidatorConfig) -> str | None:
    storage = spec.get("storage")
    if storage is None:
        storage = {}
    if not isinstance(storage, dict):
        return "spec.storage must be an object with 'size'"
    size = storage.get("size")
    if not isinstance(size, str) or not size.strip():
        return "spec.storage.size is required, like '10Gi'"
    gi = _whole_units(size, GI)
    if isinstance(gi, str):
        return f"spec.storage.size {gi}"
    if cfg.max_storage_gi and gi > cfg.max_storage_gi:
        return (
            f"spec.storage.size {size!r} ({gi} Gi) exceeds the maximum {cfg.max_storage_gi} Gi "
            "(--max-workspace-storage-gi)"
        )
    storage_class = storage.get("storageClassName")
    if storage_class in (None, ""):
        return None
    if not isinstance(storage_class, str):
        return "spec.storage.storageClassName must be a string"
    if len(storage_class) > MAX_STORAGE_CLASS_LENGTH:
        return (
            f"spec.storage.storageClassName is {len(storage_class)} characters; the limit is "
            f"{MAX_STORAGE_CLASS_LENGTH}"
        )
    if cfg.allowed_storage_classes and storage_class not in cfg.allowed_storage_classes:
        return (
            f"spec.storage.storageClassName {storage_class!r} is not allowed (allowed: "
            f"{', '.join(cfg.allowed_storage_classes)}); omit it to use the cluster default"
        )
    return None


@dataclass(frozen=True)
class _Quantity:
    path: str
    value: str


def _resource_fields(resources: Obj) -> dict[str, _Quantity] | str:
    """The four quantities, keyed by cpu/memory and request/limit, from either accepted shape.

    Workspaces use the flat shape (``cpu``, ``memory``, ``cpuLimit``, ``memoryLimit``); the
    Kubernetes shape (``requests``/``limits``) is accepted too, but not both for one quantity.
    """
    found: dict[str, _Quantity] = {}
    flat = {
        "cpu": "cpu",
        "memory": "memory",
        "cpuLimit": "cpu-limit",
        "memoryLimit": "memory-limit",
    }
    for field, key in flat.items():
        if field in resources and resources[field] not in (None, ""):
            found[key] = _Quantity(f"spec.resources.{field}", resources[field])
    for section, suffix in (("requests", ""), ("limits", "-limit")):
        block = resources.get(section)
        if block is None:
            continue
        if not isinstance(block, dict):
            return f"spec.resources.{section} must be an object"
        for name in ("cpu", "memory"):
            if block.get(name) in (None, ""):
                continue
            key = name + suffix
            path = f"spec.resources.{section}.{name}"
            if key in found:
                return f"{path} and {found[key].path} both set the same quantity; keep one"
            found[key] = _Quantity(path, block[name])
    for quantity in found.values():
        if not isinstance(quantity.value, str):
            return f"{quantity.path} must be a string quantity like '500m' or '1Gi'"
    return found


def _cpu_millicores(value: str) -> int | str:
    """A CPU quantity in millicores (rounded up, as the scheduler counts), or why it is
    refused: any Kubernetes quantity ("2", "2000m", "1.5") above zero is accepted."""
    try:
        millis = millicores(value)
    except QuantityError as err:
        return str(err)
    if millis <= 0:
        return f"{value!r} must be above zero"
    return millis


def _whole_units(value: str, unit: int) -> int | str:
    """A memory or storage quantity in ``unit`` bytes (rounded up), or why it is refused: it
    must be above zero and a whole number of bytes ("500m" is half a byte, not 500 MiB)."""
    try:
        count = byte_count(value)
    except QuantityError as err:
        return str(err)
    if count <= 0:
        return f"{value!r} must be above zero"
    if not is_whole(value):
        return f"{value!r} is not a whole number of bytes (for mebibytes write 'Mi', like '512Mi')"
    return -(-count // unit)


def _resources_problem(spec: Obj, cfg: ValidatorConfig) -> str | None:
    resources = spec.get("resources")
    if resources is None:
        resources = {}  # the pod still gets the default requests and derived limits
    if not isinstance(resources, dict):
        return "spec.resources must be an object"
    fields = _resource_fields(resources)
    if isinstance(fields, str):
        return fields
    parsed: dict[str, int] = {}
    for key, quantity in fields.items():
        is_cpu = key.startswith("cpu")
        amount = _cpu_millicores(quantity.value) if is_cpu else _whole_units(quantity.value, MI)
        if isinstance(amount, str):
            return f"{quantity.path} {amount}"
        cap, unit, flag = (
            (cfg.max_cpu_millicores, "millicores", "--max-workspace-cpu-millicores")
            if is_cpu
            else (cfg.max_memory_mi, "Mi", "--max-workspace-memory-mi")
        )
        if cap and amount > cap:
            return (
                f"{quantity.path} {quantity.value!r} ({amount} {unit}) exceeds the maximum "
                f"{cap} {unit} ({flag})"
            )
        parsed[key] = amount
    for name, unit in (("cpu", "millicores"), ("memory", "Mi")):
        request, limit = parsed.get(name), parsed.get(f"{name}-limit")
        problem = _derived_limit_problem(name, unit, request, limit, fields, cfg)
        if problem:
            return problem
        if request is not None and limit is not None and limit < request:
            return (
                f"{fields[name + '-limit'].path} {fields[name + '-limit'].value!r} ({limit} "
                f"{unit}) must be at least the request {fields[name].path} "
                f"{fields[name].value!r} ({request} {unit})"
            )
    return None


def _derived_limit_problem(
    name: str,
    unit: str,
    request: int | None,
    limit: int | None,
    fields: dict[str, _Quantity],
    cfg: ValidatorConfig,
) -> str | None:
    """The pod builder gives a Workspace without a limit ``LIMIT_BURST_FACTOR`` times its
    request (or the default request); that derived limit must respect the cap as well."""
    is_cpu = name == "cpu"
    cap, flag = (
        (cfg.max_cpu_millicores, "--max-workspace-cpu-millicores")
        if is_cpu
        else (cfg.max_memory_mi, "--max-workspace-memory-mi")
    )
    if limit is not None or not cap:
        return None
    if request is None:
        default = DEFAULT_CPU_REQUEST if is_cpu else DEFAULT_MEMORY_REQUEST
        request = millicores(default) if is_cpu else -(-byte_count(default) // MI)
        given = f"the default {name} request {default!r}"
    else:
        given = f"{fields[name].path} {fields[name].value!r}"
    derived = request * LIMIT_BURST_FACTOR
    if derived <= cap:
        return None
    limit_field = "cpuLimit" if is_cpu else "memoryLimit"
    return (
        f"{given} gives a default limit of {LIMIT_BURST_FACTOR} x {request} = {derived} {unit}, "
        f"over the maximum {cap} {unit} ({flag}); set spec.resources.{limit_field} "
        "explicitly"
    )


def _packages_problem(spec: Obj) -> str | None:
    packages = spec.get("packages")
    if packages is None:
        return None
    if not isinstance(packages, list):
        return "spec.packages must be a list of {manager, requirements}"
    for i, package_set in enumerate(packages):
        if not isinstance(package_set, dict):
            return f"spec.packages[{i}] must be an object with 'requirements'"
        requirements = package_set.get("requirements") or []
        if not isinstance(requirements, list):
            return f"spec.packages[{i}].requirements must be a list of strings"
        for j, requirement in enumerate(requirements):
            path = f"spec.packages[{i}].requirements[{j}]"
            if not isinstance(requirement, str):
                return f"{path} must be a string"
            problem = requirement_problem(requirement)
            if problem:
                return f"{path} {requirement!r} {problem}"
    return None


def _egress_problem(spec: Obj) -> str | None:
    access = spec.get("networkAccess")
    if access is None:
        return None
    if not isinstance(access, dict):
        return "spec.networkAccess must be an object"
    egress = access.get("egress") or []
    if not isinstance(egress, list):
        return "spec.networkAccess.egress must be a list of {domain}"
    for i, rule in enumerate(egress):
        path = f"spec.networkAccess.egress[{i}].domain"
        domain = rule.get("domain") if isinstance(rule, dict) else None
        if not isinstance(domain, str):
            return f"{path} must be a string host name"
        problem = domain_problem(domain)
        if problem:
            return f"{path} {domain!r} {problem}"
    return None


def _owner_problem(spec: Obj, namespace: str, labels: Mapping[str, str]) -> str | None:
    """A requester who is no trusted writer names only their Namespace's organisation."""
    owner = spec.get("owner")
    if owner is None:
        return None
    if not isinstance(owner, dict):
        return "spec.owner must be an object with userID and orgID"
    return org_problem(owner.get("orgID"), namespace, labels)


def _is_zero(value: Any) -> bool:
    if isinstance(value, dict):
        return all(_is_zero(v) for v in value.values())
    return value in (None, "", 0, False, [])


def _status_problem(request: Obj, workspace: Obj) -> str | None:
    """Only the controller writes status, through the status subresource.

    On a real API server the subresource split already strips status on CREATE and resets it
    on UPDATE before this runs (fixtures/admission/README.md); this is the fail-closed backstop.
    A missing ``oldObject`` on UPDATE counts as a zero status.
    """
    status = workspace.get("status")
    if request.get("operation") == "CREATE":
        if not _is_zero(status):
            return (
                "status must not be set on CREATE; the controller writes it through the "
                "workspaces/status subresource"
            )
        return None
    old = request.get("oldObject")
    old_status = old.get("status") if isinstance(old, dict) else None
    if _is_zero(status) and _is_zero(old_status):
        return None
    if not same_json(status, old_status):
        return (
            "status cannot be changed through the workspaces endpoint; only the controller "
            "writes it, through the workspaces/status subresource"
        )
    return None
