"""Excluded namespaces: one list for the pod webhook's selector, the validator and the
controller."""

from __future__ import annotations

import pytest

from wspin.core.errors import ConfigError
from wspin.core.namespaces import excluded_namespace_problem, excluded_namespaces_from


def test_kube_system_and_the_own_namespace_are_always_excluded() -> None:
    assert excluded_namespaces_from("", "wspin") == {"kube-system", "wspin"}
    assert excluded_namespaces_from(" monitoring, istio-system ,", "wspin") == {
        "kube-system",
        "wspin",
        "monitoring",
        "istio-system",
    }
    assert excluded_namespaces_from(None, "") == {"kube-system"}


@pytest.mark.parametrize("bad", ["Monitoring", "a_b", "-x", "x" * 64, "a/b"])
def test_a_name_that_cannot_be_a_namespace_is_a_config_error_naming_flag_and_value(
    bad: str,
) -> None:
    with pytest.raises(ConfigError) as raised:
        excluded_namespaces_from(f"ok,{bad}", "wspin")
    text = str(raised.value)
    assert "--excluded-namespaces" in text
    assert "webhook.excludedNamespaces" in text
    assert repr(bad) in text


def test_the_problem_names_the_namespace_and_the_fix() -> None:
    excluded = frozenset({"kube-system", "wspin"})
    assert excluded_namespace_problem("ws-demo", excluded) is None
    problem = excluded_namespace_problem("wspin", excluded)
    assert problem is not None
    assert "'wspin'" in problem
    assert "webhook.excludedNamespaces" in problem
    assert "another namespace" in problem
