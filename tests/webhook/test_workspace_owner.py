"""Who owns a Workspace: believed from a trusted writer, otherwise only the requester
themselves, never changed by a tenant, and recorded where only the webhook's computation
writes it (the mutating step writes the record, the validator re-checks it after every other
mutation)."""

from __future__ import annotations

import base64
import json
from typing import Any

import jsonpatch
import pytest

from tests.webhook.workspace_requests import create, update, workspace
from webhook.admission import review_workspace_owner
from webhook.tenant_quota import MemberWorkspaces
from webhook.validate import ValidatorConfig, validate_workspace
from wspin.core.errors import ConfigError
from wspin.core.objects import Obj, ObjectKey
from wspin.core.owners import (
    ANNOTATION_VERIFIED_OWNER,
    LABEL_QUOTA_MEMBER,
    LABEL_QUOTA_OWNER,
    OwnerRecord,
    TrustedWriters,
    record_of,
    trusted_writers_from,
)
from wspin.core.tenancy import LABEL_ORG, LABEL_WORKSPACE_WRITERS, NamespaceLabels

API = "system:serviceaccount:llmsafespaces:llmsafespaces-api"
WRITERS = trusted_writers_from(f"{API},group:platform")
CFG = ValidatorConfig(trusted_writers=WRITERS)


class _Namespaces:
    def __init__(self, labels: dict[str, str]) -> None:
        self.labels = labels

    def get(self, key: ObjectKey) -> Obj | None:
        return {"metadata": {"name": key.name, "labels": self.labels}}


def owned(user: str = "", org: str = "", **extra: Any) -> Obj:
    return workspace(owner={"userID": user, "orgID": org}, **extra)


def as_(request: Obj, username: str, *groups: str) -> Obj:
    return {**request, "uid": "u-1", "userInfo": {"username": username, "groups": list(groups)}}


def admitted(request: Obj, labels: dict[str, str] | None = None, cfg: ValidatorConfig = CFG) -> Obj:
    """The Workspace as the API server would store it: mutated, then validated (raises the
    denial)."""
    decision = review_workspace_owner(request, cfg.trusted_writers)
    assert decision.response["allowed"]
    obj: Obj = request["object"]
    if "patch" in decision.response:
        ops = json.loads(base64.b64decode(decision.response["patch"]))
        obj = dict(jsonpatch.apply_patch(obj, ops))
    final = {**request, "object": obj}
    problem = validate_workspace(final, cfg, None, NamespaceLabels(_Namespaces(labels or {})))
    if problem is not None:
        raise PermissionError(problem)
    return obj


class TestCreate:
    def test_a_trusted_writer_is_believed_as_written_in_a_namespace_of_no_org(self) -> None:
        stored = admitted(as_(create(owned("user-42", "org-7")), API))
        assert record_of(stored) == OwnerRecord("user-42", "org-7", vouched=True)

    def test_a_trusted_group_and_cluster_admins_are_believed(self) -> None:
        for groups in (("platform",), ("system:masters",)):
            stored = admitted(as_(create(owned("user-42", "org-7")), "someone", *groups))
            assert record_of(stored) == OwnerRecord("user-42", "org-7", vouched=True)

    def test_a_tenant_who_writes_someone_elses_user_id_is_denied(self) -> None:
        with pytest.raises(PermissionError, match=r"spec.owner.userID 'victim' is not you"):
            admitted(as_(create(owned("victim")), "mallory"))

    def test_a_tenant_may_name_themselves_or_nobody_and_is_not_vouched(self) -> None:
        for user in ("mallory", ""):
            stored = admitted(as_(create(owned(user)), "mallory"))
            assert record_of(stored) == OwnerRecord(user, "", vouched=False)

    def test_a_tenant_still_names_only_the_namespaces_org(self) -> None:
        with pytest.raises(PermissionError, match=LABEL_ORG):
            admitted(as_(create(owned("mallory", "org-7")), "mallory"))
        stored = admitted(as_(create(owned("mallory", "org-7")), "mallory"), {LABEL_ORG: "org-7"})
        assert record_of(stored) == OwnerRecord("mallory", "org-7", vouched=False)

    def test_a_record_written_by_hand_is_replaced_by_the_verified_one(self) -> None:
        forged = OwnerRecord("victim", "org-7", vouched=True).encode()
        obj = owned("mallory")
        obj["metadata"]["annotations"] = {ANNOTATION_VERIFIED_OWNER: forged, "keep": "me"}
        stored = admitted(as_(create(obj), "mallory"))
        assert record_of(stored) == OwnerRecord("mallory", "", vouched=False)
        assert stored["metadata"]["annotations"]["keep"] == "me"

    def test_a_record_changed_after_the_mutating_step_is_denied(self) -> None:
        obj = owned("mallory")
        obj["metadata"]["annotations"] = {
            ANNOTATION_VERIFIED_OWNER: OwnerRecord("victim", "", vouched=True).encode()
        }
        problem = validate_workspace(as_(create(obj), "mallory"), CFG)
        assert problem and ANNOTATION_VERIFIED_OWNER in problem

    def test_an_owner_id_over_the_bound_is_denied(self) -> None:
        with pytest.raises(PermissionError, match="the limit is 253"):
            admitted(as_(create(owned("u" * 254)), API))


