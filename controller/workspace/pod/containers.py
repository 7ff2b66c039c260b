"""The workspace pod's containers, one builder per container (pure data).

- ``workspace``: the runtime image running the pin-verified supervisor from the injected
  overlay (``/agentd/usr/local/bin/workspace-agentd``), ``--supervise`` or, in sidecar mode,
  ``supervise-opencode``; opencode is never in a command (the supervisor spawns it).
- ``platform-init`` (PVC subPath roots, symlink farm, password install), then
  ``platform-bootstrap`` (secrets from the API with the projected token) and
  ``platform-materialize`` (credential tree, relay config block): platform logic ships in
  the digest-pinned agentd image, never in the tenant-chosen runtime image. Each runs
  ``[overlay binary, subcommand]`` with no shell, as uid 1000 (the PVC home's owner).
  In sidecar mode bootstrap and materialize are the sidecar's boot phase instead.
- ``workspace-setup`` (``spec.packages``/``spec.initScript``): the runtime image's own tools.
- ``agentd`` native sidecar (sidecar mode): the agentd image, uid 2000 / gid 1000 (the
  workspace group, so shared files stay readable across the split), the last init
  container, with ``restartPolicy: Always``.

Delivery mounts and pin env are not here: the admission webhook adds ``/agentd`` to the
workspace container, the sidecar and every ``platform-*`` init, ``/opencode`` to the
workspace container only, and the pins to the workspace container only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from controller.agentd_uploads import UploadStagingConfig
from controller.types import Obj
from controller.workspace.pod import probes
from controller.workspace.pod import volumes as vol
from wspin.core.contract import (
    AGENTD,
    MAIN_CONTAINER,
    PLATFORM_BOOTSTRAP,
    PLATFORM_INIT,
    PLATFORM_MATERIALIZE,
    SIDECAR_CONTAINER,
    WORKSPACE_SETUP_CONTAINER,
)

PLATFORM_UID: Final = 1000
SIDECAR_UID: Final = 2000
SIDECAR_GID: Final = 1000
XDG_DATA_HOME: Final = "/workspace/.local"
RESTART_MARKER_PATH: Final = "/sandbox-runtime/last-restart-reason.json"
"""One marker file both halves write in sidecar mode (0640, shared gid 1000)."""
DEV_PREVIEW_ENV: Final = "WORKSPACE_DEV_PREVIEW_ENABLED"
MAX_ACTIVE_SESSIONS_ENV: Final = "WORKSPACE_MAX_ACTIVE_SESSIONS"
DEFAULT_MAX_ACTIVE_SESSIONS: Final = 5
"""The CRD's default of ``spec.maxActiveSessions`` (1-20)."""
AGENT_CONFIG_FILE: Final = f"{vol.AGENTD_CONFIG_PATH}/agent-config.json"
ADMIN_TOKEN_FILE_ENV: Final = "AGENTD_ADMIN_TOKEN_FILE"  # noqa: S105 - a variable name
ADMIN_TOKEN_FILE: Final = f"{vol.SANDBOX_CFG_PATH}/admin-token"
"""Where ``platform-init`` installs the admin token (mode 0400, uid 1000) in single-container
mode, from the ``admin-token`` key of the password Secret volume."""

# The runtime image's former ENV block: tool homes on the PVC, the git credential store and
# the PATH order (PVC-installed tools first). Platform contract, so the builder sets it on
# the workspace container and the setup init.
BASE_ENV: Final = (
    ("MISE_DATA_DIR", "/workspace/.local/share/mise"),
    ("CARGO_HOME", "/workspace/.local/share/cargo"),
    ("GEM_HOME", "/workspace/.local/share/gem"),
    ("GOPATH", "/workspace/.local/share/go"),
    ("NPM_CONFIG_PREFIX", "/workspace/.local"),
    ("PYTHONUSERBASE", "/workspace/.local"),
    ("GIT_CONFIG_COUNT", "1"),
    ("GIT_CONFIG_KEY_0", "credential.helper"),
    ("GIT_CONFIG_VALUE_0", "store --file=/home/sandbox/.git-credentials"),
    (
        "PATH",
        "/workspace/.local/bin:/workspace/.local/share/mise/shims:/workspace/.local/share/go/bin"
        ":/workspace/.local/share/cargo/bin:/usr/local/share/mise/shims:/usr/local/bin"
        ":/usr/sbin:/usr/bin:/sbin:/bin",
    ),
)


