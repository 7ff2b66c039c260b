"""The image both Deployments run: slim base, non-root numeric user, `wspin` entrypoint, and a
build context that carries exactly what the Dockerfile copies."""

from __future__ import annotations

import fnmatch
import json
import re
import tomllib

from tests.chart.helm import REPO, Rendered

DOCKERFILE = (REPO / "Dockerfile").read_text()


def instructions(name: str) -> list[str]:
    return re.findall(rf"^{name}\s+(.+)$", DOCKERFILE, flags=re.MULTILINE)


def test_both_stages_build_from_python_3_11_slim() -> None:
    bases = [line.split()[0] for line in instructions("FROM")]
    assert bases == ["python:3.11-slim", "python:3.11-slim"]


def test_the_image_runs_as_the_numeric_user_the_chart_expects(default_render: Rendered) -> None:
    (user,) = instructions("USER")
    uid, gid = (int(part) for part in user.split(":"))
    assert uid != 0 and gid != 0
    context = default_render.deployment("webhook")["spec"]["template"]["spec"]["securityContext"]
    assert (context["runAsUser"], context["runAsGroup"]) == (uid, gid)


def test_the_entrypoint_is_the_wspin_console_script_the_package_installs() -> None:
    (entrypoint,) = instructions("ENTRYPOINT")
    assert json.loads(entrypoint) == ["wspin"]
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert project["project"]["scripts"]["wspin"] == "wspinctl.cli:main"


def ignored(path: str, patterns: list[str]) -> bool:
    """.dockerignore semantics for these patterns: the last matching line wins, ! re-includes."""
    result = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        body = pattern.lstrip("!").rstrip("/")
        if fnmatch.fnmatch(path, body) or path.startswith(body + "/"):
            result = not negate
    return result


def test_everything_the_dockerfile_copies_exists_and_is_in_the_build_context() -> None:
    patterns = [
        line.strip()
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    sources = []
    for copy in instructions("COPY"):
        if copy.startswith("--from="):
            continue
        sources += copy.split()[:-1]
    assert sources
    for source in sources:
        assert (REPO / source).exists(), source
        assert not ignored(source.rstrip("/"), patterns), source
    # Local state and secrets never reach the daemon.
    for private in (".venv", ".tools", "tests", ".git", "charts"):
        assert ignored(private, patterns), private


def test_every_package_the_project_declares_is_copied() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    packages = {p.rstrip("*") for p in project["tool"]["setuptools"]["packages"]["find"]["include"]}
    copied = {copy.split()[0] for copy in instructions("COPY") if not copy.startswith("--from=")}
    assert packages <= copied
