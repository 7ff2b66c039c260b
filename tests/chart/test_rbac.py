"""RBAC, object by object: each component gets exactly the grants its code uses, by name where
the object's name is known, and nothing with a wildcard."""

from __future__ import annotations

from typing import Any

import pytest

from tests.chart.helm import NAMESPACE, Rendered

Rule = tuple[str, str, tuple[str, ...], tuple[str, ...]]
"""(apiGroup, resource, resourceNames, verbs), one per resource of a rule."""

ROLE_KINDS = ("Role", "ClusterRole")
SECRET_READ_VERBS = {"get", "list", "watch"}


def grants(role: dict[str, Any]) -> set[Rule]:
    out = set()
    for rule in role.get("rules") or []:
        for group in rule.get("apiGroups", []):
            for resource in rule.get("resources", []):
                out.add(
                    (
                        group,
                        resource,
                        tuple(sorted(rule.get("resourceNames") or ())),
                        tuple(sorted(rule["verbs"])),
                    )
                )
    return out


def role(rendered: Rendered, kind: str, name: str, namespace: str | None = None) -> set[Rule]:
    doc = rendered.get(kind, name)
    if kind == "Role":
        assert doc["metadata"]["namespace"] == (namespace or NAMESPACE)
    return grants(doc)


def verbs(*names: str) -> tuple[str, ...]:
    return tuple(sorted(names))


PINS = ("llmsafespaces-agentd-pins", "llmsafespaces-opencode-pins")
WEBHOOK_ROLE_BASE = {
    ("", "configmaps", PINS, verbs("get", "update")),
    ("", "configmaps", (), verbs("create")),
    ("", "pods", (), verbs("create")),
}
WEBHOOK_ROLE_SELF_MANAGED = WEBHOOK_ROLE_BASE | {
    ("", "secrets", ("wspin-webhook-tls",), verbs("get", "update")),
    ("", "secrets", (), verbs("create")),
    ("coordination.k8s.io", "leases", ("wspin-webhook-tls-authority",), verbs("get", "update")),
    ("coordination.k8s.io", "leases", (), verbs("create")),
    ("", "configmaps", ("wspin-webhook-tls-serving",), verbs("get", "patch")),
    ("", "configmaps", (), verbs("create")),
    ("discovery.k8s.io", "endpointslices", (), verbs("list")),
}
WEBHOOK_CONFIGS = {
    (
        "admissionregistration.k8s.io",
        "mutatingwebhookconfigurations",
        ("wspin-webhook-wspin",),
        verbs("get", "update"),
    ),
    (
        "admissionregistration.k8s.io",
        "validatingwebhookconfigurations",
        ("wspin-webhook-wspin-workspaces",),
        verbs("get", "update"),
    ),
}
CONTROLLER_CLUSTER_BASE = {
    ("llmsafespaces.dev", "workspaces", (), verbs("get", "list", "watch", "patch", "delete")),
    ("llmsafespaces.dev", "workspaces/status", (), verbs("patch")),
    ("llmsafespaces.dev", "workspaces/finalizers", (), verbs("update")),
    ("", "pods", (), verbs("get", "list", "watch", "create", "delete")),
    ("", "persistentvolumeclaims", (), verbs("get", "list", "watch", "create", "delete")),
    ("", "serviceaccounts", (), verbs("get", "create")),
    # Each workspace's password Secret, written blind (created or replaced whole, never read).
    ("", "secrets", (), verbs("create", "update")),
    ("", "events", (), verbs("create", "list")),
    ("llmsafespaces.dev", "runtimeenvironments", (), verbs("list", "watch")),
    ("", "namespaces", (), verbs("list", "watch")),  # the platform's labels, read only
    (
        "networking.k8s.io",
        "networkpolicies",
        (),
        verbs("list", "watch", "create", "update", "delete"),
    ),
}
CONTROLLER_CLUSTER_FULL = CONTROLLER_CLUSTER_BASE | {
    ("llmsafespaces.dev", "inferencerelays", (), verbs("list", "watch", "patch")),
    ("llmsafespaces.dev", "inferencerelays/status", (), verbs("patch")),
    ("", "namespaces", ("kube-system",), verbs("get")),
    ("", "secrets", (), verbs("get", "create", "update")),
}
CREDENTIALS_KEY = {
    ("", "secrets", ("wspin-workspace-credentials",), verbs("get")),
    ("", "secrets", (), verbs("create")),
}
"""The workspace credentials key in the release namespace: read by name, created once."""
LEADER_LEASE = {
    ("coordination.k8s.io", "leases", ("wspin-controller",), verbs("get", "update")),
    ("coordination.k8s.io", "leases", (), verbs("create")),
}
CONTROLLER_ROLE_BASE = CREDENTIALS_KEY | LEADER_LEASE
CONTROLLER_ROLE_FULL = CONTROLLER_ROLE_BASE | {
    ("", "configmaps", ("relay-router-peers",), verbs("get", "update")),
    ("", "secrets", ("relay-vm-tokens",), verbs("get", "update")),
    ("", "configmaps", (), verbs("create")),
}
CLOUD_CREDENTIALS = ("", "secrets", ("aws-relay-irwa", "oci-credentials"), verbs("get"))
RELAY_STAGING_ROLE = {
    ("", "secrets", (), verbs("create", "update", "deletecollection")),
    ("", "secrets", ("llm-relay-hpke-pub", "llm-relay-mint-key"), verbs("get")),
}


