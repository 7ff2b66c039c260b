"""The Workspace validator: every check with the field it names, Kubernetes quantities as
users write them, the flags, and real captures."""

from __future__ import annotations

import argparse
import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fixtures import ADMISSION
from tests.webhook.conftest import LiveWebhook
from tests.webhook.workspace_requests import create, update, workspace
from webhook.settings import add_validator_flags, validator_config_from_args
from webhook.validate import MAX_SPEC_DEPTH, ValidatorConfig, validate_workspace
from wspin.core.errors import ConfigError

CAPTURES = ADMISSION
DEFAULT = ValidatorConfig()
GHCR = ValidatorConfig(allowed_runtime_registries=("ghcr.io/acme/",))


def denial(cfg: ValidatorConfig = DEFAULT, **spec: Any) -> str | None:
    return validate_workspace(create(workspace(**spec)), cfg)


class TestRuntime:
    def test_a_runtime_environment_name_is_allowed_with_no_registries(self) -> None:
        assert denial(runtime="python-3.11") is None

    def test_an_image_from_an_allowed_registry_is_allowed(self) -> None:
        assert denial(GHCR, runtime="ghcr.io/acme/runtime-python:3.12") is None

    def test_an_image_from_another_registry_is_denied_naming_the_allowed_prefixes(self) -> None:
        message = denial(GHCR, runtime="evil.example.com/x:latest")
        assert message and "spec.runtime" in message and "ghcr.io/acme/" in message

    def test_an_image_is_denied_when_no_registry_is_allowed(self) -> None:
        message = denial(runtime="ghcr.io/acme/runtime:1")
        assert message and "--allowed-runtime-registries" in message

    def test_a_bare_name_must_name_a_runtime_environment(self) -> None:
        catalogue = {"python": {"metadata": {"name": "python"}}}
        assert validate_workspace(create(workspace(runtime="python")), GHCR, catalogue) is None
        message = validate_workspace(create(workspace(runtime="ruby")), GHCR, catalogue)
        assert message and "names no RuntimeEnvironment (known: python)" in message
        assert "kubectl get runtimeenvironments" in message

    def test_an_image_reference_is_not_looked_up_in_the_catalogue(self) -> None:
        request = create(workspace(runtime="ghcr.io/acme/runtime-python:3.12"))
        assert validate_workspace(request, GHCR, {}) is None

    def test_a_runtime_removed_later_does_not_block_updates_that_keep_it(self) -> None:
        old = workspace(runtime="python")
        new = workspace(runtime="python", suspend=True)
        assert validate_workspace(update(new, old), GHCR, {}) is None
        changed = workspace(runtime="ruby")
        assert validate_workspace(update(changed, old), GHCR, {}) is not None

    def test_a_prefix_without_trailing_slash_is_normalized_so_lookalikes_fail(self) -> None:
        args = parse(["--allowed-runtime-registries", "ghcr.io/acme, registry.k8s.io/"])
        cfg = validator_config_from_args(args, "")
        assert cfg.allowed_runtime_registries == ("ghcr.io/acme/", "registry.k8s.io/")
        assert denial(cfg, runtime="ghcr.io/acme/rt:1") is None
        assert denial(cfg, runtime="ghcr.io/acme.evil.com/rt:1") is not None

    @pytest.mark.parametrize(
        ("runtime", "fragment"),
        [
            ("", "required"),
            ("   ", "required"),
            ("../../etc/passwd", "traversal"),
            ("py\x00thon", "NUL"),
            ("py\\thon", "backslash"),
            ("py thon", "whitespace"),
            ("python;rm", "[a-zA-Z0-9._/:@-]"),
            ("p" * 513, "513 characters"),
            (42, "string"),
        ],
    )
    def test_a_malformed_runtime_is_denied(self, runtime: Any, fragment: str) -> None:
        message = denial(runtime=runtime)
        assert message and "spec.runtime" in message and fragment in message

    def test_a_missing_runtime_is_denied(self) -> None:
        obj = workspace()
        del obj["spec"]["runtime"]
        assert "spec.runtime is required" in (validate_workspace(create(obj), DEFAULT) or "")

    def test_a_runtime_of_exactly_512_characters_passes_the_length_check(self) -> None:
        assert denial(runtime="p" * 512) is None


