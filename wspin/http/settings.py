"""The flags of ``ConnectionLimits``, the HTTP server's flag module: one per bound a
deployment may need to tune, each checked once at start, with a ``ConfigError`` naming the flag.

The two sizes the API server fixes (3 MiB bodies, 64 KiB of headers) and the sizes that
follow from them (the 4 MiB discarded while lingering, the 64 KiB send-queue mark) have no
flag: no deployment needs other values.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from typing import Any

from wspin.core.errors import ConfigError
from wspin.core.flags import add_flag
from wspin.http.limits import API_SERVER_IDLE_TIMEOUT, MIB, ConnectionLimits


@dataclass(frozen=True)
class _Bound:
    flag: str
    field: str
    low: float
    high: float
    help: str
    fix: str


_SECONDS = (
    _Bound(
        "--handshake-timeout",
        "handshake_timeout",
        0,
        60,
        "seconds from accept to the end of the TLS handshake",
        "a few seconds: a client needs a few round trips",
    ),
    _Bound(
        "--header-timeout",
        "header_timeout",
        0,
        60,
        "seconds for a request's headers to arrive",
        "a few seconds: the API server sends a request whole",
    ),
    _Bound(
        "--body-timeout",
        "body_timeout",
        0,
        60,
        "seconds for a request's body to arrive once its headers are in",
        "a few seconds: the API server sends a request whole",
    ),
    _Bound(
        "--send-timeout",
        "send_timeout",
        0,
        300,
        "seconds answers may wait for a client that stopped reading before it is dropped",
        "a few seconds: the API server reads an answer as soon as it is sent",
    ),
    _Bound(
        "--linger-timeout",
        "linger_timeout",
        0,
        60,
        "seconds to keep reading (and discarding) after a refusal, so the client reads it",
        "a few seconds",
    ),
    _Bound(
        "--drain-timeout",
        "drain_timeout",
        0,
        300,
        "seconds at shutdown for requests already arriving to be answered",
        "above --header-timeout plus --body-timeout and within the pod's termination grace",
    ),
)
_COUNTS = (
    _Bound(
        "--max-connections",
        "max_connections",
        1,
        100_000,
        "open connections per port, counted from accept; at the cap the one with least "
        "progress (waiting longest on its client, else the oldest body below the minimum "
        "body rate) is closed to admit a new one",
        "to fit the memory limit (about 60 KiB per stalled connection)",
    ),
    _Bound(
        "--max-pipelined-requests",
        "max_pipelined",
        1,
        1024,
        "requests one connection gets answered per turn of the event loop",
        "a small number (16): more lets one connection delay every other",
    ),
    _Bound(
        "--max-buffered-body-bytes",
        "max_buffered_body_bytes",
        4 * MIB,
        4096 * MIB,
        "request body bytes held across connections at once",
        "a quarter of the memory limit, and at least 4 MiB (one whole body)",
    ),
    _Bound(
        "--min-body-rate",
        "min_body_rate",
        1,
        1024 * MIB,
        "bytes/s a body in progress must keep up over the last second; behind it, it is shed "
        "when the body budget is full and closed first at the connection cap",
        "a rate any real client exceeds (65536)",
    ),
    _Bound(
        "--max-queued-output-bytes",
        "max_queued_output_bytes",
        MIB,
        4096 * MIB,
        "answer bytes waiting to be sent across connections; past it clients that stopped "
        "reading are dropped, largest first",
        "a quarter of the memory limit, and at least 1 MiB",
    ),
)


def add_connection_flags(parser: argparse.ArgumentParser) -> None:
    """The deadlines and bounds of every port the process serves."""
    defaults = ConnectionLimits()
    for bound in _SECONDS:
        add_flag(
            parser, bound.flag, type=float, default=getattr(defaults, bound.field), help=bound.help
        )
    add_flag(
        parser,
        "--idle-timeout",
        type=float,
        default=defaults.idle_timeout,
        help=f"seconds an idle keep-alive connection stays open (above the API server's "
        f"{API_SERVER_IDLE_TIMEOUT:g})",
    )
    for bound in _COUNTS:
        add_flag(
            parser, bound.flag, type=int, default=getattr(defaults, bound.field), help=bound.help
        )


def connection_limits_from_args(args: argparse.Namespace) -> ConnectionLimits:
    """The deadlines and bounds, checked; ConfigError names the flag."""
    values: dict[str, Any] = {}
    for bound in (*_SECONDS, *_COUNTS):
        value = getattr(args, bound.flag.lstrip("-").replace("-", "_"))
        seconds = bound in _SECONDS
        if not (bound.low < value <= bound.high if seconds else bound.low <= value <= bound.high):
            span = f"above {bound.low:g}" if seconds else f"at least {bound.low:g}"
            raise ConfigError(
                f"{bound.flag} must be {span} and at most {bound.high:g}, got {value}",
                f"set {bound.flag} to {bound.fix}",
            )
        values[bound.field] = value
    if not API_SERVER_IDLE_TIMEOUT < args.idle_timeout <= 3600:
        raise ConfigError(
            f"--idle-timeout must be above the API server's {API_SERVER_IDLE_TIMEOUT:g} s idle "
            f"timeout and at most 3600, got {args.idle_timeout}",
            "set --idle-timeout to 120 (a shorter one races the API server's reuse of a "
            "connection and fails admission requests)",
        )
    return dataclasses.replace(ConnectionLimits(idle_timeout=args.idle_timeout), **values)