@dataclass(frozen=True)
class PodInputs:
    """Everything the container builders read, gathered once by ``desired_pod``."""

    ws_name: str
    runtime_image: str
    agentd_image: str
    resources: Obj
    sidecar: bool
    api_service_url: str = ""
    api_public_url: str = ""
    inference_relay_url: str = ""
    preview_origin_base_domain: str = ""
    upload_staging: UploadStagingConfig = field(default_factory=UploadStagingConfig)
    admin_token: str = ""
    dev_preview: bool = False
    """``spec.networkAccess.devPreview``."""
    max_active_sessions: int = DEFAULT_MAX_ACTIVE_SESSIONS
    """``spec.maxActiveSessions``."""

    @property
    def password_secret(self) -> str:
        return vol.password_secret_name(self.ws_name)

    @property
    def public_api_url(self) -> str:
        """The API's public origin as workspaces should reach it (the dev-preview tool builds
        its links from it): ``--api-public-url``, else ``https://api.<preview base
        domain>``, else "" (no variable is set)."""
        if self.api_public_url:
            return self.api_public_url
        base = self.preview_origin_base_domain
        return f"https://api.{base}" if base else ""


def hardened(uid: int | None = None, gid: int | None = None) -> Obj:
    """Read-only root, non-root, no privilege escalation, every capability dropped."""
    context: Obj = {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
    }
    if uid is not None:
        context["runAsUser"] = uid
    if gid is not None:
        context["runAsGroup"] = gid
    return context


def _value(name: str, value: str) -> Obj:
    return {"name": name, "value": value}


def _secret(name: str, secret: str, key: str) -> Obj:
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}


def _optional(*pairs: tuple[str, str]) -> list[Obj]:
    return [_value(name, value) for name, value in pairs if value]


def _preview_env(inputs: PodInputs) -> list[Obj]:
    return _optional(
        ("LLMSAFESPACE_API_PUBLIC_URL", inputs.public_api_url),
        ("PREVIEW_ORIGIN_BASE_DOMAIN", inputs.preview_origin_base_domain),
    )


def _workspace_settings_env(inputs: PodInputs) -> list[Obj]:
    """The Workspace's settings agentd enforces, on every container agentd runs in. Both
    values are always set: an absent variable tells agentd its controller predates them."""
    return [
        _value(DEV_PREVIEW_ENV, "true" if inputs.dev_preview else "false"),
        _value(MAX_ACTIVE_SESSIONS_ENV, str(inputs.max_active_sessions)),
    ]


def workspace_container(inputs: PodInputs) -> Obj:
    """The main container (index 0, named ``workspace``).

    In single-container mode agentd (the supervisor here) reads its admin token from the
    0400 file ``platform-init`` installs; the token is never in this container's env, which
    opencode and its tools inherit. In sidecar mode the sidecar holds the token and this
    container gets neither the file's path nor the token."""
    token_file = [] if inputs.sidecar else [_value(ADMIN_TOKEN_FILE_ENV, ADMIN_TOKEN_FILE)]
    env = [
        _value("WORKSPACE_ID", inputs.ws_name),
        _value("WORKSPACE_DIR", vol.WORKSPACE_PATH),
        *token_file,
        *(_value(name, value) for name, value in BASE_ENV),
        # Go sizes its scheduler from the host's cores otherwise; the limit, rounded up to
        # whole cores, is what the container may use.
        {
            "name": "GOMAXPROCS",
            "valueFrom": {
                "resourceFieldRef": {
                    "containerName": MAIN_CONTAINER,
                    "resource": "limits.cpu",
                    "divisor": "1",
                }
            },
        },
        *_optional(
            ("LLMSAFESPACE_API_URL", inputs.api_service_url),
            ("LLMSAFESPACE_API_PUBLIC_URL", inputs.public_api_url),
            ("INFERENCE_RELAY_BASEURL", inputs.inference_relay_url),
            ("PREVIEW_ORIGIN_BASE_DOMAIN", inputs.preview_origin_base_domain),
        ),
        *inputs.upload_staging.env(),
        *_workspace_settings_env(inputs),
    ]
    mounts = vol.workspace_mounts()
    liveness = probes.workspace_liveness()
    args = ["--supervise"]
    if inputs.sidecar:
        args = ["supervise-opencode"]
        env += [
            _value("AGENTD_SIDECAR_MODE", "1"),
            _value("LLMSAFESPACES_RESTART_MARKER_PATH", RESTART_MARKER_PATH),
            _value("OPENCODE_CONFIG", AGENT_CONFIG_FILE),
        ]
        mounts.append(vol.mount(vol.AGENTD_CONFIG, vol.AGENTD_CONFIG_PATH, read_only=True))
        liveness = probes.workspace_liveness_sidecar_mode()
    return {
        "name": MAIN_CONTAINER,
        "image": inputs.runtime_image,
        # The supervisor always runs from the injected, pin-verified overlay.
        "command": [AGENTD.binary_path],
        "args": args,
        "env": env,
        "ports": [
            {"name": "opencode", "containerPort": probes.OPENCODE_PORT, "protocol": "TCP"},
            {"name": "agentd", "containerPort": probes.AGENTD_PORT, "protocol": "TCP"},
            {"name": "agentd-admin", "containerPort": probes.AGENTD_ADMIN_PORT, "protocol": "TCP"},
        ],
        "startupProbe": probes.workspace_startup(inputs.admin_token),
        "readinessProbe": probes.workspace_readiness(inputs.admin_token),
        "livenessProbe": liveness,
        "resources": inputs.resources,
        "securityContext": hardened(),
        "volumeMounts": mounts,
    }