class TestStorage:
    @pytest.mark.parametrize("size", ["1Gi", "1024Gi", "256Mi", "1048576Mi", "10G", "010Gi"])
    def test_sizes_within_the_cap_are_allowed(self, size: str) -> None:
        assert denial(storage={"size": size}) is None

    @pytest.mark.parametrize(
        ("size", "fragment"),
        [
            ("1025Gi", "exceeds the maximum 1024 Gi"),
            ("1048577Mi", "(1025 Gi) exceeds"),
            ("999999Gi", "exceeds"),
            ("0Gi", "'0Gi' must be above zero"),
            ("-1Gi", "must be above zero"),
            ("10Ti", "(10240 Gi) exceeds"),
            ("ten", "'ten' is not a quantity"),
            ("500m", "is not a whole number of bytes"),
            ("", "required"),
        ],
    )
    def test_sizes_out_of_bounds_or_format_are_denied(self, size: str, fragment: str) -> None:
        message = denial(storage={"size": size})
        assert message and "spec.storage.size" in message and fragment in message

    def test_a_missing_size_is_denied(self) -> None:
        assert "spec.storage.size is required" in (denial(storage={}) or "")
        obj = workspace()
        del obj["spec"]["storage"]
        assert "spec.storage.size is required" in (validate_workspace(create(obj), DEFAULT) or "")

    def test_a_zero_cap_disables_the_storage_limit(self) -> None:
        assert denial(ValidatorConfig(max_storage_gi=0), storage={"size": "99999Gi"}) is None

    def test_a_storage_class_outside_the_allow_list_is_denied(self) -> None:
        cfg = ValidatorConfig(allowed_storage_classes=("fast", "standard"))
        message = denial(cfg, storage={"size": "1Gi", "storageClassName": "hostpath"})
        assert message and "spec.storage.storageClassName" in message and "fast" in message
        assert denial(cfg, storage={"size": "1Gi", "storageClassName": "fast"}) is None

    def test_an_empty_storage_class_always_passes(self) -> None:
        cfg = ValidatorConfig(allowed_storage_classes=("fast",))
        assert denial(cfg, storage={"size": "1Gi", "storageClassName": ""}) is None
        assert denial(cfg, storage={"size": "1Gi"}) is None

    def test_any_storage_class_passes_without_an_allow_list(self) -> None:
        assert denial(storage={"size": "1Gi", "storageClassName": "anything"}) is None

    def test_a_storage_class_over_253_characters_is_denied(self) -> None:
        message = denial(storage={"size": "1Gi", "storageClassName": "s" * 254})
        assert message and "254 characters" in message


class TestQuantitiesAsUsersWriteThem:
    @pytest.mark.parametrize(
        "resources",
        [
            {"cpu": "2", "cpuLimit": "2"},
            {"cpu": "2000m", "cpuLimit": "4"},
            {"cpu": "1.5", "memory": "1.5Gi"},
            {"cpu": "0.5", "memory": "512Mi", "cpuLimit": "1e0", "memoryLimit": "1e9"},
            {"cpu": "100u"},
            {"memory": "1G", "memoryLimit": "2G"},
            {"requests": {"cpu": "2"}, "limits": {"cpu": "4", "memory": "2Gi"}},
        ],
    )
    def test_every_kubernetes_quantity_within_the_caps_is_allowed(
        self, resources: dict[str, Any]
    ) -> None:
        assert denial(resources=resources) is None

    @pytest.mark.parametrize(
        ("resources", "fragment"),
        [
            ({"cpu": "0"}, "spec.resources.cpu '0' must be above zero"),
            ({"cpu": "-1"}, "spec.resources.cpu '-1' must be above zero"),
            ({"cpuLimit": "two"}, "spec.resources.cpuLimit 'two' is not a quantity"),
            ({"memory": "0Mi"}, "spec.resources.memory '0Mi' must be above zero"),
            ({"memory": "500m"}, "'500m' is not a whole number of bytes"),
            ({"memory": "1.5Mi "}, "is not a quantity"),
        ],
    )
    def test_quantities_that_are_not_or_not_above_zero_are_denied_naming_the_field(
        self, resources: dict[str, Any], fragment: str
    ) -> None:
        message = denial(resources=resources)
        assert message and fragment in message

    @pytest.mark.parametrize(
        ("size", "allowed"),
        [("10Gi", True), ("256Mi", True), ("1.5Gi", True), ("1T", True), ("0Gi", False)],
    )
    def test_storage_sizes_are_kubernetes_quantities(self, size: str, allowed: bool) -> None:
        assert (denial(storage={"size": size}) is None) is allowed

    def test_storage_is_capped_in_whole_gibibytes_rounded_up(self) -> None:
        cfg = ValidatorConfig(max_storage_gi=2)
        assert denial(cfg, storage={"size": "2Gi"}) is None
        message = denial(cfg, storage={"size": "2049Mi"})
        assert message and "(3 Gi) exceeds the maximum 2 Gi" in message


