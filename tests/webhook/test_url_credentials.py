"""A credential in a URL a user wrote never reaches the webhook's answer or its log line.

A denied ``spec.packages`` entry ``git+https://user:TOKEN@host/...`` is quoted in the denial
(so the user sees which entry) with its user and password replaced; the same holds for a
workspace pod whose container args carry such a URL. Through the real endpoint and the
production JSON log formatter.
"""

from __future__ import annotations

import io
import json
import uuid
from typing import Any

from webhook.app import MUTATE_PODS_PATH, VALIDATE_WORKSPACES_PATH, make_app
from webhook.demo import DEMO_CONFIG
from webhook.validate import ValidatorConfig
from wspin.http.messages import Request
from wspin.http.probes import Readiness

TOKEN = "ghp_Zq81kLmT0pSecretToken"


def review(path: str, request: dict[str, Any]) -> dict[str, Any]:
    routes = make_app(DEMO_CONFIG, ValidatorConfig(), Readiness())
    body = json.dumps(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    ).encode()
    reply = routes[path](Request("POST", path, "application/json", None, body))
    answer: dict[str, Any] = json.loads(reply.body)["response"]
    return answer


def test_a_denied_package_source_is_quoted_without_its_credentials(
    log_lines: io.StringIO,
) -> None:
    source = f"git+https://deploy:{TOKEN}@git.example.com/acme/tool.git"
    request = {
        "uid": str(uuid.uuid4()),
        "operation": "CREATE",
        "namespace": "team-a",
        "object": {
            "metadata": {"name": "ws1", "namespace": "team-a"},
            "spec": {
                "runtime": "python",
                "storage": {"size": "10Gi"},
                "packages": [{"manager": "pip", "requirements": [source]}],
            },
        },
    }
    answer = review(VALIDATE_WORKSPACES_PATH, request)
    message = answer["status"]["message"]
    assert answer["allowed"] is False
    assert "spec.packages[0].requirements[0]" in message
    assert "git+https://***@git.example.com/acme/tool.git" in message
    assert TOKEN not in message
    logged = log_lines.getvalue()
    assert "spec.packages[0].requirements[0]" in logged
    assert TOKEN not in logged


def test_a_refused_pods_args_are_quoted_without_credentials(log_lines: io.StringIO) -> None:
    pod = {
        "metadata": {
            "name": "ws1-0a1b2c3d",
            "namespace": "team-a",
            "labels": {
                "app": "llmsafespaces",
                "component": "workspace",
                "llmsafespaces.dev/workspace": "ws1",
            },
        },
        "spec": {
            "containers": [
                {
                    "name": "workspace",
                    "image": "ghcr.io/example/runtime:1",
                    "command": ["sh"],
                    "args": ["-c", f"curl https://bot:{TOKEN}@api.example.com/x | sh"],
                }
            ]
        },
    }
    request = {"uid": str(uuid.uuid4()), "operation": "CREATE", "object": pod}
    answer = review(MUTATE_PODS_PATH, request)
    assert answer["allowed"] is False
    assert "must run the delivered agentd" in answer["status"]["message"]
    assert TOKEN not in answer["status"]["message"]
    assert TOKEN not in log_lines.getvalue()
