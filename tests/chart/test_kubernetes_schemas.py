"""Every rendered object is valid Kubernetes 1.32 and the chart lints clean."""

from __future__ import annotations

import jsonschema
import kubernetes_validate
import pytest
import yaml

from tests.chart.helm import CHART, VALUES, Rendered, parse_documents, run_helm, template

OWN_GROUP = "llmsafespaces.dev/v1"


def own_schema(kind: str) -> dict[str, object]:
    """The chart's own CRD schema for ``kind`` (objects of our CRDs the chart renders)."""
    for path in sorted((CHART / "crds").glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        if crd["spec"]["names"]["kind"] == kind:
            (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
            schema: dict[str, object] = version["schema"]["openAPIV3Schema"]
            return schema
    raise LookupError(kind)


# Kinds whose schemas come from other projects' CRDs (cert-manager, Prometheus Operator); their
# shape is checked in test_certificates.py and test_monitoring.py.
THIRD_PARTY = {
    ("cert-manager.io/v1", "Certificate"),
    ("cert-manager.io/v1", "Issuer"),
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
    ("monitoring.coreos.com/v1", "PrometheusRule"),
    ("monitoring.coreos.com/v1", "PodMonitor"),
}


def test_every_rendered_object_validates_against_the_kubernetes_1_32_schemas(
    any_render: Rendered,
) -> None:
    problems = []
    for doc in any_render:
        if (doc["apiVersion"], doc["kind"]) in THIRD_PARTY:
            continue
        if doc["apiVersion"] == OWN_GROUP:
            try:
                jsonschema.validate(doc, own_schema(doc["kind"]))
            except jsonschema.ValidationError as err:
                problems.append(f"{doc['kind']}/{doc['metadata']['name']}: {err.message}")
            continue
        try:
            kubernetes_validate.validate(doc, "1.32", strict=True)
        except kubernetes_validate.ValidationError as err:
            path = "/".join(str(p) for p in err.path)
            problems.append(f"{doc['kind']}/{doc['metadata']['name']} {path}: {err.message}")
        except kubernetes_validate.SchemaNotFoundError:
            problems.append(f"{doc['apiVersion']} {doc['kind']} has no 1.32 schema")
    assert problems == []


def test_every_object_carries_the_release_labels(any_render: Rendered) -> None:
    for doc in any_render:
        if doc["kind"] == "CustomResourceDefinition":
            continue  # crds/ are installed once and shared by releases
        labels = doc["metadata"].get("labels", {})
        assert labels.get("app.kubernetes.io/instance") == "wspin", doc["metadata"]["name"]
        assert labels.get("app.kubernetes.io/name") == "wspin", doc["metadata"]["name"]


@pytest.mark.parametrize(
    "sets",
    [
        {},
        {"certificates.mode": "certManager"},
        {
            "certificates.mode": "provided",
            "certificates.secretName": "tls",
            "certificates.caBundle": "Q0E=",
        },
    ],
    ids=["selfManaged", "certManager", "provided"],
)
def test_helm_lint_strict_passes(sets: dict[str, str]) -> None:
    args = ["lint", "--strict", str(CHART), "--namespace", "wspin", "--kube-version", "1.35.0"]
    args += ["--values", str(VALUES / "minimal.yaml")]
    for key, value in sets.items():
        args += ["--set-string", f"{key}={value}"]
    result = run_helm(args)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout


def test_helm_lint_strict_passes_with_every_option_enabled() -> None:
    args = ["lint", "--strict", str(CHART), "--namespace", "wspin", "--kube-version", "1.35.0"]
    args += ["--values", str(VALUES / "minimal.yaml"), "--values", str(VALUES / "full.yaml")]
    result = run_helm(args)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("version", ["1.31.0", "1.32.4", "1.34.3", "1.35.0", "1.35.2-eks-4a1b2c"])
def test_the_chart_renders_on_every_version_with_image_volumes(version: str) -> None:
    """From 1.31 (image volumes behind the ImageVolume gate) on: the gate is the webhook's
    probe's business, not the version range's."""
    result = template(kube_version=version)
    assert result.returncode == 0, result.stderr
    schema = ".".join(version.split(".")[:2])
    for doc in parse_documents(result.stdout):
        if (doc["apiVersion"], doc["kind"]) not in THIRD_PARTY:
            kubernetes_validate.validate(doc, schema, strict=True)


def test_the_chart_renders_without_a_kube_version_as_gitops_tools_do() -> None:
    result = template(kube_version=None)
    assert result.returncode == 0, result.stderr
    kinds = {doc["kind"] for doc in parse_documents(result.stdout)}
    assert "MutatingWebhookConfiguration" in kinds


@pytest.mark.parametrize("version", ["1.30.9", "1.29.0-gke.100"])
def test_clusters_without_image_volumes_at_all_are_refused(version: str) -> None:
    result = template(kube_version=version)
    assert result.returncode != 0
    assert ">=1.31.0-0" in result.stderr


def test_a_misspelled_value_is_rejected_by_the_values_schema() -> None:
    result = template(sets={"webhook.replica": "3"})
    assert result.returncode != 0
    assert "replica" in result.stderr


def test_the_values_schema_rejects_an_unknown_certificate_mode() -> None:
    result = template(sets={"certificates.mode": "letsencrypt"})
    assert result.returncode != 0
    assert "certificates.mode" in result.stderr