class TestResources:
    def test_requests_and_limits_within_the_caps_are_allowed(self) -> None:
        flat = {"cpu": "500m", "memory": "1Gi", "cpuLimit": "2.0", "memoryLimit": "4Gi"}
        assert denial(resources=flat) is None
        nested = {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "16000m"}}
        assert denial(resources=nested) is None

    @pytest.mark.parametrize(
        ("resources", "fragment"),
        [
            ({"cpu": "16001m"}, "spec.resources.cpu '16001m' (16001 millicores) exceeds"),
            ({"cpu": "500"}, "spec.resources.cpu '500' (500000 millicores) exceeds"),
            ({"memory": "65537Mi"}, "spec.resources.memory '65537Mi' (65537 Mi) exceeds"),
            ({"cpuLimit": "17.0"}, "spec.resources.cpuLimit '17.0' (17000 millicores) exceeds"),
            ({"memoryLimit": "65Gi"}, "spec.resources.memoryLimit '65Gi' (66560 Mi) exceeds"),
            ({"requests": {"cpu": "999999999m"}}, "spec.resources.requests.cpu"),
            ({"limits": {"memory": "1000Gi"}}, "spec.resources.limits.memory"),
            (
                {"cpu": "2.0", "cpuLimit": "1.0"},
                "cpuLimit '1.0' (1000 millicores) must be at least",
            ),
            ({"memory": "2Gi", "memoryLimit": "1Gi"}, "must be at least the request"),
            ({"requests": {"cpu": "2.0"}, "limits": {"cpu": "500m"}}, "must be at least"),
            ({"cpu": "1.0", "requests": {"cpu": "1.0"}}, "both set the same quantity"),
            ({"cpu": 2}, "string quantity"),
        ],
    )
    def test_resources_over_the_caps_or_inverted_are_denied(
        self, resources: dict[str, Any], fragment: str
    ) -> None:
        message = denial(resources=resources)
        assert message and fragment in message

    def test_zero_caps_disable_the_resource_limits(self) -> None:
        cfg = ValidatorConfig(max_cpu_millicores=0, max_memory_mi=0)
        assert denial(cfg, resources={"cpu": "100000m", "memory": "1000Gi"}) is None

    def test_equal_limit_and_request_is_allowed(self) -> None:
        assert denial(resources={"cpu": "1.0", "cpuLimit": "1000m"}) is None

    def test_the_default_limit_the_pod_would_get_is_capped_too(self) -> None:
        """Without a limit the pod gets four times the request; that must fit the cap."""
        message = denial(resources={"cpu": "8.0"})
        assert message and "default limit of 4 x 8000 = 32000 millicores" in message
        assert "set spec.resources.cpuLimit" in message
        assert denial(resources={"cpu": "8.0", "cpuLimit": "8.0"}) is None
        small = ValidatorConfig(max_memory_mi=1024)
        message = denial(small)
        assert message and "the default memory request '512Mi'" in message
        assert denial(small, resources={"memoryLimit": "1Gi"}) is None


