"""``wspin.core.workspace``: each Workspace field is read in one module, and a malformed object
reads as its readers have always read it, never as an exception."""

from __future__ import annotations

import ast
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from wspin.core.workspace import Workspace, WorkspaceSpec, WorkspaceStatus

ROOT = Path(__file__).resolve().parents[2]


def spec(**fields: Any) -> WorkspaceSpec:
    return WorkspaceSpec.of(fields)


def status(**fields: Any) -> WorkspaceStatus:
    return WorkspaceStatus.of(fields)


# -- a well-formed Workspace ------------------------------------------------------------------


def test_a_well_formed_workspace_reads_every_field() -> None:
    obj = {
        "metadata": {
            "name": "ws",
            "namespace": "team",
            "uid": "u-1",
            "generation": 4,
            "resourceVersion": "17",
            "labels": {"a": "b"},
            "annotations": {"c": "d"},
        },
        "spec": {
            "runtime": "python",
            "architecture": "arm64",
            "runtimeClass": "kata",
            "restartGeneration": 2,
            "suspend": True,
            "maxActiveSessions": 7,
            "networkAccess": {"devPreview": True, "egress": [{"domain": "pypi.org"}]},
            "autoSuspend": {"enabled": True, "idleTimeoutSeconds": 600},
            "timeout": 3600,
            "ttlSecondsAfterSuspended": 60,
            "owner": {"userID": "alice", "orgID": "acme"},
            "securityLevel": "high",
            "initScript": "echo hi",
        },
        "status": {
            "phase": "Active",
            "reason": "Ready",
            "message": "up",
            "failureReason": "PodBuildFailed",
            "conditions": [{"type": "Ready"}],
            "pvcName": "workspace-ws",
            "pvcUID": "p-1",
            "restartCount": 3,
            "observedRestartGeneration": 2,
            "credentialsRotation": 2,
            "consecutiveFailures": 1,
            "observedGeneration": 4,
            "startTime": "2026-01-02T03:04:05Z",
            "relayStaging": {"stagedFor": "team/u-1"},
            "secretsDelivery": {"relayRevision": "r1"},
        },
    }
    ws = Workspace.of(obj)
    assert (ws.name, ws.namespace, ws.uid, ws.generation, ws.resource_version) == (
        "ws",
        "team",
        "u-1",
        4,
        "17",
    )
    assert (dict(ws.labels), dict(ws.annotations), ws.deleting) == ({"a": "b"}, {"c": "d"}, False)
    s = ws.spec
    assert (s.runtime, s.architecture, s.runtime_class) == ("python", "arm64", "kata")
    assert (s.restart_generation, s.restart_generation_or_zero, s.suspend) == (2, 2, True)
    assert (s.max_active_sessions, s.dev_preview, s.egress) == (7, True, [{"domain": "pypi.org"}])
    assert (s.auto_suspend_enabled, s.idle_timeout_seconds) == (True, 600)
    assert (s.timeout, s.ttl_seconds_after_suspended, s.security_level) == (3600, 60, "high")
    assert (s.owner, s.owner_user_id, s.owner_org_id) == (("alice", "acme"), "alice", "acme")
    assert s.init_script == "echo hi"
    t = ws.status
    assert (t.phase, t.reason, t.message, t.failure_reason) == (
        "Active",
        "Ready",
        "up",
        "PodBuildFailed",
    )
    assert (t.conditions, t.pvc_name, t.pvc_uid) == ([{"type": "Ready"}], "workspace-ws", "p-1")
    assert (t.restart_count, t.observed_restart_generation, t.credentials_rotation) == (3, 2, 2)
    assert (t.consecutive_failures, t.observed_generation) == (1, 4)
    assert t.start_time == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert t.relay_staging == {"stagedFor": "team/u-1"}
    assert dict(t.secrets_delivery) == {"relayRevision": "r1"}


def test_the_view_is_frozen_and_keeps_the_object_it_was_built_from() -> None:
    obj: dict[str, Any] = {"metadata": {"name": "ws"}, "spec": {"runtime": "python"}}
    ws = Workspace.of(obj)
    assert ws.obj is obj and ws.spec.raw is obj["spec"]
    with pytest.raises(AttributeError):
        ws.spec = WorkspaceSpec.of({})  # type: ignore[misc]


# -- malformed objects read as absent, never raise --------------------------------------------