def test_webhook_role_in_self_managed_mode(default_render: Rendered) -> None:
    assert role(default_render, "Role", "wspin-webhook") == WEBHOOK_ROLE_SELF_MANAGED
    assert role(default_render, "ClusterRole", "wspin-webhook-wspin") == WEBHOOK_CONFIGS


def test_pins_given_in_values_need_no_pins_cache(full_render: Rendered) -> None:
    # Both artifacts' hashes are set: the webhook never reads or writes a pins ConfigMap.
    granted = role(full_render, "Role", "wspin-webhook")
    assert not [rule for rule in granted if rule[1] == "configmaps" and _pins(rule[2])]


def test_only_the_artifact_resolved_from_the_registry_gets_its_pins_cache() -> None:
    from tests.chart.helm import render

    rendered = render(
        sets={
            "agentdDelivery.binarySHA256Amd64": "a" * 64,
            "agentdDelivery.binarySHA256Arm64": "b" * 64,
        }
    )
    granted = role(rendered, "Role", "wspin-webhook")
    assert ("", "configmaps", ("llmsafespaces-opencode-pins",), verbs("get", "update")) in granted
    assert [rule for rule in granted if rule[1] == "configmaps" and _pins(rule[2])] == [
        ("", "configmaps", ("llmsafespaces-opencode-pins",), verbs("get", "update"))
    ]


def _pins(names: tuple[str, ...]) -> bool:
    """A rule naming a pins cache (the serving-report ConfigMap is another matter)."""
    return any(name.endswith("-pins") for name in names)


@pytest.mark.parametrize("mode", ["certManager", "provided"])
def test_with_mounted_certificates_the_webhook_reads_no_secret_and_patches_no_configuration(
    renders: Any, mode: str
) -> None:
    rendered = renders[mode]
    assert role(rendered, "Role", "wspin-webhook") == WEBHOOK_ROLE_BASE
    assert [d["metadata"]["name"] for d in rendered.of_kind("ClusterRole")] == [
        "wspin-controller-wspin",
        "wspin-webhook-views-wspin",
    ]


def is_dry_run(policy: dict[str, Any]) -> bool:
    """The policy holding pod-creating accounts to dry runs (the workspace-pod policies are
    tested in test_admission_policies.py)."""
    return str(policy["metadata"]["name"]).endswith("-dry-run-only")


def dry_run_policy(rendered: Rendered) -> dict[str, Any]:
    (policy,) = [p for p in rendered.of_kind("ValidatingAdmissionPolicy") if is_dry_run(p)]
    return policy


def test_skipping_the_image_volume_probe_drops_pod_create_and_its_policy() -> None:
    from tests.chart.helm import render

    rendered = render(sets={"webhook.skipImageVolumeProbe": True, "tests.enabled": False})
    assert role(rendered, "Role", "wspin-webhook") == WEBHOOK_ROLE_SELF_MANAGED - {
        ("", "pods", (), verbs("create"))
    }
    assert [p for p in rendered.of_kind("ValidatingAdmissionPolicy") if is_dry_run(p)] == []


def test_the_helm_test_account_is_held_to_dry_runs_even_without_the_webhook_probe() -> None:
    from tests.chart.helm import render

    rendered = render(sets={"webhook.skipImageVolumeProbe": True})
    (condition,) = dry_run_policy(rendered)["spec"]["matchConditions"]
    assert condition["expression"] == (
        'request.userInfo.username in ["system:serviceaccount:wspin:wspin-test"]'
    )


def test_controller_grants_by_default(default_render: Rendered) -> None:
    assert role(default_render, "ClusterRole", "wspin-controller-wspin") == CONTROLLER_CLUSTER_BASE
    assert role(default_render, "Role", "wspin-controller") == CONTROLLER_ROLE_BASE
    names = {d["metadata"]["name"] for d in default_render.of_kind("Role")}
    assert "wspin-controller-relay-staging" not in names