class TestPackages:
    @pytest.mark.parametrize(
        "requirement",
        [
            "requests",
            "requests[security]>=2.0,<3",
            "numpy==1.26.4",
            "@types/node@20.1.0",
            "lodash",
            "@scope/pkg",
            "zope.interface",
        ],
    )
    def test_legitimate_requirements_are_allowed(self, requirement: str) -> None:
        assert denial(packages=[{"manager": "pip", "requirements": [requirement]}]) is None

    @pytest.mark.parametrize(
        ("requirement", "fragment"),
        [
            ("", "empty"),
            ("--index-url=https://evil", "flag"),
            ("-r/etc/passwd", "flag"),
            ("git+https://evil.example/x.git", "URL or path"),
            ("https://evil.example/x.whl", "URL or path"),
            ("file:///tmp/x", "URL or path"),
            ("./local", "URL or path"),
            ("/abs/path", "URL or path"),
            ("pkg/../../x", "traversal"),
            ("pkg; rm -rf /", "package name"),
            ("pkg$(id)", "package name"),
            ("a" * 257, "257 characters"),
            ("evil/repo", "package name"),
            ("lodash@evil/repo", "package name"),
            ("a/b/c", "package name"),
            ("evil.whl", "URL or path"),
            ("evil-1.0.tar.gz", "URL or path"),
            ("evil.tgz", "URL or path"),
            ("requests\n", "whitespace"),
            (" requests", "whitespace"),
            ("   ", "empty"),
        ],
    )
    def test_injection_flags_urls_and_long_requirements_are_denied(
        self, requirement: str, fragment: str
    ) -> None:
        message = denial(packages=[{"manager": "pip", "requirements": ["ok", requirement]}])
        assert message and "spec.packages[0].requirements[1]" in message and fragment in message


class TestEgressDomains:
    @pytest.mark.parametrize("domain", ["api.github.com", "*.pypi.org", "example.co.uk"])
    def test_public_host_names_are_allowed(self, domain: str) -> None:
        assert denial(networkAccess={"egress": [{"domain": domain}]}) is None

    @pytest.mark.parametrize(
        ("domain", "fragment"),
        [
            ("kubernetes.default.svc.cluster.local", "'.cluster.local'"),
            ("api.svc", "'.svc'"),
            ("printer.local", "'.local'"),
            ("metadata.google.internal", "'.internal'"),
            ("10.0.0.1", "IP address"),
            ("::1", "IP address"),
            ("169.254.169.254", "IP address"),
            ("[fd00:ec2::254]", "IP address"),
            ("::ffff:10.96.0.1", "IP address"),
            ("fe80::1%eth0", "IP address"),
            ("127.1", "IP address"),
            ("0x7f.0.0.1", "IP address"),
            ("0177.0.0.1", "IP address"),
            ("2130706433", "IP address"),
            ("10.96.0.1.", "IP address"),
            ("foo.localhost", "'.localhost'"),
            ("1.0.0.127.in-addr.arpa", "'.arpa'"),
            ("bad_host.example.com", "valid host name"),
            ("-bad.example.com", "valid host name"),
            ("nodot", "valid host name"),
            ("a." * 127 + "com", "characters"),
            ("", "empty"),
            ("api.github.com\n", "whitespace"),
            (" api.github.com", "whitespace"),
        ],
    )
    def test_internal_ip_and_malformed_domains_are_denied(self, domain: str, fragment: str) -> None:
        message = denial(networkAccess={"egress": [{"domain": domain}]})
        assert message and "spec.networkAccess.egress[0].domain" in message and fragment in message


class TestStatusForging:
    STATUS = {"phase": "Running", "podName": "forged"}

    def test_status_set_on_create_is_denied(self) -> None:
        obj = workspace()
        obj["status"] = dict(self.STATUS)
        message = validate_workspace(create(obj), DEFAULT)
        assert message and "status must not be set on CREATE" in message

    def test_an_all_zero_status_on_create_is_allowed(self) -> None:
        obj = workspace()
        obj["status"] = {"phase": "", "conditions": [], "observedGeneration": 0}
        assert validate_workspace(create(obj), DEFAULT) is None

    def test_status_changed_through_the_main_endpoint_is_denied(self) -> None:
        old = workspace()
        old["status"] = {"phase": "Pending"}
        new = copy.deepcopy(old)
        new["status"] = dict(self.STATUS)
        message = validate_workspace(update(new, old), DEFAULT)
        assert message and "workspaces/status subresource" in message

    def test_an_empty_old_object_with_non_zero_status_is_denied(self) -> None:
        new = workspace()
        new["status"] = dict(self.STATUS)
        assert validate_workspace(update(new, None), DEFAULT) is not None
        assert validate_workspace(update(new, {}), DEFAULT) is not None

    def test_an_empty_old_object_with_zero_status_is_allowed(self) -> None:
        assert validate_workspace(update(workspace(), None), DEFAULT) is None

    def test_an_unchanged_status_on_update_is_allowed(self) -> None:
        old = workspace()
        old["status"] = dict(self.STATUS)
        assert validate_workspace(update(copy.deepcopy(old), old), DEFAULT) is None

    def test_status_written_through_the_status_subresource_is_allowed(self) -> None:
        new = workspace()
        new["status"] = dict(self.STATUS)
        assert validate_workspace(update(new, workspace(), sub="status"), DEFAULT) is None


