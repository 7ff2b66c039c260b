"""``wspin status [--namespace NS] [--release NAME] [--workspace-namespace NS …] [-o json]``."""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from wspinctl.check_cli import add_target_flags, run_against_cluster

# The Kubernetes client is imported when the command runs, not by --help.


def register(subparsers: Any) -> None:
    """Add ``wspin status``."""
    parser = subparsers.add_parser(
        "status",
        help="which workspace pods run which release, per namespace",
        description="Workspace pods by the agentd/opencode digests their delivery receipt "
        "records, against the digests the webhook serves now: current, stale (recreated on the "
        "next restartGeneration), not injected, or failing verification (exit 81-84).",
    )
    add_target_flags(parser)
    parser.add_argument(
        "--workspace-namespace",
        action="append",
        default=[],
        metavar="NS",
        help="only this namespace's workspace pods (repeatable; default: every namespace)",
    )
    parser.set_defaults(handler=run_status)


def run_status(args: argparse.Namespace) -> int:
    from wspinctl.install import Installation
    from wspinctl.status import render

    install = Installation(args.namespace, args.release)
    status = run_against_cluster(_read(args, install), f"no answer within {args.timeout:g}s")
    if status is None:
        return 1
    if args.output == "json":
        print(json.dumps({"release": args.release, **status.as_dict()}, indent=2))
    else:
        print(render(install, status))
    return 0


async def _read(args: argparse.Namespace, install: Any) -> Any:
    from wspin.kube.client import Kube
    from wspin.kube.config import api_client
    from wspinctl.status import read_status

    api = await api_client(args.kubeconfig)
    try:
        async with asyncio.timeout(args.timeout):
            return await read_status(Kube(api), install, args.workspace_namespace)
    finally:
        await api.close()
