"""What a Helm release of the chart is made of: object names, and settings read back from
the Deployments it runs.

Pure: names follow charts/wspin/templates/_helpers.tpl (without nameOverride or
fullnameOverride), and the settings come from the container arguments and ``WSPIN_*``
environment the chart renders, read the way the processes parse them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from wspin.core.flags import env_name, flag_is_on
from wspin.core.objects import Obj

CHART_NAME: Final = "wspin"
LEADER_LEASE: Final = "wspin-controller"
"""The controller's Lease name (fixed in the chart and the controller's settings)."""


def _trunc(name: str, length: int) -> str:
    return name[:length].rstrip("-")


@dataclass(frozen=True)
class Installation:
    """One release: its namespace and Helm release name."""

    namespace: str
    release: str

    @property
    def fullname(self) -> str:
        if CHART_NAME in self.release:
            return _trunc(self.release, 63)
        return _trunc(f"{self.release}-{CHART_NAME}", 63)

    @property
    def webhook(self) -> str:
        """Deployment, Service and ServiceAccount of the webhook."""
        return f"{_trunc(self.fullname, 52)}-webhook"

    @property
    def controller(self) -> str:
        """Deployment and ServiceAccount of the controller."""
        return f"{_trunc(self.fullname, 52)}-controller"

    @property
    def mutating_webhook(self) -> str:
        return f"{self.webhook}-{self.namespace}"[:253]

    @property
    def validating_webhook(self) -> str:
        return f"{self.webhook}-{self.namespace}-workspaces"[:253]

    def service_account(self, component: str) -> str:
        """The user name of a component's ServiceAccount, as RBAC sees it."""
        name = self.webhook if component == "webhook" else self.controller
        return f"system:serviceaccount:{self.namespace}:{name}"


@dataclass(frozen=True)
class ProcessArgs:
    """A Deployment's first container's arguments and plain environment values."""

    args: tuple[str, ...]
    env: dict[str, str]
    volumes: tuple[Obj, ...] = ()
    mounts: tuple[Obj, ...] = ()
    service_account: str = ""

    @classmethod
    def of(cls, deployment: Obj | None) -> ProcessArgs:
        spec = (((deployment or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
        containers = spec.get("containers") or [{}]
        container = containers[0] if isinstance(containers[0], dict) else {}
        env = {
            str(item.get("name")): str(item["value"])
            for item in container.get("env") or []
            if isinstance(item, dict) and isinstance(item.get("value"), str)
        }
        return cls(
            args=tuple(str(a) for a in container.get("args") or []),
            env=env,
            volumes=tuple(v for v in spec.get("volumes") or [] if isinstance(v, dict)),
            mounts=tuple(m for m in container.get("volumeMounts") or [] if isinstance(m, dict)),
            service_account=str(spec.get("serviceAccountName") or "default"),
        )

    def value(self, flag: str) -> str | None:
        """The last ``--flag=value`` or ``--flag value``, else ``WSPIN_<FLAG>``, else None."""
        found: str | None = None
        for position, arg in enumerate(self.args):
            if arg.startswith(flag + "="):
                found = arg[len(flag) + 1 :]
            elif arg == flag and position + 1 < len(self.args):
                following = self.args[position + 1]
                found = "" if following.startswith("--") else following
        if found is None:
            found = self.env.get(env_name(flag))
        return found

    def switch(self, flag: str) -> bool:
        """A boolean flag: bare ``--flag`` is true, ``--flag=false`` false, else its env."""
        on: bool | None = None
        for arg in self.args:
            if arg == flag:
                on = True
            elif arg.startswith(flag + "="):
                on = flag_is_on(arg[len(flag) + 1 :])
        if on is None:
            on = flag_is_on(self.env.get(env_name(flag), "false"))
        return on

    def secret_of_file(self, path: str) -> tuple[str, str] | None:
        """(Secret name, key) behind a file the container reads from a Secret volume."""
        directory, _, key = path.rpartition("/")
        for mount in self.mounts:
            if str(mount.get("mountPath", "")).rstrip("/") != directory:
                continue
            for volume in self.volumes:
                secret = volume.get("secret")
                if volume.get("name") == mount.get("name") and isinstance(secret, dict):
                    return str(secret.get("secretName", "")), key
        return None