class TestUpdatesThatKeepTheSpec:
    """Caps may be lowered after a Workspace was admitted; its metadata must stay writable."""

    LOWER_CAP = ValidatorConfig(max_storage_gi=10)

    @staticmethod
    def stored() -> dict[str, Any]:
        obj = workspace(storage={"size": "20Gi"}, runtimeClass="runc")
        obj["metadata"]["finalizers"] = ["workspace.llmsafespaces.dev/finalizer"]
        return obj

    def test_the_controller_can_release_its_finalizer_under_lowered_caps(self) -> None:
        old = self.stored()
        old["metadata"]["deletionTimestamp"] = "2026-11-29T12:00:00Z"
        new = copy.deepcopy(old)
        new["metadata"]["finalizers"] = []
        assert validate_workspace(update(new, old), self.LOWER_CAP) is None

    def test_labels_can_change_on_a_workspace_admitted_under_older_caps(self) -> None:
        old = self.stored()
        new = copy.deepcopy(old)
        new["metadata"]["labels"] = {"team": "blue"}
        assert validate_workspace(update(new, old), self.LOWER_CAP) is None

    def test_a_spec_change_is_checked_against_the_current_caps(self) -> None:
        old = self.stored()
        new = copy.deepcopy(old)
        new["spec"]["storage"]["size"] = "30Gi"
        message = validate_workspace(update(new, old), self.LOWER_CAP)
        assert message and "spec.storage.size '30Gi'" in message

    def test_an_unchanged_spec_still_cannot_carry_a_forged_status(self) -> None:
        old = self.stored()
        new = copy.deepcopy(old)
        new["status"] = {"phase": "Active", "podName": "forged"}
        message = validate_workspace(update(new, old), self.LOWER_CAP)
        assert message and "workspaces/status subresource" in message

    def test_an_update_without_an_old_object_gets_every_check(self) -> None:
        message = validate_workspace(update(self.stored(), None), self.LOWER_CAP)
        assert message and "spec.storage.size" in message


class TestRequestShape:
    def test_delete_and_connect_are_allowed_unchecked(self) -> None:
        for operation in ("DELETE", "CONNECT"):
            assert validate_workspace({"operation": operation, "object": None}, DEFAULT) is None

    def test_a_create_without_an_object_is_denied_with_a_reason(self) -> None:
        message = validate_workspace({"operation": "CREATE", "object": None}, DEFAULT)
        assert message and "request.object" in message

    def test_unknown_spec_fields_are_ignored(self) -> None:
        assert denial(somethingNew={"x": 1}) is None


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_validator_flags(parser)
    return parser.parse_args(argv)


