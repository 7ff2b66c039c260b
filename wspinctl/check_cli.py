"""``wspin check [--namespace NS] [--release NAME] [-o json]``: the installation's health.

Exit 0 only when every check passes, 1 when any fails (or the cluster cannot be reached), so
it can gate a pipeline. Text for people, ``-o json`` for tools; both carry each fix.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Coroutine
from typing import Any, TypeVar

from wspin.core.clock import utc_now
from wspin.core.errors import WspinError
from wspin.core.flags import add_flag, add_kubeconfig_flag

T = TypeVar("T")

# The checks and the Kubernetes client are imported when the command runs, not by --help.


def run_against_cluster(work: Coroutine[Any, Any, T], timed_out: str) -> T | None:
    """Run ``work``; None after printing what went wrong and the fix (shared with ``wspin
    status``): a WspinError says both, a timeout says ``timed_out``."""
    try:
        return asyncio.run(work)
    except WspinError as err:
        print(f"error: {err.message}", file=sys.stderr)
        if err.fix:
            print(f"fix: {err.fix}", file=sys.stderr)
    except TimeoutError:
        print(f"error: {timed_out}", file=sys.stderr)
        print("fix: check that the API server answers, or pass a longer --timeout", file=sys.stderr)
    return None


def add_target_flags(parser: argparse.ArgumentParser) -> None:
    """Which installation, and how to reach the cluster (shared with ``wspin status``)."""
    add_kubeconfig_flag(parser)
    add_flag(
        parser,
        "--namespace",
        env="WSPIN_RELEASE_NAMESPACE",
        default="wspin",
        help="the release's namespace (helm install --namespace)",
    )
    add_flag(
        parser,
        "--release",
        env="WSPIN_RELEASE",
        default="wspin",
        help="the Helm release name",
    )
    parser.add_argument(
        "-o", "--output", choices=("text", "json"), default="text", help="output format"
    )
    add_flag(parser, "--timeout", type=float, default=60.0, help="seconds for the whole run")


def register(subparsers: Any) -> None:
    """Add ``wspin check``."""
    parser = subparsers.add_parser(
        "check",
        help="check that an installation is healthy, one named check each",
        description="Check a wspin installation: CRDs, both webhook configurations and their "
        "caBundle against the served certificate, the webhook's readiness and image-volume "
        "support, the controller's leader, a dry-run workspace pod's injection, and the RBAC "
        "of both service accounts. Exits 0 only when every check passes.",
    )
    add_target_flags(parser)
    add_flag(
        parser,
        "--probe-namespace",
        default="default",
        help="namespace for the dry-run workspace pod: one the webhook injects "
        "(Helm: tests.probeNamespace)",
    )
    parser.set_defaults(handler=run_check)


def run_check(args: argparse.Namespace) -> int:
    if not args.timeout > 0:
        print(f"error: --timeout must be positive, got {args.timeout:g}", file=sys.stderr)
        print("fix: pass --timeout 60", file=sys.stderr)
        return 1
    results = run_against_cluster(
        _check(args), f"the checks did not finish within {args.timeout:g}s"
    )
    if results is None:
        return 1
    ok = all(result.ok for result in results)
    if args.output == "json":
        print(
            json.dumps(
                {
                    "release": args.release,
                    "namespace": args.namespace,
                    "ok": ok,
                    "checks": [result.as_dict() for result in results],
                },
                indent=2,
            )
        )
    else:
        print(render(args.release, args.namespace, results))
    return 0 if ok else 1


async def _check(args: argparse.Namespace) -> list[Any]:
    from wspin.kube.client import Kube
    from wspin.kube.config import api_client
    from wspinctl.check import run_checks
    from wspinctl.install import Installation

    api = await api_client(args.kubeconfig)
    try:
        async with asyncio.timeout(args.timeout):
            return await run_checks(
                Kube(api),
                Installation(args.namespace, args.release),
                probe_namespace=args.probe_namespace,
                now=utc_now(),
            )
    finally:
        await api.close()


def render(release: str, namespace: str, results: list[Any]) -> str:
    """One line per check, ✓ or ✗, the fix under each failure, then the count."""
    lines = [f"wspin check: release {release} in namespace {namespace}", ""]
    for result in results:
        mark = "✓" if result.ok else "✗"
        lines.append(f"{mark} {result.name:19} {result.title}: {result.detail}")
        if not result.ok:
            lines.append(f"  {'':19} fix: {result.fix}")
    failed = sum(1 for result in results if not result.ok)
    lines.append("")
    if failed:
        lines.append(f"{failed} of {len(results)} checks failed")
    else:
        lines.append(f"all {len(results)} checks passed")
    return "\n".join(lines)