@pytest.mark.parametrize("bad", [None, [], "spec", 5, True])
def test_a_spec_or_status_that_is_not_an_object_reads_as_empty(bad: Any) -> None:
    ws = Workspace.of({"spec": bad, "status": bad, "metadata": bad})
    assert (ws.spec.runtime, ws.spec.restart_generation_or_zero, ws.spec.egress) == (None, 0, [])
    assert (ws.spec.suspend, ws.spec.dev_preview, ws.spec.owner) == (None, False, ("", ""))
    assert (ws.status.phase, ws.status.conditions, ws.status.restart_count) == ("", [], 0)
    assert (ws.name, ws.uid, ws.generation, ws.deleting) == ("", "", 0, False)


@pytest.mark.parametrize(
    ("given", "read"),
    [("python", "python"), ("", ""), (5, None), (["python"], None), (None, None)],
)
def test_the_runtime_is_a_string_or_nothing(given: Any, read: str | None) -> None:
    assert spec(runtime=given).runtime == read


@pytest.mark.parametrize("given", [None, "", "kata", 5, False])
def test_a_runtime_class_reads_as_written_for_the_tenancy_gate_to_check(given: Any) -> None:
    # "" is a choice (no runtime class), and a number must reach the gate as a number.
    assert spec(runtimeClass=given).runtime_class is given


@pytest.mark.parametrize(
    ("given", "whole"), [(3, 3), (0, 0), (-1, 0), (True, 0), ("3", 0), (2.0, 0), (None, 0)]
)
def test_a_restart_generation_is_counted_only_as_a_whole_number(given: Any, whole: int) -> None:
    view = spec(restartGeneration=given)
    assert view.restart_generation == given  # as written: the pod builder refuses the rest
    assert view.restart_generation_or_zero == whole


@pytest.mark.parametrize(
    ("given", "read"), [(1, 1), (20, 20), (0, None), (21, None), (True, None), ("5", None)]
)
def test_max_active_sessions_outside_the_crd_range_reads_as_unset(
    given: Any, read: int | None
) -> None:
    assert spec(maxActiveSessions=given).max_active_sessions == read


@pytest.mark.parametrize(
    ("access", "preview", "egress"),
    [
        ({"devPreview": True, "egress": [1]}, True, [1]),
        ({"devPreview": "true", "egress": "pypi.org"}, False, []),
        ({"devPreview": 1}, False, []),
        (["devPreview"], False, []),
        ("open", False, []),
    ],
)
def test_network_access_is_read_only_as_declared(
    access: Any, preview: bool, egress: list[Any]
) -> None:
    view = spec(networkAccess=access)
    assert (view.dev_preview, view.egress) == (preview, egress)


@pytest.mark.parametrize(
    ("given", "read"), [(True, True), (False, False), ("true", None), (1, None)]
)
def test_only_a_boolean_is_a_suspend_request(given: Any, read: bool | None) -> None:
    assert spec(suspend=given).suspend is read


@pytest.mark.parametrize(
    ("auto", "enabled", "seconds"),
    [
        ({"idleTimeoutSeconds": 60}, True, 60),
        ({"enabled": False, "idleTimeoutSeconds": 60}, False, 60),
        ({"enabled": "no"}, True, None),
        ({"idleTimeoutSeconds": True}, True, None),
        ("off", False, None),
        (None, False, None),
    ],
)
def test_auto_suspend_reads_an_object_only(auto: Any, enabled: bool, seconds: int | None) -> None:
    view = spec(autoSuspend=auto)
    assert (view.auto_suspend_enabled, view.idle_timeout_seconds) == (enabled, seconds)


@pytest.mark.parametrize("given", ["3600", True, 1.5, None])
def test_lifetime_and_ttl_that_are_not_integers_read_as_unset(given: Any) -> None:
    view = spec(timeout=given, ttlSecondsAfterSuspended=given)
    assert (view.timeout, view.ttl_seconds_after_suspended) == (None, None)


@pytest.mark.parametrize(
    ("owner", "read", "user", "org"),
    [
        ({"userID": "alice"}, ("alice", ""), "alice", ""),
        ({"userID": 5}, "spec.owner.userID must be a string", "", ""),
        ("alice", "spec.owner must be an object with userID and orgID", "", ""),
        ({"orgID": "x" * 254}, "spec.owner.orgID is 254 characters; the limit is 253", "", ""),
    ],
)
def test_a_malformed_owner_says_why_and_names_no_one(
    owner: Any, read: tuple[str, str] | str, user: str, org: str
) -> None:
    view = spec(owner=owner)
    assert (view.owner, view.owner_user_id, view.owner_org_id) == (read, user, org)


