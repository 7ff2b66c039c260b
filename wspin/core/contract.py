"""The external contract: names real agentd/opencode binaries and manifests depend on.

Pure data, no I/O. Values here are exact: released agentd/opencode binaries, manifests and
the chart read them, so changing one breaks deployed pods.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

API_GROUP: Final = "llmsafespaces.dev"
API_VERSION: Final = "v1"

# Labels every workspace pod carries (set by the Workspace reconciler, matched by the webhook).
LABEL_APP: Final = "app"
LABEL_APP_VALUE: Final = "llmsafespaces"
LABEL_COMPONENT: Final = "component"
LABEL_COMPONENT_VALUE: Final = "workspace"
LABEL_WORKSPACE: Final = "llmsafespaces.dev/workspace"
# On every object the controller creates for a Workspace: that Workspace's uid. The chart's
# ownership policies let only the controller set it, so it is how the controller knows its own.
LABEL_WORKSPACE_UID: Final = "llmsafespaces.dev/workspace-uid"

MAIN_CONTAINER: Final = "workspace"
SIDECAR_CONTAINER: Final = "agentd"
PLATFORM_INIT_PREFIX: Final = "platform-"
# The platform init containers the Workspace controller builds; all run /agentd (the
# injector gives every ``platform-*`` init the read-only /agentd mount).
PLATFORM_INIT: Final = f"{PLATFORM_INIT_PREFIX}init"
PLATFORM_BOOTSTRAP: Final = f"{PLATFORM_INIT_PREFIX}bootstrap"
PLATFORM_MATERIALIZE: Final = f"{PLATFORM_INIT_PREFIX}materialize"
# The user-plane init that installs spec.packages and runs spec.initScript; never gets a
# delivery mount (it runs the runtime image's own tools).
WORKSPACE_SETUP_CONTAINER: Final = "workspace-setup"

# The receipt annotation the webhook leaves on every pod it injected.
DELIVERY_ANNOTATION: Final = "llmsafespaces.dev/delivery"

# In-pod verifier exit codes the controller reads, and the controller's own arming exit code.
EXIT_AGENTD_MISMATCH: Final = 81
EXIT_AGENTD_MISSING: Final = 82
EXIT_OPENCODE_MISMATCH: Final = 83
EXIT_OPENCODE_MISSING: Final = 84
RELAY_STAGING_NOT_ARMED_EXIT_CODE: Final = 85

ArtifactName = Literal["agentd", "opencode"]
Arch = Literal["amd64", "arm64"]
ARCHES: Final[tuple[Arch, ...]] = ("amd64", "arm64")


@dataclass(frozen=True)
class Artifact:
    """Everything that names one delivered binary: volume, mount, env, pins and caches."""

    name: ArtifactName
    binary_path: str
    """Absolute path of the binary inside the mounted image volume."""

    @property
    def volume(self) -> str:
        return self.name

    @property
    def mount_path(self) -> str:
        return f"/{self.name}"

    @property
    def env_prefix(self) -> str:
        return f"LLMSAFESPACES_{self.name.upper()}"

    @property
    def marker_env(self) -> str:
        return f"{self.name.upper()}_IMAGE_VOLUME"

    @property
    def binary_env(self) -> str:
        return f"{self.env_prefix}_BINARY"

    def sha256_env(self, arch: Arch) -> str:
        return f"{self.env_prefix}_SHA256_{arch.upper()}"

    def index_annotation(self, arch: Arch) -> str:
        """OCI image-index annotation that carries this artifact's per-arch pin."""
        return f"dev.llmsafespaces/{self.name}.sha256-{arch}"

    @property
    def pins_configmap(self) -> str:
        return f"llmsafespaces-{self.name}-pins"


AGENTD: Final = Artifact("agentd", "/agentd/usr/local/bin/workspace-agentd")
OPENCODE: Final = Artifact("opencode", "/opencode/usr/local/bin/opencode")
ARTIFACTS: Final = (AGENTD, OPENCODE)

# Keys of the pins cache ConfigMaps.
PINS_KEY_IMAGE: Final = "image"


def pins_key(arch: Arch) -> str:
    return f"sha256-{arch}"