class TestFlags:
    def test_defaults_match_the_reference(self) -> None:
        cfg = validator_config_from_args(parse([]), "")
        assert cfg == ValidatorConfig(1024, 16000, 65536, (), ())

    def test_flags_come_from_the_environment(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("WSPIN_MAX_WORKSPACE_STORAGE_GI", "50")
        monkeypatch.setenv("WSPIN_ALLOWED_STORAGE_CLASSES", "fast,standard")
        cfg = validator_config_from_args(parse([]), "")
        assert cfg.max_storage_gi == 50
        assert cfg.allowed_storage_classes == ("fast", "standard")

    def test_a_negative_cap_is_a_config_error_naming_the_flag(self) -> None:
        with pytest.raises(ConfigError, match="--max-workspace-cpu-millicores"):
            validator_config_from_args(parse(["--max-workspace-cpu-millicores", "-1"]), "")

    def test_a_registry_entry_with_bad_characters_is_a_config_error(self) -> None:
        with pytest.raises(ConfigError, match="--allowed-runtime-registries"):
            validator_config_from_args(parse(["--allowed-runtime-registries", "ghcr.io/a b/"]), "")


# Every Workspace capture from a real API server, with the outcome it must get.
CAPTURE_OUTCOMES: dict[str, str | None] = {
    "workspace-create.json": None,
    # The status subresource strips status before validating admission: nothing to deny.
    "workspace-create-with-status.json": None,
    "workspace-update-spec.json": None,
    "workspace-update-status-subresource.json": None,
    "extra-workspace-create-dryrun.json": None,
    # Only a mutating-stage webhook sees the forged status; the backstop denies it there.
    "extra-workspace-create-with-status-mutating-stage.json": "status must not be set on CREATE",
    "extra-workspace-create-with-status-validating-stage.json": None,
    "extra-workspace-update-status-only-noop-via-main-endpoint.json": None,
    "extra-workspace-update-status-via-main-endpoint.json": None,
}


def load_capture(name: str) -> dict[str, Any]:
    review: dict[str, Any] = json.loads((CAPTURES / name).read_text())
    return review["request"]  # type: ignore[no-any-return]


def test_every_workspace_capture_is_listed() -> None:
    found = {p.name for p in CAPTURES.glob("*workspace-*.json") if "pod-" not in p.name}
    assert found == set(CAPTURE_OUTCOMES)


@pytest.mark.parametrize(("name", "expected"), sorted(CAPTURE_OUTCOMES.items()))
def test_captured_requests_get_the_expected_outcome(name: str, expected: str | None) -> None:
    outcome = validate_workspace(load_capture(name), DEFAULT)
    if expected is None:
        assert outcome is None
    else:
        assert outcome is not None and expected in outcome


def test_a_forged_status_on_a_captured_main_endpoint_update_is_denied() -> None:
    request = load_capture("extra-workspace-update-status-via-main-endpoint.json")
    request["object"]["status"] = {"phase": "Running", "podName": "forged"}
    assert validate_workspace(request, DEFAULT) is not None


def test_a_captured_status_subresource_update_is_allowed_even_from_no_status() -> None:
    request = load_capture("workspace-update-status-subresource.json")
    assert request["oldObject"].get("status") is None
    assert request["object"]["status"]["phase"] == "Pending"
    assert validate_workspace(request, DEFAULT) is None


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "workspace.yaml"


def test_the_example_workspace_is_allowed_by_the_default_validator() -> None:
    obj = yaml.safe_load(EXAMPLE.read_text())
    assert obj["kind"] == "Workspace"
    request = {**create(obj), "userInfo": {"username": obj["spec"]["owner"]["userID"]}}
    assert validate_workspace(request, DEFAULT) is None


class TestExcludedNamespaces:
    """The pod webhook never sees these namespaces, so no Workspace may be created there."""

    EXCLUDED = ValidatorConfig(excluded_namespaces=frozenset({"kube-system", "wspin", "tools"}))

    def request(self, namespace: str, operation: str = "CREATE") -> dict[str, Any]:
        request = load_capture("workspace-create.json")
        request["namespace"] = namespace
        request["object"]["metadata"]["namespace"] = namespace
        request["operation"] = operation
        if operation == "UPDATE":
            request["oldObject"] = copy.deepcopy(request["object"])
        return request

    @pytest.mark.parametrize("namespace", ["kube-system", "wspin", "tools"])
    def test_a_workspace_created_in_an_excluded_namespace_is_denied(self, namespace: str) -> None:
        problem = validate_workspace(self.request(namespace), self.EXCLUDED)
        assert problem is not None
        assert f"namespace {namespace!r} is excluded" in problem

    def test_other_namespaces_pass(self) -> None:
        assert validate_workspace(self.request("ws-demo"), self.EXCLUDED) is None

    def test_kube_system_is_excluded_by_default(self) -> None:
        assert validate_workspace(self.request("kube-system"), ValidatorConfig()) is not None

    def test_an_existing_workspace_there_can_still_be_updated_and_so_deleted(self) -> None:
        assert validate_workspace(self.request("tools", "UPDATE"), self.EXCLUDED) is None

    def test_the_flag_adds_the_webhooks_own_namespace(self) -> None:
        parser = argparse.ArgumentParser()
        add_validator_flags(parser)
        cfg = validator_config_from_args(
            parser.parse_args(["--excluded-namespaces=tools"]), "wspin"
        )
        assert cfg.excluded_namespaces == {"kube-system", "wspin", "tools"}


async def test_the_live_webhook_denies_a_workspace_in_kube_system(webhook: LiveWebhook) -> None:
    review = json.loads((CAPTURES / "workspace-create.json").read_text())
    review["request"]["namespace"] = "kube-system"
    async with await webhook.post(review, path="/validate-workspaces?timeout=10s") as reply:
        assert reply.status == 200
        response = (await reply.json())["response"]
    assert response["allowed"] is False
    assert "namespace 'kube-system' is excluded" in response["status"]["message"]


def deep(levels: int) -> dict[str, Any]:
    """A value ``levels`` objects and lists deep: a dict, then a dict holding a list, in turn."""
    nested: dict[str, Any] = {"leaf": True}
    depth = 1
    while depth < levels:
        if depth + 2 <= levels and depth % 3:
            nested, depth = {"b": [nested]}, depth + 2
        else:
            nested, depth = {"a": nested}, depth + 1
    return nested


class TestNesting:
    def test_a_spec_as_deep_as_the_cap_is_allowed(self) -> None:
        # spec itself is the first level; its field x the rest.
        assert denial(x=deep(MAX_SPEC_DEPTH - 1)) is None

    def test_a_deeper_spec_is_denied_naming_the_cap(self) -> None:
        message = denial(x=deep(MAX_SPEC_DEPTH))
        assert message and f"more than {MAX_SPEC_DEPTH} levels deep" in message
        assert "flatten the fields you added" in message

    def test_a_spec_as_deep_as_the_json_decoders_allow_is_denied_not_crashed(self) -> None:
        assert denial(x=deep(1020))

    def test_an_update_that_changes_a_deep_spec_is_denied(self) -> None:
        old = workspace(x=deep(1020))
        new = workspace(x=deep(1020), suspend=True)
        message = validate_workspace(update(new, old), DEFAULT)
        assert message and "levels deep" in message

    def test_an_update_that_keeps_a_deep_spec_stored_earlier_is_allowed(self) -> None:
        # A Workspace stored before the cap must still lose its finalizer and be deleted.
        old = workspace(x=deep(1020))
        new = workspace(x=deep(1020))
        new["metadata"]["finalizers"] = []
        assert validate_workspace(update(new, old), DEFAULT) is None


async def test_the_live_webhook_answers_a_workspace_as_deep_as_json_decodes(
    webhook: LiveWebhook,
) -> None:
    review = json.loads((CAPTURES / "workspace-create.json").read_text())
    review["request"]["object"]["spec"]["x"] = "DEEP"
    # orjson decodes 1,024 levels; the review, request, object and spec take four of them.
    # Written as text: json.dumps recurses too.
    levels = 1019
    text = '{"a":' * (levels - 1) + '{"leaf":true}' + "}" * (levels - 1)
    body = json.dumps(review).replace('"DEEP"', text).encode()
    async with await webhook.post(body, path="/validate-workspaces?timeout=10s") as reply:
        assert reply.status == 200
        response = (await reply.json())["response"]
    assert response["allowed"] is False
    assert "levels deep" in response["status"]["message"]


class TestName:
    def test_a_name_of_63_characters_is_allowed(self) -> None:
        ws = workspace()
        ws["metadata"]["name"] = "w" * 63
        assert validate_workspace(create(ws), DEFAULT) is None

    def test_a_longer_name_is_denied_on_create_saying_why(self) -> None:
        ws = workspace()
        ws["metadata"]["name"] = "w" * 64
        message = validate_workspace(create(ws), DEFAULT)
        assert message and "metadata.name is 64 characters" in message
        assert "at most 63" in message

    def test_a_long_name_stored_earlier_can_still_be_updated_and_deleted(self) -> None:
        old = workspace()
        old["metadata"]["name"] = "w" * 64
        new = copy.deepcopy(old)
        new["metadata"]["finalizers"] = []
        assert validate_workspace(update(new, old), DEFAULT) is None