def test_the_spec_without_suspend_keeps_every_other_field() -> None:
    assert spec(runtime="python", suspend=True).without_suspend() == {"runtime": "python"}


def test_malformed_status_fields_read_as_their_readers_always_read_them() -> None:
    view = status(
        phase=5,
        reason=None,
        conditions={"type": "Ready"},
        pvcName=None,
        restartCount="3",
        observedRestartGeneration=True,
        credentialsRotation=-2,
        consecutiveFailures=True,
        startTime="yesterday",
        secretsDelivery=["r1"],
    )
    assert (view.phase, view.reason, view.conditions, view.pvc_name) == ("5", "", [], "")
    assert (view.restart_count, view.observed_restart_generation) == (0, None)
    assert (view.credentials_rotation, view.consecutive_failures) == (0, 0)
    assert (view.start_time, dict(view.secrets_delivery)) == (None, {})


def test_a_deletion_timestamp_means_deleting() -> None:
    ws = Workspace.of({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}})
    assert ws.deleting


# -- one module names each field --------------------------------------------------------------

SPEC_FIELDS = frozenset(
    {
        "runtime",
        "architecture",
        "runtimeClass",
        "podSecurityContext",
        "suspend",
        "restartGeneration",
        "autoSuspend",
        "idleTimeoutSeconds",
        "ttlSecondsAfterSuspended",
        "maxActiveSessions",
        "owner",
        "initScript",
        "networkAccess",
        "devPreview",
        "egress",
        "securityLevel",
        "storage",
        "packages",
    }
)
"""Workspace spec fields (``resources`` and ``timeout`` are left out: pods and clients read
fields of those names too)."""
STATUS_FIELDS = frozenset(
    {
        "failureReason",
        "pvcName",
        "pvcUID",
        "observedRestartGeneration",
        "credentialsRotation",
        "relayStaging",
        "secretsDelivery",
        "consecutiveHealthFailures",
        "controllerRestartCount",
        "suspendedAt",
        "lastActivityAt",
    }
)
"""Workspace status fields no other object has."""

VIEW = Path("wspin/core/workspace.py")
READERS_OF_THE_REQUEST = {
    Path("webhook/validate.py"),  # checks the raw request body's JSON types
    Path("wspin/core/owners.py"),  # spec.owner as admission checks it (the view asks it)
}
"""Modules that read the fields of a Workspace as written, to check them."""


def product_modules() -> list[Path]:
    found = []
    for top in ("controller", "webhook", "wspin"):
        for path in sorted((ROOT / top).rglob("*.py")):
            relative = path.relative_to(ROOT)
            if relative == VIEW or relative in READERS_OF_THE_REQUEST:
                continue
            found.append(relative)
    return found


def field_reads(path: Path, names: frozenset[str]) -> list[str]:
    """``x.get("field")``, ``x.pop("field")`` and ``x["field"]`` reads of ``names``."""
    found = []
    for node in ast.walk(ast.parse((ROOT / path).read_text(), str(path))):
        key: object = None
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("get", "pop")
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            key = node.args[0].value
        elif (
            isinstance(node, ast.Subscript)
            and isinstance(node.ctx, ast.Load)
            and isinstance(node.slice, ast.Constant)
        ):
            key = node.slice.value
        if isinstance(key, str) and key in names:
            found.append(f"{path}:{getattr(node, 'lineno', 0)} reads {key!r}")
    return found


def test_the_scan_finds_the_reads_it_looks_for() -> None:
    # The scan itself can fail: the view is full of the reads every other module is denied.
    reads = field_reads(VIEW, SPEC_FIELDS | STATUS_FIELDS)
    assert any("'runtime'" in read for read in reads)
    assert any("'pvcUID'" in read for read in reads)


def test_no_module_but_the_view_reads_a_workspace_spec_field() -> None:
    modules = product_modules()
    assert Path("controller/workspace/pod/builder.py") in modules
    assert Path("controller/workspace/reconcile/record.py") in modules
    reads = [read for path in modules for read in field_reads(path, SPEC_FIELDS | STATUS_FIELDS)]
    assert reads == []


def test_no_module_but_the_view_names_a_workspace_only_status_field() -> None:
    """A writer refers to the view's constant, so the name cannot drift between the two."""
    named = [
        f"{path}:{node.lineno} names {node.value!r}"
        for path in product_modules()
        for node in ast.walk(ast.parse((ROOT / path).read_text()))
        if isinstance(node, ast.Constant) and node.value in STATUS_FIELDS
    ]
    assert named == []
