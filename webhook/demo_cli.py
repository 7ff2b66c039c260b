"""``wspin demo``: the whole admission path on loopback, with the example workspace pod."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

EXAMPLE_POD = Path(__file__).resolve().parent.parent / "examples" / "workspace-pod.yaml"
"""The pod ``wspin demo`` sends unless given another."""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "demo", help="inject the example workspace pod through the webhook on loopback"
    )
    parser.add_argument(
        "-f",
        "--filename",
        default=str(EXAMPLE_POD),
        help="pod manifest to send (default: examples/workspace-pod.yaml)",
    )
    parser.set_defaults(handler=run_demo)


def run_demo(args: argparse.Namespace) -> int:
    from webhook.demo import run_demo as demo  # the injector, server and TLS: only when run

    status: int = demo(args.filename)
    return status
