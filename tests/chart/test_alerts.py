"""The chart's alerts, proven with Prometheus's own tools.

Each file in ``charts/wspin/files/alerts/`` is one rule group; its promtool unit tests live in
``tests/chart/alerts/`` under the same file name, without ``rule_files`` (added here: the group
exactly as the chart renders it). Adding an alert means adding it to a group's file, its
firing and quiet cases to the group's test file, and its runbook section to
``charts/wspin/docs/runbooks.md``; the tests below fail until all three exist.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.chart.alert_rules import alerts, rule_groups
from tests.chart.conftest import RenderCache
from tests.chart.helm import CHART, Rendered, render
from tests.chart.promtool import PromtoolResult, run_promtool

RULES = CHART / "files" / "alerts"
UNIT_TESTS = Path(__file__).resolve().parent / "alerts"
RUNBOOKS = CHART / "docs" / "runbooks.md"
GROUPS = sorted(path.stem for path in RULES.glob("*.yaml"))


def unit_tests(group: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((UNIT_TESTS / f"{group}.yaml").read_text())
    return loaded


def write_unit_tests(rendered: Rendered, folder: Path) -> list[str]:
    """Each group's rules and its unit tests, side by side in ``folder``; the test files."""
    (folder / "rules").mkdir()
    files = []
    for name, group in rule_groups(rendered).items():
        (folder / "rules" / f"{name}.yaml").write_text(yaml.safe_dump({"groups": [group]}))
        tests = unit_tests(name)
        assert "rule_files" not in tests, f"{name}: rule_files is added by the test harness"
        (folder / f"{name}.yaml").write_text(
            yaml.safe_dump({"rule_files": [f"rules/{name}.yaml"], **tests}, sort_keys=False)
        )
        files.append(f"{name}.yaml")
    return files


@pytest.fixture(scope="session")
def promtool_unit_tests(
    renders: RenderCache, tmp_path_factory: pytest.TempPathFactory
) -> PromtoolResult:
    """Every group's unit tests in one promtool run (every feature on: the full values)."""
    folder = tmp_path_factory.mktemp("alerts")
    return run_promtool(["test", "rules", *write_unit_tests(renders["full"], folder)], folder)


def test_every_rules_file_renders_one_group_named_after_it(full_render: Rendered) -> None:
    assert GROUPS, f"no rule files in {RULES}"
    assert sorted(rule_groups(full_render)) == GROUPS


def test_every_group_has_a_unit_test_file_and_every_test_file_a_group() -> None:
    assert sorted(path.stem for path in UNIT_TESTS.glob("*.yaml")) == GROUPS


@pytest.mark.parametrize("group", GROUPS)
def test_every_alert_has_a_firing_and_a_quiet_unit_test(group: str, full_render: Rendered) -> None:
    firing: set[str] = set()
    quiet: set[str] = set()
    for case in unit_tests(group)["tests"]:
        for check in case.get("alert_rule_test") or []:
            (firing if check.get("exp_alerts") else quiet).add(check["alertname"])
    names = {rule["alert"] for rule in rule_groups(full_render)[group]["rules"]}
    assert names, group
    assert names - firing == set(), f"{group}: no unit test shows these alerts firing"
    assert names - quiet == set(), f"{group}: no unit test shows these alerts quiet"
    assert firing | quiet <= names, f"{group}: tests name alerts the group does not have"


def test_the_alerts_pass_their_promtool_unit_tests(promtool_unit_tests: PromtoolResult) -> None:
    assert promtool_unit_tests.returncode == 0, promtool_unit_tests.output
    assert promtool_unit_tests.output.count("SUCCESS") == len(GROUPS), promtool_unit_tests.output


