"""The chart README's commands are the ones that work: each helm command renders, and every
object a kubectl command names is one the chart creates."""

from __future__ import annotations

import re
import shlex

import pytest

from certs.reports import reports_name
from controller.workspace.pod.credential_keys import KEY_SECRET
from tests.chart.helm import CHART, REPO, VALUES, Rendered, run_helm

README = (CHART / "README.md").read_text()


def shell_commands() -> list[str]:
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", README, flags=re.DOTALL):
        joined = block.replace("\\\n", " ")
        in_heredoc = False
        for line in joined.splitlines():
            if in_heredoc:
                in_heredoc = line.strip() != "EOF"
                continue
            if "<<'EOF'" in line:
                in_heredoc = True
                continue
            if line.strip():
                commands.append(line.strip())
    return commands


def helm_commands() -> list[list[str]]:
    found = []
    for command in shell_commands():
        words = shlex.split(command.split("|")[0])
        if words[:1] == ["helm"] and words[1] in {"install", "upgrade", "template"}:
            found.append(words)
    return found


def test_the_readme_shows_install_upgrade_and_template_commands() -> None:
    verbs = [words[1] for words in helm_commands()]
    assert verbs.count("install") >= 2
    assert "upgrade" in verbs and "template" in verbs


@pytest.mark.parametrize("words", helm_commands(), ids=lambda w: " ".join(w[:2]))
def test_each_helm_command_in_the_readme_renders(words: list[str]) -> None:
    # The same command as `helm template`, with the test values in place of the user's file.
    args = ["template", *words[2:]]
    args = [str(VALUES / "minimal.yaml") if a == "wspin-values.yaml" else a for a in args]
    args = [a for a in args if a != "--create-namespace"]
    args = [str(REPO / a) if a == "charts/wspin" else a for a in args]
    if "--kube-version" not in args:
        args += ["--kube-version", "1.35.0"]
    result = run_helm(args)
    assert result.returncode == 0, result.stderr


def test_every_deployment_the_readme_waits_for_exists(default_render: Rendered) -> None:
    for command in shell_commands():
        match = re.search(r"rollout status deployment/(\S+)", command)
        if match:
            default_render.deployment(match.group(1).removeprefix("wspin-"))


def test_the_runtime_objects_the_readme_cleans_up_are_the_ones_the_processes_use(
    default_render: Rendered,
) -> None:
    from tests.chart.helm import flag_values

    (secret,) = flag_values(default_render.args("webhook"), "--secret")
    cleanup = "\n".join(c for c in shell_commands() if c.startswith("kubectl -n wspin delete"))
    for name in (
        secret,
        f"{secret}-authority",
        reports_name(secret),
        "wspin-controller",
        KEY_SECRET,
        "llmsafespaces-agentd-pins",
        "llmsafespaces-opencode-pins",
    ):
        assert f" {name}" in cleanup, name


def test_the_readme_cleans_up_every_helm_test_object_helm_leaves_behind(
    default_render: Rendered,
) -> None:
    """Helm never deletes hooks at uninstall: the test pod always stays, the rest after a
    failed test."""
    hooks = [
        doc
        for doc in default_render
        if (doc["metadata"].get("annotations") or {}).get("helm.sh/hook") == "test"
    ]
    assert hooks
    commands = [shlex.split(c.split("#")[0]) for c in shell_commands()]
    for doc in hooks:
        namespace, name = doc["metadata"]["namespace"], doc["metadata"]["name"]
        assert any(
            words[:4] == ["kubectl", "-n", namespace, "delete"]
            and doc["kind"].lower() in words[4].split(",")
            and name in words[5:]
            for words in commands
        ), (doc["kind"], namespace, name)