def test_controller_grants_with_relay_staging_and_inference_relay(full_render: Rendered) -> None:
    # full.yaml runs the fake cloud, which reads no credential Secret.
    assert role(full_render, "ClusterRole", "wspin-controller-wspin") == CONTROLLER_CLUSTER_FULL
    assert role(full_render, "Role", "wspin-controller") == CONTROLLER_ROLE_FULL
    staging = role(full_render, "Role", "wspin-controller-relay-staging", namespace="llm-relay")
    assert staging == RELAY_STAGING_ROLE


def test_no_rule_uses_a_wildcard(any_render: Rendered) -> None:
    for doc in (d for kind in ROLE_KINDS for d in any_render.of_kind(kind)):
        for rule in doc["rules"]:
            for key in ("apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs"):
                assert "*" not in (rule.get(key) or []), (doc["metadata"]["name"], rule)
                assert not any("*" in item for item in rule.get(key) or []), rule


def test_no_role_can_escalate_bind_or_impersonate(any_render: Rendered) -> None:
    for doc in (d for kind in ROLE_KINDS for d in any_render.of_kind(kind)):
        for group, resource, _, granted in grants(doc):
            assert not {"escalate", "bind", "impersonate"} & set(granted), (resource, granted)
            assert group != "rbac.authorization.k8s.io", doc["metadata"]["name"]


def test_no_role_lists_or_watches_secrets(any_render: Rendered) -> None:
    # A list or watch returns every Secret's data; reads of Secrets are by name only, except
    # the per-workspace relay handoff Secret whose name varies (get, never list).
    for doc in (d for kind in ROLE_KINDS for d in any_render.of_kind(kind)):
        for _, resource, _, granted in grants(doc):
            if resource == "secrets":
                assert not {"list", "watch"} & set(granted), doc["metadata"]["name"]


def test_names_the_webhook_knows_are_granted_only_by_resource_names(any_render: Rendered) -> None:
    # Every verb that reads or changes an existing object of these kinds is name-restricted;
    # only create (the object does not exist yet) goes without names.
    named_kinds = {
        "configmaps",
        "leases",
        "mutatingwebhookconfigurations",
        "validatingwebhookconfigurations",
    }
    for doc in any_render.of_kind("Role") + any_render.of_kind("ClusterRole"):
        if not doc["metadata"]["name"].startswith("wspin-webhook"):
            continue
        for _, resource, names, granted in grants(doc):
            if resource in named_kinds | {"secrets"} and granted != ("create",):
                assert names, (resource, granted)


def test_the_webhook_cannot_create_webhook_configurations(any_render: Rendered) -> None:
    # So a replica still running after `helm uninstall` cannot bring a configuration back.
    for doc in (d for kind in ROLE_KINDS for d in any_render.of_kind(kind)):
        for _, resource, _, granted in grants(doc):
            if resource.endswith("webhookconfigurations"):
                assert "create" not in granted and "delete" not in granted


def test_each_binding_names_a_rendered_role_and_the_deployments_service_account(
    any_render: Rendered,
) -> None:
    accounts = {
        d["spec"]["template"]["spec"]["serviceAccountName"]
        for d in any_render.of_kind("Deployment")
    }
    rendered_accounts = {d["metadata"]["name"] for d in any_render.of_kind("ServiceAccount")}
    assert accounts <= rendered_accounts
    for binding_kind, role_kind in (("RoleBinding", "Role"), ("ClusterRoleBinding", "ClusterRole")):
        for binding in any_render.of_kind(binding_kind):
            ref = binding["roleRef"]
            assert ref["kind"] == role_kind
            target = any_render.get(role_kind, ref["name"])
            if role_kind == "Role":
                assert target["metadata"]["namespace"] == binding["metadata"]["namespace"]
            for subject in binding["subjects"]:
                assert subject["kind"] == "ServiceAccount"
                assert subject["name"] in rendered_accounts
                assert subject["namespace"] == NAMESPACE


def test_the_dry_run_policy_binds_the_webhook_account_to_dry_run_pod_creates(
    default_render: Rendered,
) -> None:
    policy = dry_run_policy(default_render)
    (binding,) = [
        b
        for b in default_render.of_kind("ValidatingAdmissionPolicyBinding")
        if b["spec"]["policyName"] == policy["metadata"]["name"]
    ]
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    assert binding["spec"]["validationActions"] == ["Deny"]
    (rule,) = policy["spec"]["matchConstraints"]["resourceRules"]
    assert (rule["resources"], rule["operations"]) == (["pods"], ["CREATE"])
    (condition,) = policy["spec"]["matchConditions"]
    # Both accounts that may create pods: the webhook (image-volume probe) and helm test's.
    assert condition["expression"] == (
        "request.userInfo.username in "
        '["system:serviceaccount:wspin:wspin-webhook","system:serviceaccount:wspin:wspin-test"]'
    )
    test_pod = default_render.one("Pod")
    assert test_pod["spec"]["serviceAccountName"] == "wspin-test"
    assert [v["expression"] for v in policy["spec"]["validations"]] == ["request.dryRun == true"]