class TestUpdate:
    def stored(self, user: str, org: str, username: str) -> Obj:
        return admitted(as_(create(owned(user, org)), username))

    def test_a_tenant_cannot_change_the_owner_later(self) -> None:
        old = self.stored("mallory", "", "mallory")
        new = owned("victim")
        new["metadata"]["annotations"] = dict(old["metadata"]["annotations"])
        with pytest.raises(PermissionError, match=r"spec\.owner cannot change"):
            admitted(as_(update(new, old), "mallory"))

    def test_a_trusted_writer_may_change_it_and_it_is_vouched(self) -> None:
        old = self.stored("user-1", "org-7", API)
        stored = admitted(as_(update(owned("user-2", "org-8"), old), API))
        assert record_of(stored) == OwnerRecord("user-2", "org-8", vouched=True)

    def test_other_writes_keep_the_record_even_when_the_request_drops_or_edits_it(self) -> None:
        old = self.stored("user-1", "org-7", API)
        for carried in ({}, {ANNOTATION_VERIFIED_OWNER: "{}"}):
            new = owned("user-1", "org-7", suspend=True)
            new["metadata"]["annotations"] = carried
            stored = admitted(as_(update(new, old), "controller"))
            assert record_of(stored) == OwnerRecord("user-1", "org-7", vouched=True)

    def test_a_workspace_without_a_record_gets_one_only_when_a_trusted_writer_asks(
        self,
    ) -> None:
        old = owned("user-1")  # stored by an earlier release: no record
        asking = owned("user-1")
        asking["metadata"]["annotations"] = {ANNOTATION_VERIFIED_OWNER: "confirm"}
        assert record_of(admitted(as_(update(asking, old), "mallory"))) is None
        assert record_of(admitted(as_(update(owned("user-1"), old), API))) is None
        confirmed = admitted(as_(update(asking, old), API))
        assert record_of(confirmed) == OwnerRecord("user-1", "", vouched=True)


class TestApiManagedNamespaces:
    TRUSTED_ONLY = {LABEL_WORKSPACE_WRITERS: "trusted"}

    def test_a_tenants_write_in_a_trusted_writers_namespace_is_denied_saying_so(self) -> None:
        with pytest.raises(PermissionError, match="only trusted writers"):
            admitted(as_(create(owned("mallory")), "mallory"), self.TRUSTED_ONLY)
        old = admitted(as_(create(owned("u1")), API), self.TRUSTED_ONLY)
        with pytest.raises(PermissionError, match="only trusted writers"):
            admitted(as_(update(owned("u1", suspend=True), old), "mallory"), self.TRUSTED_ONLY)

    def test_the_namespace_the_operator_names_is_one_labelled_or_not(self) -> None:
        cfg = ValidatorConfig(trusted_writers=WRITERS, workspaces_namespace="ws-demo")
        with pytest.raises(PermissionError, match="--workspaces-namespace"):
            admitted(as_(create(owned()), "mallory"), cfg=cfg)
        assert record_of(admitted(as_(create(owned("u1", "o1")), API), cfg=cfg)) is not None