def _platform(
    name: str, inputs: PodInputs, args: list[str], env: list[Obj], mounts: list[Obj]
) -> Obj:
    container: Obj = {
        "name": name,
        "image": inputs.agentd_image,
        "command": [AGENTD.binary_path],
        "args": args,
    }
    if env:
        container["env"] = env
    container["securityContext"] = hardened(PLATFORM_UID)
    container["volumeMounts"] = mounts
    return container


def platform_init(inputs: PodInputs) -> Obj:
    """``init-fs``: creates the subPath roots on the PVC root, the credential symlink farm
    into tmpfs, and installs the password file (0600) and, in single-container mode, the
    admin token file (0400) from the password Secret volume (which carries the token only
    in that mode: ``volumes.base_volumes``)."""
    mounts = [
        vol.mount(vol.WORKSPACE_VOLUME, "/pvc"),
        vol.mount(vol.SANDBOX_CFG, vol.SANDBOX_CFG_PATH),
        vol.mount(vol.SANDBOX_RUNTIME, vol.SANDBOX_RUNTIME_PATH),
        vol.mount(vol.PASSWORD_SECRET_VOLUME, "/mnt/secrets/password", read_only=True),
    ]
    if inputs.inference_relay_url:
        mounts.append(vol.mount(vol.FREE_MODELS, "/mnt/freemodels", read_only=True))
    return _platform(PLATFORM_INIT, inputs, ["init-fs"], [], mounts)


def platform_bootstrap(inputs: PodInputs) -> Obj:
    """``bootstrap``: fetches the workspace's decrypted secrets from the API, presenting the
    projected service-account token (the only container that mounts it in this mode)."""
    return _platform(
        PLATFORM_BOOTSTRAP,
        inputs,
        ["bootstrap", "--workspace-id", inputs.ws_name],
        _optional(("LLMSAFESPACE_API_URL", inputs.api_service_url)),
        [
            vol.mount(vol.SANDBOX_CFG, vol.SANDBOX_CFG_PATH),
            vol.mount(vol.SANDBOX_RUNTIME, vol.SANDBOX_RUNTIME_PATH),
            vol.mount(vol.BOOTSTRAP_TOKEN, vol.BOOTSTRAP_TOKEN_PATH, read_only=True),
        ],
    )


def platform_materialize(inputs: PodInputs) -> Obj:
    """``materialize``: applies the fetched batch to the tmpfs credential tree and renders
    the relay provider block before opencode first reads its config."""
    return _platform(
        PLATFORM_MATERIALIZE,
        inputs,
        ["materialize"],
        [
            # The same data home the workspace container's opencode reads auth.json from.
            _value("XDG_DATA_HOME", XDG_DATA_HOME),
            *_optional(("INFERENCE_RELAY_BASEURL", inputs.inference_relay_url)),
        ],
        [
            vol.mount(vol.SANDBOX_CFG, vol.SANDBOX_CFG_PATH),
            vol.mount(vol.SANDBOX_RUNTIME, vol.SANDBOX_RUNTIME_PATH),
            vol.mount(vol.WORKSPACE_VOLUME, vol.WORKSPACE_PATH, sub_path="workspace"),
            vol.mount(vol.WORKSPACE_VOLUME, "/home/sandbox", sub_path="home"),
        ],
    )


