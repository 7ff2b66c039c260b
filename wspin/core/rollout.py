"""Which release each workspace pod runs, against the release the webhook serves now.

Pure functions over the pod and Workspace dicts the API returns; ``wspin status`` and the
controller's ``llmsafespaces_workspace_pods`` gauge classify with the same code, so the
command line and a dashboard always agree.

Per pod and artifact the state is one of:

- ``failing``: the Workspace reports the binary failed verification (exit 81-84, condition
  ``AgentdVerified``/``OpencodeVerified`` False);
- ``not_injected``: no digest in the receipt annotation, or the pod's image volume does not
  carry the digest the receipt names. The pod spec is immutable after admission but a tenant
  with pod rights may rewrite annotations, so a receipt the spec does not back is not trusted;
- ``current``: the digest is the one the webhook serves now;
- ``stale``: an older release; the pod is recreated with the current one on the Workspace's
  next ``restartGeneration``;
- ``injected``: injected, but the serving release is not known to the caller.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final, Literal

from wspin.core.contract import ARTIFACTS, LABEL_WORKSPACE, Artifact
from wspin.core.objects import Obj
from wspin.core.workspace_pod import DIGEST, parse_receipt

State = Literal["current", "stale", "not_injected", "failing", "injected"]
STATES: Final[tuple[State, ...]] = ("current", "stale", "not_injected", "failing", "injected")


@dataclass(frozen=True)
class ArtifactState:
    """One artifact of one pod: its state and the digest it runs ("" when not injected)."""

    artifact: str
    state: State
    digest: str


@dataclass(frozen=True)
class PodRelease:
    """One workspace pod's release, per artifact."""

    namespace: str
    name: str
    workspace: str
    artifacts: tuple[ArtifactState, ...]


def digest_of(image: str) -> str:
    """``repo@sha256:…`` → ``sha256:…``; "" for a reference not pinned by digest."""
    digest = image.rpartition("@")[2] if "@" in image else ""
    return digest if DIGEST.match(digest) else ""


def volume_digest(pod: Obj, artifact: Artifact) -> str:
    """The digest of the artifact's image volume in the (immutable) pod spec, or ""."""
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        if isinstance(volume, dict) and volume.get("name") == artifact.volume:
            image = volume.get("image")
            if isinstance(image, dict) and isinstance(image.get("reference"), str):
                return digest_of(image["reference"])
    return ""


def verification_failed(workspace: Obj | None, artifact: Artifact) -> bool:
    """The Workspace's ``<Artifact>Verified`` condition is False (the controller saw 81-84)."""
    wanted = f"{artifact.name.capitalize()}Verified"
    for condition in ((workspace or {}).get("status") or {}).get("conditions") or []:
        if isinstance(condition, dict) and condition.get("type") == wanted:
            return condition.get("status") == "False"
    return False


def classify(
    pod: Obj, workspace: Obj | None, served: Mapping[str, str] | None
) -> tuple[ArtifactState, ...]:
    """Each artifact's state for ``pod``; ``served`` maps artifact name → digest served now
    (None when unknown: injected pods are then ``injected``)."""
    recorded = parse_receipt(pod)
    states = []
    for artifact in ARTIFACTS:
        digest = recorded.get(artifact.name, "")
        if digest and volume_digest(pod, artifact) != digest:
            digest = ""
        state: State
        if verification_failed(workspace, artifact):
            state = "failing"
        elif not digest:
            state = "not_injected"
        elif served is None or artifact.name not in served:
            state = "injected"
        else:
            state = "current" if served[artifact.name] == digest else "stale"
        states.append(ArtifactState(artifact.name, state, digest))
    return tuple(states)


def pod_releases(
    pods: Iterable[Obj], workspaces: Iterable[Obj], served: Mapping[str, str] | None
) -> list[PodRelease]:
    """Every workspace pod with its Workspace (same namespace, name from the pod's label)."""
    by_key = {
        (
            (ws.get("metadata") or {}).get("namespace", ""),
            (ws.get("metadata") or {}).get("name"),
        ): ws
        for ws in workspaces
    }
    releases = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        namespace, workspace = (
            meta.get("namespace", ""),
            (meta.get("labels") or {}).get(LABEL_WORKSPACE, ""),
        )
        releases.append(
            PodRelease(
                namespace=namespace,
                name=meta.get("name", ""),
                workspace=workspace,
                artifacts=classify(pod, by_key.get((namespace, workspace)), served),
            )
        )
    releases.sort(key=lambda r: (r.namespace, r.name))
    return releases


def counts(releases: Iterable[PodRelease]) -> dict[tuple[str, str, State], int]:
    """(artifact, digest, state) → pods: the gauge's samples and the summary's numbers."""
    found: dict[tuple[str, str, State], int] = {}
    for release in releases:
        for item in release.artifacts:
            key = (item.artifact, item.digest, item.state)
            found[key] = found.get(key, 0) + 1
    return found


_PRECEDENCE: Final[tuple[State, ...]] = ("failing", "not_injected", "stale", "injected", "current")


def pod_state(release: PodRelease) -> State:
    """The pod's overall state: its worst artifact's (failing before not injected before
    stale), so a pod counts once."""
    states = {item.state for item in release.artifacts}
    return next(state for state in _PRECEDENCE if state in states)
