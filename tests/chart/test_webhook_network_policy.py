"""``webhook.networkPolicy.apiServerCIDRs``: only the API server may reach the admission port."""

from __future__ import annotations

from tests.chart.helm import render, template


def https_rule(cidrs: list[str] | None) -> dict[str, object]:
    sets = {"webhook.networkPolicy.apiServerCIDRs": cidrs} if cidrs is not None else None
    policy = render(sets=sets).get("NetworkPolicy", "wspin-webhook")
    rules = [
        r for r in policy["spec"]["ingress"] if {"port": "https", "protocol": "TCP"} in r["ports"]
    ]
    assert len(rules) == 1
    rule: dict[str, object] = rules[0]
    return rule


def test_by_default_the_admission_port_is_open_to_any_source() -> None:
    assert "from" not in https_rule(None)


def test_api_server_cidrs_are_the_only_sources_of_the_admission_port() -> None:
    rule = https_rule(["10.0.0.10/32", "fd00::/64"])
    assert rule["from"] == [
        {"ipBlock": {"cidr": "10.0.0.10/32"}},
        {"ipBlock": {"cidr": "fd00::/64"}},
    ]


def test_metrics_port_is_not_restricted_to_the_api_server() -> None:
    policy = render(sets={"webhook.networkPolicy.apiServerCIDRs": ["10.0.0.10/32"]}).get(
        "NetworkPolicy", "wspin-webhook"
    )
    metrics = [r for r in policy["spec"]["ingress"] if r["ports"][0]["port"] == "metrics"]
    assert metrics and "from" not in metrics[0]


def test_a_value_that_is_not_a_cidr_is_refused_at_install() -> None:
    result = template(("minimal.yaml",), {"webhook.networkPolicy.apiServerCIDRs": ["apiserver"]})
    assert result.returncode != 0
    assert "apiServerCIDRs" in result.stderr
