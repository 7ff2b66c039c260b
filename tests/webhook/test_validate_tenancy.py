"""The Workspace validator's platform-owned decisions: the runtime-class override and the
organisation come from the namespace's labels and the operator's flag, never from anything on
the tenant's own Workspace."""

from __future__ import annotations

from typing import Any

import pytest

from tests.webhook.workspace_requests import create, update, workspace
from webhook.validate import ValidatorConfig, validate_workspace
from wspin.core.objects import ObjectKey
from wspin.core.tenancy import (
    LABEL_ORG,
    LABEL_RUNTIME_CLASS_OVERRIDE,
    RUNTIME_CLASSES_FLAG,
    NamespaceLabels,
)

DEFAULT = ValidatorConfig()
KATA = ValidatorConfig(allowed_runtime_classes=frozenset({"kata"}))


class Namespaces:
    """A watch-fed Namespace cache, as the validator reads it."""

    def __init__(self, **labels: dict[str, str]) -> None:
        self._labels = labels

    def get(self, key: ObjectKey) -> dict[str, Any] | None:
        found = self._labels.get(key.name.replace("-", "_"))
        return None if found is None else {"metadata": {"name": key.name, "labels": found}}


def labelled(labels: dict[str, str]) -> NamespaceLabels:
    return NamespaceLabels(Namespaces(ws_demo=labels))


def gate(
    runtime_class: Any,
    labels: dict[str, str] | None = None,
    cfg: ValidatorConfig = DEFAULT,
    *,
    operation: str = "CREATE",
    annotations: dict[str, str] | None = None,
    labels_on_workspace: dict[str, str] | None = None,
) -> str | None:
    obj = workspace(runtimeClass=runtime_class)
    if annotations is not None:
        obj["metadata"]["annotations"] = annotations
    if labels_on_workspace is not None:
        obj["metadata"]["labels"] = labels_on_workspace
    request = create(obj) if operation == "CREATE" else update(obj, workspace())
    return validate_workspace(request, cfg, None, labelled(labels or {}))


class TestRuntimeClass:
    @pytest.mark.parametrize("operation", ["CREATE", "UPDATE"])
    @pytest.mark.parametrize("runtime_class", ["", "runc", "kata"])
    def test_an_override_is_denied_in_an_unlabelled_namespace(
        self, runtime_class: str, operation: str
    ) -> None:
        message = gate(runtime_class, operation=operation)
        assert message and "spec.runtimeClass" in message
        assert LABEL_RUNTIME_CLASS_OVERRIDE in message and RUNTIME_CLASSES_FLAG in message

    @pytest.mark.parametrize("operation", ["CREATE", "UPDATE"])
    @pytest.mark.parametrize("where", ["annotations", "labels"])
    @pytest.mark.parametrize("runtime_class", ["", "runc"])
    def test_the_tenants_own_annotation_or_label_decides_nothing(
        self, runtime_class: str, where: str, operation: str
    ) -> None:
        """Rule: the override is read from the Namespace's label only, never from the
        Workspace's own labels or annotations: what the tenant writes on its Workspace is the
        tenant's, and it cannot open the gate."""
        own = {LABEL_RUNTIME_CLASS_OVERRIDE: "true"}
        if where == "annotations":
            message = gate(runtime_class, operation=operation, annotations=own)
        else:
            message = gate(runtime_class, operation=operation, labels_on_workspace=own)
        assert message is not None and LABEL_RUNTIME_CLASS_OVERRIDE in message

    @pytest.mark.parametrize("operation", ["CREATE", "UPDATE"])
    @pytest.mark.parametrize("runtime_class", ["", "runc", "kata"])
    def test_a_namespace_the_platform_labelled_may_override(
        self, runtime_class: str, operation: str
    ) -> None:
        labels = {LABEL_RUNTIME_CLASS_OVERRIDE: "true"}
        assert gate(runtime_class, labels, operation=operation) is None

    @pytest.mark.parametrize("value", ["false", "True", "yes", "1", ""])
    def test_any_label_value_but_true_counts_as_absent(self, value: str) -> None:
        assert gate("runc", {LABEL_RUNTIME_CLASS_OVERRIDE: value}) is not None

    def test_an_allow_listed_class_passes_anywhere_and_nothing_else_does(self) -> None:
        assert gate("kata", cfg=KATA) is None
        assert gate("runc", cfg=KATA) is not None
        message = gate("", cfg=KATA)
        assert message and "leaves the sandbox" in message and "kata" in message

    def test_no_runtime_class_is_always_allowed(self) -> None:
        obj = workspace()
        assert validate_workspace(create(obj), DEFAULT, None, labelled({})) is None
        null = workspace(runtimeClass=None)
        assert validate_workspace(create(null), DEFAULT, None, labelled({})) is None

    def test_a_namespace_not_yet_seen_counts_as_unlabelled(self) -> None:
        request = create(workspace(runtimeClass="runc"))
        assert validate_workspace(request, DEFAULT, None, NamespaceLabels(Namespaces())) is not None
        assert validate_workspace(request, DEFAULT) is not None


class TestOrganisation:
    @staticmethod
    def owned(org_id: Any, labels: dict[str, str]) -> str | None:
        obj = workspace(owner={"userID": "u1", "orgID": org_id})
        request = {**create(obj), "userInfo": {"username": "u1"}}
        return validate_workspace(request, DEFAULT, None, labelled(labels))

    def test_the_namespaces_own_org_may_be_stated(self) -> None:
        assert self.owned("acme", {LABEL_ORG: "acme"}) is None

    @pytest.mark.parametrize("org_id", ["", None])
    def test_no_org_may_always_be_stated(self, org_id: str | None) -> None:
        assert self.owned(org_id, {LABEL_ORG: "acme"}) is None
        assert self.owned(org_id, {}) is None

    def test_another_org_is_denied_naming_the_namespaces(self) -> None:
        message = self.owned("globex", {LABEL_ORG: "acme"})
        assert message and "spec.owner.orgID 'globex'" in message and "acme" in message

    def test_an_org_in_a_namespace_of_no_org_is_denied(self) -> None:
        message = self.owned("acme", {})
        assert message and LABEL_ORG in message

    def test_a_malformed_owner_is_denied(self) -> None:
        obj = workspace(owner="acme")
        message = validate_workspace(create(obj), DEFAULT, None, labelled({}))
        assert message and "spec.owner" in message