class TestRecord:
    def test_only_a_vouched_owner_gets_quota_labels_digested_to_fit_a_label(self) -> None:
        assert OwnerRecord("alice", "", vouched=False).quota_labels() == {}
        labels = OwnerRecord("a" * 253, "org:with/odd chars", vouched=True).quota_labels()
        assert labels[LABEL_QUOTA_OWNER].startswith("org-")
        assert labels[LABEL_QUOTA_MEMBER].startswith("user-")
        assert all(len(v) <= 63 and v.replace("-", "").isalnum() for v in labels.values())
        user_only = OwnerRecord("bob", "", vouched=True).quota_labels()
        assert user_only[LABEL_QUOTA_OWNER] == user_only[LABEL_QUOTA_MEMBER]

    @pytest.mark.parametrize("value", ["{", "[]", '{"userID":1,"orgID":"","vouched":true}'])
    def test_an_unreadable_record_is_no_record(self, value: str) -> None:
        assert record_of({"metadata": {"annotations": {ANNOTATION_VERIFIED_OWNER: value}}}) is None

    @pytest.mark.parametrize("entry", ["group:", "has space", "x" * 254])
    def test_a_bad_writer_entry_names_the_flag(self, entry: str) -> None:
        with pytest.raises(ConfigError, match="--trusted-workspace-writers"):
            trusted_writers_from(entry)

    def test_writers_are_users_and_groups(self) -> None:
        assert TrustedWriters(frozenset({API}), frozenset({"platform"})) == WRITERS
        assert not WRITERS.trusts({"username": "platform"})
        assert not WRITERS.trusts({"username": "x", "groups": "system:masters"})


class TestWorkspacesPerMember:
    """``--max-workspaces-per-member``: counted per vouched owner user, over every namespace,
    from the Workspace watch; a tenant's own Workspaces are their namespace's business."""

    def test_a_members_next_workspace_over_the_cap_is_denied_and_others_pass(self) -> None:
        members = MemberWorkspaces()
        members.synced = True
        for name, user in (("a1", "alice"), ("a2", "alice"), ("b1", "bob")):
            stored = admitted(as_(create(owned(user, "org-1")), API))
            stored["metadata"]["name"] = name
            members.apply("ADDED", stored, None)
        cfg = ValidatorConfig(trusted_writers=WRITERS, max_workspaces_per_member=2)
        spaces = NamespaceLabels(_Namespaces({}))
        alice = as_(create(owned("alice", "org-1")), API)
        problem = validate_workspace(alice, cfg, None, spaces, members)
        assert problem and "--max-workspaces-per-member" in problem
        bob = as_(create(owned("bob", "org-1")), API)
        assert validate_workspace(bob, cfg, None, spaces, members) is None
        members.apply("DELETED", {"metadata": {"name": "a1", "namespace": "ws-demo"}}, None)
        assert validate_workspace(alice, cfg, None, spaces, members) is None

    def test_a_tenants_own_workspaces_are_not_counted(self) -> None:
        members = MemberWorkspaces()
        members.synced = True
        cfg = ValidatorConfig(trusted_writers=WRITERS, max_workspaces_per_member=1)
        own = as_(create(owned("mallory")), "mallory")
        members.apply("ADDED", admitted(own), None)
        assert validate_workspace(own, cfg, None, NamespaceLabels(_Namespaces({})), members) is None


def test_a_review_naming_a_huge_namespace_is_answered_without_quoting_it() -> None:
    request = {**as_(create(owned("mallory")), "mallory"), "namespace": "n" * 2_900_000}
    problem = validate_workspace(request, CFG)
    assert problem == "request.namespace is not a namespace name"