def test_a_unit_test_that_expects_the_wrong_alert_fails(
    full_render: Rendered, tmp_path: Path
) -> None:
    # The harness is not vacuous: promtool fails a case whose expected labels are wrong.
    files = write_unit_tests(full_render, tmp_path)
    broken = yaml.safe_load((tmp_path / "verification.yaml").read_text())
    for case in broken["tests"]:
        for check in case["alert_rule_test"]:
            for alert in check.get("exp_alerts") or []:
                alert["exp_labels"]["node"] = "another-node"
    (tmp_path / "verification.yaml").write_text(yaml.safe_dump(broken, sort_keys=False))
    result = run_promtool(["test", "rules", *files], tmp_path)
    assert result.returncode != 0
    assert "another-node" in result.output


def test_promtool_accepts_the_rendered_rules_of_every_values_set(
    renders: RenderCache, tmp_path: Path
) -> None:
    rendered = {
        "default": render(sets={"monitoring.prometheusRule.enabled": True}),
        "full": renders["full"],
        "no-apiserver": render(
            ("minimal.yaml", "full.yaml"), {"monitoring.prometheusRule.apiServerMetrics": False}
        ),
    }
    for name, manifests in rendered.items():
        spec = manifests.one("PrometheusRule")["spec"]
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump({"groups": spec["groups"]}))
    result = run_promtool(["check", "rules", *(f"{n}.yaml" for n in rendered)], tmp_path)
    assert result.returncode == 0, result.output
    assert result.output.count("SUCCESS") == len(rendered), result.output


def test_feature_groups_render_only_with_their_feature() -> None:
    default = rule_groups(render(sets={"monitoring.prometheusRule.enabled": True}))
    assert set(default) == set(GROUPS) - {"relay", "staging"}
    without_apiserver = rule_groups(
        render(("minimal.yaml", "full.yaml"), {"monitoring.prometheusRule.apiServerMetrics": False})
    )
    assert set(without_apiserver) == set(GROUPS) - {"apiserver"}


def test_the_down_alerts_need_the_service_monitors_that_name_their_jobs() -> None:
    # absent(up{job=...}) would fire forever where nothing scrapes under that job.
    without = alerts(render(sets={"monitoring.prometheusRule.enabled": True}))
    assert not {"WspinControllerDown", "WspinWebhookDown"} & set(without)
    with_monitors = alerts(
        render(
            sets={
                "monitoring.prometheusRule.enabled": True,
                "monitoring.serviceMonitor.enabled": True,
            }
        )
    )
    assert {"WspinControllerDown", "WspinWebhookDown"} <= set(with_monitors)


def test_the_apiserver_rules_match_every_webhook_the_chart_registers(
    full_render: Rendered,
) -> None:
    registered = {
        hook["name"]
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
        for config in full_render.of_kind(kind)
        for hook in config["webhooks"]
    }
    assert len(registered) == 4
    exprs = " ".join(rule["expr"] for rule in rule_groups(full_render)["apiserver"]["rules"])
    (pattern,) = set(re.findall(r'name=~"([^"]+)"', exprs))
    regex = re.compile(pattern.replace("\\\\", "\\"))  # PromQL string escapes
    assert all(regex.fullmatch(name) for name in registered), (pattern, registered)
    assert not regex.fullmatch("pods.wspinXllmsafespaces.dev")


def test_every_alert_links_its_runbook_section(full_render: Rendered) -> None:
    text = RUNBOOKS.read_text()
    sections = dict(re.findall(r"^## (\S+)\n(.*?)(?=^## |\Z)", text, flags=re.M | re.S))
    for name, rule in alerts(full_render).items():
        assert rule["annotations"]["runbook_url"].endswith("/runbooks.md#" + name.lower())
        assert name in sections, f"{RUNBOOKS.name} has no section '## {name}'"
        assert "**Check**" in sections[name] and "**Fix**" in sections[name], name
    assert set(sections) <= set(alerts(full_render)), "runbook sections for alerts that are gone"


def test_every_alert_has_a_severity_and_prometheus_templates_survive_helm(
    full_render: Rendered,
) -> None:
    for name, rule in alerts(full_render).items():
        assert rule["labels"]["severity"] in {"info", "warning", "critical"}, name
        text = str(rule["annotations"])
        assert "{{ $labels" in text or "{{ $value" in text or "$labels" not in text, name
