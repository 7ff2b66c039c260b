"""``wspin inject -f``: the webhook's injection applied to manifests on disk or stdin."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.webhook.process import PINS
from wspinctl.cli import main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "workspace-pod.yaml"


def run(capsys: pytest.CaptureFixture[str], source: str, *extra: str) -> tuple[int, list[Any], str]:
    status = main(["inject", "-f", source, *PINS, *extra])
    captured = capsys.readouterr()
    documents = list(yaml.safe_load_all(captured.out)) if status == 0 else []
    return status, documents, captured.err


def pod_template() -> dict[str, Any]:
    pod = yaml.safe_load(EXAMPLE.read_text())
    return {"metadata": pod["metadata"], "spec": pod["spec"]}


def is_injected(pod: dict[str, Any]) -> bool:
    names = {v["name"] for v in pod["spec"].get("volumes", []) if "image" in v}
    return names == {"agentd", "opencode"}


def test_a_pod_file_is_injected(capsys: pytest.CaptureFixture[str]) -> None:
    status, documents, _ = run(capsys, str(EXAMPLE))
    assert status == 0
    assert len(documents) == 1
    assert is_injected(documents[0])
    assert "llmsafespaces.dev/delivery" in documents[0]["metadata"]["annotations"]


@pytest.mark.parametrize(
    ("kind", "path"),
    [
        ("Deployment", ("spec", "template")),
        ("StatefulSet", ("spec", "template")),
        ("DaemonSet", ("spec", "template")),
        ("ReplicaSet", ("spec", "template")),
        ("Job", ("spec", "template")),
        ("CronJob", ("spec", "jobTemplate", "spec", "template")),
    ],
)
def test_workload_pod_templates_are_injected(
    kind: str, path: tuple[str, ...], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workload: dict[str, Any] = {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": "w"}}
    node = workload
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = pod_template()
    manifest = tmp_path / "workload.yaml"
    manifest.write_text(yaml.safe_dump(workload))
    status, documents, _ = run(capsys, str(manifest))
    assert status == 0
    template = documents[0]
    for key in path:
        template = template[key]
    assert is_injected(template)


def test_streams_and_lists_keep_other_objects_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pod = yaml.safe_load(EXAMPLE.read_text())
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "s"},
        "spec": {"ports": [{"port": 80}]},
    }
    plain = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "plain"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    listing = {"apiVersion": "v1", "kind": "List", "items": [pod, plain]}
    manifest = tmp_path / "stream.yaml"
    manifest.write_text(yaml.safe_dump_all([service, listing, pod]))
    status, documents, _ = run(capsys, str(manifest))
    assert status == 0
    assert documents[0] == service
    assert is_injected(documents[1]["items"][0])
    assert documents[1]["items"][1] == plain
    assert is_injected(documents[2])


def test_json_on_stdin_is_read(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(yaml.safe_load(EXAMPLE.read_text()))))
    status, documents, _ = run(capsys, "-")
    assert status == 0
    assert is_injected(documents[0])


def test_forged_pins_are_reported_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pod = yaml.safe_load(EXAMPLE.read_text())
    pod["spec"]["containers"][0]["env"].append({"name": "AGENTD_IMAGE_VOLUME", "value": "true"})
    manifest = tmp_path / "forged.yaml"
    manifest.write_text(yaml.safe_dump(pod))
    status, documents, err = run(capsys, str(manifest))
    assert status == 0
    assert "warning: ws1-1a2b3c4d: env AGENTD_IMAGE_VOLUME" in err
    env = [
        e
        for e in documents[0]["spec"]["containers"][0]["env"]
        if e["name"] == "AGENTD_IMAGE_VOLUME"
    ]
    assert env == [{"name": "AGENTD_IMAGE_VOLUME", "value": "1"}]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("kind: [unclosed", "not valid YAML or JSON"),
        ("- just\n- a list\n", "document 1 is not a Kubernetes object"),
        ("apiVersion: v1\nmetadata: {}\n", "no 'kind'"),
    ],
)
def test_invalid_input_exits_1_with_a_message(
    content: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = tmp_path / "bad.yaml"
    manifest.write_text(content)
    status, _, err = run(capsys, str(manifest))
    assert status == 1
    assert message in err


def test_a_missing_file_exits_1(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    status, _, err = run(capsys, str(tmp_path / "nope.yaml"))
    assert status == 1
    assert "cannot read" in err


def test_a_labelled_pod_without_workspace_container_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pod = yaml.safe_load(EXAMPLE.read_text())
    pod["spec"]["containers"][0]["name"] = "main"
    manifest = tmp_path / "bad-pod.yaml"
    manifest.write_text(yaml.safe_dump(pod))
    status, _, err = run(capsys, str(manifest))
    assert status == 1
    assert "no container named 'workspace'" in err