def workspace_setup(inputs: PodInputs, script: str) -> Obj:
    """Installs ``spec.packages`` onto the PVC and runs ``spec.initScript``."""
    return {
        "name": WORKSPACE_SETUP_CONTAINER,
        "image": inputs.runtime_image,
        "command": ["/bin/sh", "-c", script],
        "env": [_value(name, value) for name, value in BASE_ENV],
        "securityContext": hardened(),
        "volumeMounts": [
            vol.mount(vol.WORKSPACE_VOLUME, vol.WORKSPACE_PATH, sub_path="workspace"),
            vol.mount(vol.WORKSPACE_VOLUME, "/tmp", sub_path="tmp"),  # noqa: S108 - PVC tmp/
        ],
    }


def agentd_sidecar(inputs: PodInputs) -> Obj:
    """The native sidecar. Its credentials arrive as env from the password Secret: the
    uid-1000 files under /sandbox-cfg are unreadable to uid 2000, and the sidecar spawns no
    child that could inherit them."""
    env = [
        _value("WORKSPACE_ID", inputs.ws_name),
        _secret("AGENTD_SIDECAR_PASSWORD", inputs.password_secret, "password"),
        _secret("AGENTD_ADMIN_TOKEN", inputs.password_secret, "admin-token"),
        _secret("AGENTD_CONTROL_PLANE_PASSWORD", inputs.password_secret, "agentdPassword"),
        _value("LLMSAFESPACES_RESTART_MARKER_PATH", RESTART_MARKER_PATH),
        _value("XDG_DATA_HOME", XDG_DATA_HOME),
        _value("LLMSAFESPACES_AGENT_CONFIG_PATH", AGENT_CONFIG_FILE),
        _value("LLMSAFESPACES_ALLOWED_DIRS_PATH", f"{vol.AGENTD_CONFIG_PATH}/allowed-dirs.json"),
        _value("LLMSAFESPACES_SECRETS_ENV_PATH", f"{vol.AGENTD_SECRETS_PATH}/secrets-env"),
        _value("LLMSAFESPACES_ADMIN_PROMPT_PATH", f"{vol.AGENTD_SECRETS_PATH}/admin-prompt.md"),
        _value(
            "LLMSAFESPACES_RELOAD_CACHE_PATH", f"{vol.AGENTD_SECRETS_PATH}/last-reload-secrets.json"
        ),
        # Files it re-materializes land 0640 / dirs 0770 so uid-1000 tools still read them.
        _value("LLMSAFESPACES_CROSS_UID_FILES", "1"),
        *_optional(("LLMSAFESPACE_API_URL", inputs.api_service_url)),
        # The dev-preview tool runs here in this mode: it needs the public origin too.
        *_preview_env(inputs),
        # A writable cache outside the PVC home, which the sidecar does not mount.
        _value("LLMSAFESPACES_ENRICHER_CACHE_DIR", f"{vol.SANDBOX_RUNTIME_PATH}/enricher-cache"),
        *_optional(("INFERENCE_RELAY_BASEURL", inputs.inference_relay_url)),
        *inputs.upload_staging.env(),
        # The sessions and the dev-preview tool are served here in this mode.
        *_workspace_settings_env(inputs),
    ]
    return {
        "name": SIDECAR_CONTAINER,
        "image": inputs.agentd_image,
        "command": [AGENTD.binary_path, "--sidecar"],
        # A native sidecar: runs for the pod's lifetime; its startup probe gates the
        # workspace container instead of its exit.
        "restartPolicy": "Always",
        "env": env,
        "startupProbe": probes.sidecar_startup(),
        "livenessProbe": probes.sidecar_liveness(),
        "readinessProbe": probes.sidecar_readiness(inputs.admin_token),
        "securityContext": hardened(SIDECAR_UID, SIDECAR_GID),
        "volumeMounts": [
            vol.mount(vol.SANDBOX_CFG, vol.SANDBOX_CFG_PATH, read_only=True),
            vol.mount(vol.SANDBOX_RUNTIME, vol.SANDBOX_RUNTIME_PATH),
            vol.mount(
                vol.WORKSPACE_VOLUME, vol.WORKSPACE_PATH, read_only=True, sub_path="workspace"
            ),
            # The session-state cursor: read-write here only, never in uid-1000 space.
            vol.mount(vol.WORKSPACE_VOLUME, "/platform", sub_path="platform"),
            vol.mount(vol.AGENTD_CONFIG, vol.AGENTD_CONFIG_PATH),
            vol.mount(vol.AGENTD_SECRETS, vol.AGENTD_SECRETS_PATH),
            # Bootstrap is the sidecar's boot phase in this mode.
            vol.mount(vol.BOOTSTRAP_TOKEN, vol.BOOTSTRAP_TOKEN_PATH, read_only=True),
        ],
    }