def test_the_webhook_role_secret_name_matches_its_secret_flag(renders: Any) -> None:
    from tests.chart.helm import flag_values

    rendered = renders["selfManaged"]
    (secret,) = flag_values(rendered.args("webhook"), "--secret")
    names = {
        n for _, r, ns, _ in role(rendered, "Role", "wspin-webhook") if r == "secrets" for n in ns
    }
    assert names == {secret}


def test_the_real_cloud_drivers_may_read_exactly_their_two_credential_secrets() -> None:
    from tests.chart.helm import render

    rendered = render(("minimal.yaml", "full.yaml"), {"controller.inferenceRelay.cloud": ""})
    assert role(rendered, "Role", "wspin-controller") == CONTROLLER_ROLE_FULL | {CLOUD_CREDENTIALS}


def test_known_workspace_namespaces_get_handoff_secret_roles_instead_of_a_cluster_rule() -> None:
    from tests.chart.helm import render

    rendered = render(
        ("minimal.yaml", "full.yaml"),
        {"controller.relayStaging.workspaceNamespaces": ["team-a", "team-b"]},
    )
    cluster = role(rendered, "ClusterRole", "wspin-controller-wspin")
    # Only the blind writes of password Secrets stay cluster-wide; no read.
    assert [rule for rule in cluster if rule[1] == "secrets"] == [
        ("", "secrets", (), verbs("create", "update"))
    ]
    handoff = ("", "secrets", (), verbs("get", "create", "update"))
    roles = [d for d in rendered.of_kind("Role") if d["metadata"]["name"].endswith("-handoff")]
    assert sorted(d["metadata"]["namespace"] for d in roles) == ["team-a", "team-b"]
    for doc in roles:
        assert grants(doc) == {handoff}
        (binding,) = [
            b
            for b in rendered.of_kind("RoleBinding")
            if b["metadata"]["namespace"] == doc["metadata"]["namespace"]
        ]
        assert binding["roleRef"]["name"] == doc["metadata"]["name"]
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": "wspin-controller", "namespace": NAMESPACE}
        ]


def test_a_configured_cluster_id_drops_the_kube_system_read() -> None:
    from tests.chart.helm import render

    rendered = render(
        ("minimal.yaml", "full.yaml"), {"controller.inferenceRelay.clusterID": "prod-eu-1"}
    )
    grants = role(rendered, "ClusterRole", "wspin-controller-wspin")
    assert grants == CONTROLLER_CLUSTER_FULL - {("", "namespaces", ("kube-system",), verbs("get"))}
    args = next(
        c["args"]
        for d in rendered.of_kind("Deployment")
        if d["metadata"]["name"] == "wspin-controller"
        for c in d["spec"]["template"]["spec"]["containers"]
    )
    assert "--relay-cluster-id=prod-eu-1" in args
    assert "--orphan-regions=aws:us-east-1,oci:us-ashburn-1" in args


@pytest.mark.parametrize(
    ("sets", "api_versions", "expected"),
    [
        ({}, (), ("networking.k8s.io", "networkpolicies")),
        ({}, ("cilium.io/v2/CiliumNetworkPolicy",), ("cilium.io", "ciliumnetworkpolicies")),
        (
            {"controller.workspaces.egress.mode": "cilium"},
            (),
            ("cilium.io", "ciliumnetworkpolicies"),
        ),
        ({"controller.workspaces.egress.mode": "off"}, (), None),
    ],
    ids=["auto-without-cilium", "auto-with-cilium", "cilium", "off"],
)
def test_egress_policies_are_granted_for_the_kind_the_controller_writes(
    sets: dict[str, str], api_versions: tuple[str, ...], expected: tuple[str, str] | None
) -> None:
    from tests.chart.helm import flag_values, render

    rendered = render(sets=sets, api_versions=api_versions)
    rules = {
        (group, resource)
        for rule in rendered.get("ClusterRole", "wspin-controller-wspin")["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        if resource.endswith("networkpolicies")
    }
    assert rules == ({expected} if expected else set())
    mode = {None: "off", "networkpolicies": "networkpolicy", "ciliumnetworkpolicies": "cilium"}
    wanted = mode[expected[1] if expected else None]
    assert flag_values(rendered.args("controller"), "--workspace-egress") == [wanted]
