"""``wspin webhook`` (the admission server) and ``wspin inject`` (the same injection, offline)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from webhook.inject import InjectConfig
from webhook.offline import dump_documents, inject_object, load_documents
from webhook.pins import resolve_artifact
from webhook.settings import (
    add_pins_flags,
    add_webhook_flags,
    insecure_registries_from_args,
    settings_from_args,
)
from wspin.core.errors import WspinError
from wspin.core.flags import add_delivery_flags, deliveries_from_args
from wspin.core.logs import setup_logging


def register(subparsers: Any) -> None:
    webhook = subparsers.add_parser(
        "webhook",
        help="serve the pod injector and the Workspace validator over HTTPS",
        description="Mutating admission webhook: injects digest-pinned agentd/opencode delivery "
        "into workspace pods; validates Workspaces.",
    )
    add_webhook_flags(webhook)
    webhook.set_defaults(handler=run_webhook)

    offline = subparsers.add_parser(
        "inject",
        help="inject delivery into manifests offline (like istioctl kube-inject)",
        description="Read Pods, Lists or workload manifests (YAML or JSON) and write them back "
        "as YAML with the delivery wiring injected.",
    )
    offline.add_argument("-f", "--filename", required=True, help="manifest file, or - for stdin")
    add_delivery_flags(offline)
    add_pins_flags(offline)
    offline.set_defaults(handler=run_inject)


def _fail(err: WspinError) -> int:
    print(f"error: {err}", file=sys.stderr)
    return 1


def run_webhook(args: argparse.Namespace) -> int:
    setup_logging(args.log_level)  # first: a warning while importing is a log line too
    from webhook.server import serve  # the server's imports are not needed by `wspin inject`

    try:
        settings = settings_from_args(args)
        import asyncio  # not at the top: `--help` needs no event loop

        return asyncio.run(serve(settings))
    except WspinError as err:
        return _fail(err)


async def _offline_config(args: argparse.Namespace) -> InjectConfig:
    agentd, opencode = deliveries_from_args(args)
    registries = insecure_registries_from_args(args)
    return InjectConfig(
        agentd=await resolve_artifact(
            agentd, kube=None, namespace="", insecure_registries=registries
        ),
        opencode=await resolve_artifact(
            opencode, kube=None, namespace="", insecure_registries=registries
        ),
    )


def run_inject(args: argparse.Namespace) -> int:
    try:
        import asyncio

        cfg = asyncio.run(_offline_config(args))
        if args.filename == "-":
            text, source = sys.stdin.read(), "stdin"
        else:
            try:
                with open(args.filename, encoding="utf-8") as handle:
                    text, source = handle.read(), args.filename
            except OSError as err:
                print(f"error: cannot read {args.filename}: {err.strerror}", file=sys.stderr)
                return 1
        warnings: list[str] = []
        documents = [inject_object(doc, cfg, warnings) for doc in load_documents(text, source)]
    except WspinError as err:
        return _fail(err)
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    sys.stdout.write(dump_documents(documents))
    return 0
