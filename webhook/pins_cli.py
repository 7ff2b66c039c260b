"""``wspin pins resolve IMAGE [--artifact agentd|opencode]``: check a release's pins by hand.

Runs the webhook's own resolution (registry first, the pins cache only on a registry failure)
and prints the pins and where they came from, so an operator can check a release before
rolling it out. Without ``--artifact`` every artifact whose pins the image carries is shown,
so the agentd and the opencode image can each be checked by reference alone. It never writes
the cache: a release that is not deployed yet must not evict the running release's entry,
which the webhook needs during a registry outage.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from webhook.pins import resolve_artifact
from webhook.settings import (
    add_insecure_registry_flag,
    insecure_registries_from_args,
)
from wspin.core.delivery import AgentdDelivery, ArtifactDelivery, OpencodeDelivery, ResolvedArtifact
from wspin.core.errors import ConfigError
from wspin.core.flags import add_flag, add_kubeconfig_flag
from wspin.core.logs import setup_logging
from wspin.core.namespaces import DEFAULT_NAMESPACE
from wspin.kube.client import Kube

_DELIVERIES: dict[str, type[ArtifactDelivery]] = {
    "agentd": AgentdDelivery,
    "opencode": OpencodeDelivery,
}


def register(subparsers: Any) -> None:
    """Add ``wspin pins resolve``."""
    pins = subparsers.add_parser("pins", help="inspect the per-arch pins of a release image")
    actions = pins.add_subparsers(dest="pins_command", required=True, metavar="ACTION")
    resolve = actions.add_parser(
        "resolve",
        help="print an image's pins and their source (registry or cache)",
        description="Resolve the per-arch sha256 pins of a digest-pinned release image the "
        "way the webhook does at start: from the image index annotations, or from the pins "
        "cache ConfigMap when the registry cannot be read. The cache is never written.",
    )
    resolve.add_argument("image", metavar="IMAGE", help="digest-pinned image (repo@sha256:…)")
    resolve.add_argument(
        "--artifact",
        choices=sorted(_DELIVERIES),
        default=None,
        help="which binary's pins (default: every artifact the image carries pins for)",
    )
    add_kubeconfig_flag(resolve, "the pins cache fallback")
    add_flag(
        resolve,
        "--namespace",
        env="POD_NAMESPACE",
        default=None,
        help="namespace of the pins cache ConfigMaps: the webhook's (default: $POD_NAMESPACE, "
        "or llmsafespaces when that is empty, as for the webhook)",
    )
    add_flag(
        resolve,
        "--no-cluster",
        default=False,
        help="read the registry only: no Kubernetes access, no cache fallback",
    )
    add_flag(resolve, "--timeout", type=float, default=30.0, help="registry read timeout, s")
    add_insecure_registry_flag(resolve)
    resolve.set_defaults(handler=run_resolve)


def run_resolve(args: argparse.Namespace) -> int:
    """Resolve and print; exit 1 with the error and its fix on any failure."""
    setup_logging("warning")
    try:
        resolved, failed = asyncio.run(_resolve_all(args))
    except ConfigError as err:
        resolved, failed = [], [err]
    if not resolved:
        for error in failed:
            print(f"error: {error.message}", file=sys.stderr)
            if error.fix:
                print(f"fix: {error.fix}", file=sys.stderr)
        return 1
    print("\n\n".join(render(artifact) for artifact in resolved))
    return 0


def render(resolved: ResolvedArtifact) -> str:
    """The pins as an operator reads them, with the flags that would pin them manually."""
    name = resolved.artifact.name
    return "\n".join(
        (
            f"artifact:      {name}",
            f"image:         {resolved.image}",
            f"source:        {resolved.source}",
            f"sha256-amd64:  {resolved.pins.amd64}",
            f"sha256-arm64:  {resolved.pins.arm64}",
            f"flags:         --{name}-binary-sha256-amd64={resolved.pins.amd64} "
            f"--{name}-binary-sha256-arm64={resolved.pins.arm64}",
        )
    )


ResolvedAndFailed = tuple[list[ResolvedArtifact], list[ConfigError]]


async def _resolve_all(args: argparse.Namespace) -> ResolvedAndFailed:
    """The named artifact, or without ``--artifact`` every artifact: what resolved, and each
    failure (shown only when nothing resolved: an agentd image has no opencode pins)."""
    names = [args.artifact] if args.artifact else sorted(_DELIVERIES)
    insecure = insecure_registries_from_args(args)
    if not args.timeout > 0:
        raise ConfigError(f"--timeout must be positive, got {args.timeout:g}", "pass --timeout 30")
    if args.no_cluster:
        return await _resolve_each(args, names, insecure, None)
    from wspin.kube.config import api_client  # the client package, only when the cluster is used

    try:
        api = await api_client(args.kubeconfig)
    except ConfigError as err:
        # Surfaces before anything touches a namespace, naming the artifact it was for.
        raise ConfigError(
            f"{args.artifact or ' and '.join(names)} pins: {err.message}",
            f"{err.fix}; or pass --no-cluster to read the registry without the cache fallback",
        ) from err
    async with api:
        return await _resolve_each(args, names, insecure, Kube(api))


async def _resolve_each(
    args: argparse.Namespace, names: list[str], insecure: frozenset[str], kube: Kube | None
) -> ResolvedAndFailed:
    resolved: list[ResolvedArtifact] = []
    failed: list[ConfigError] = []
    for name in names:
        try:
            resolved.append(
                await resolve_artifact(
                    _DELIVERIES[name](image=args.image),
                    kube=kube,
                    namespace=args.namespace or DEFAULT_NAMESPACE,
                    insecure_registries=insecure,
                    timeout=args.timeout,
                    write_cache=False,
                )
            )
        except ConfigError as err:
            failed.append(err)
    return resolved, failed
