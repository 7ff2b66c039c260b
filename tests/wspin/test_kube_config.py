"""The API client every process makes: requests consult only its configuration."""

from __future__ import annotations

import copy
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from kubernetes_asyncio import client

from wspin.core.kinds import NAMESPACES
from wspin.kube.client import Kube
from wspin.kube.config import environment_proxy, new_api_client


async def test_a_netrc_entry_for_the_api_server_changes_nothing(
    kube_api: client.ApiClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With the environment trusted, this entry made every bearer-token request fail
    # ("Cannot combine AUTHORIZATION header with AUTH argument").
    configuration = copy.copy(kube_api.configuration)
    host = str(urlsplit(str(configuration.host)).hostname)
    netrc = tmp_path / "netrc"
    netrc.write_text(f"machine {host} login someone password hunter2\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    configuration.api_key = {**configuration.api_key, "BearerToken": "Bearer token"}
    async with new_api_client(configuration) as api:
        listed = await Kube(api).list(NAMESPACES)
    assert "default" in [item["metadata"]["name"] for item in listed["items"]]


def test_the_proxy_variables_are_read_once_as_client_go_reads_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    assert environment_proxy("https://10.0.0.1:6443") is None
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    assert environment_proxy("https://10.0.0.1:6443") == "http://proxy.example:3128"
    assert environment_proxy("http://10.0.0.1:8080") is None
    monkeypatch.setenv("NO_PROXY", "10.0.0.1,.cluster.local")
    assert environment_proxy("https://10.0.0.1:6443") is None
    assert environment_proxy("https://kubernetes.default.svc.cluster.local") is None
    assert environment_proxy("https://api.example:6443") == "http://proxy.example:3128"


async def test_a_kubeconfig_proxy_wins_over_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    configuration = client.Configuration(host="https://api.example:6443")
    async with new_api_client(configuration) as api:
        assert api.rest_client.proxy == "http://proxy.example:3128"
    configuration.proxy = "http://named.example:8080"
    async with new_api_client(configuration) as api:
        assert api.rest_client.proxy == "http://named.example:8080"
