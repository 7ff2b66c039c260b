"""The syntax of Workspace fields that are not Kubernetes types: package requirements and
egress host names. (Quantities are Kubernetes' own, read by ``wspin.core.quantity``.)

Pure predicates the Workspace validator applies; each ``*_problem`` returns the reason or
None. The patterns are deliberately narrow: they define what a workspace may ask for.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Final

MAX_REQUIREMENT_LENGTH: Final = 256
# RFC 1035 total length of a domain name.
MAX_DOMAIN_LENGTH: Final = 253

# Package name (a "/" only after an npm "@scope"), optional pip extras, optional @version,
# optional comma-separated version constraints. Deliberately narrow: flags, URLs, markers and
# whitespace all fail it. A slash anywhere else is a source, not a name: npm reads
# ``user/repo`` and ``name@user/repo`` as GitHub repositories.
_REQUIREMENT = re.compile(
    r"^(@[a-zA-Z0-9][a-zA-Z0-9._-]*/)?[a-zA-Z][a-zA-Z0-9._-]*"
    r"(\[[a-zA-Z0-9._,-]+\])?"
    r"(@[a-zA-Z0-9._+-]+)?"
    r"(([<>=!~]=?)[a-zA-Z0-9._+-]+(,([<>=!~]=?)[a-zA-Z0-9._+-]+)*)?$"
)
_REQUIREMENT_SOURCE = re.compile(r"(?i)^(git\+|https?:|ssh:|ftp:|file:|svn\+|hg\+|bzr\+|\.\.?/|/)")
# pip and npm install a bare archive name as a local file, not from the registry.
_ARCHIVE_SUFFIXES: Final = (".whl", ".tgz", ".tar", ".tar.gz", ".tar.bz2", ".tar.xz", ".zip")
_DOMAIN = re.compile(r"^(\*\.)?([a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?\.)+[a-zA-Z]{2,63}$")
# In-cluster names would let a user open a NetworkPolicy hole to cluster services; the
# special-use names resolve to loopback or private space by design.
_INTERNAL_SUFFIXES: Final = (
    ".cluster.local",
    ".svc",
    ".local",
    ".internal",
    ".localhost",
    ".localdomain",
    ".arpa",
)
# The numeric forms resolvers and inet_aton accept for an IPv4 address: 127.1, 0x7f.0.0.1,
# 0177.0.0.1, 2130706433 (with or without a trailing dot).
_NUMERIC_HOST = re.compile(r"(?i)^(0x[0-9a-f]*|[0-9]+)(\.(0x[0-9a-f]*|[0-9]+)){0,3}\.?$")


def requirement_problem(requirement: str) -> str | None:
    """Why a package requirement is refused, or None: flags, URLs and paths would let pip/npm
    fetch and run attacker-chosen code in the workspace's init container."""
    text = requirement
    if not text.strip():
        return "must not be empty"
    if text != text.strip():
        # Stored as written and handed to the package manager as written: refuse, never trim.
        return "has leading or trailing whitespace"
    if len(text) > MAX_REQUIREMENT_LENGTH:
        return f"is {len(text)} characters; the limit is {MAX_REQUIREMENT_LENGTH}"
    if text.startswith("-"):
        return "starts with '-', which the package manager would read as a flag"
    if _REQUIREMENT_SOURCE.match(text) or text.lower().endswith(_ARCHIVE_SUFFIXES):
        return "looks like a URL or path; only registry package names may be installed"
    if ".." in text:
        return "contains '..' (path traversal)"
    if not _REQUIREMENT.fullmatch(text):
        return "is not a package name with optional [extras], @version or version constraints"
    return None


def domain_problem(domain: str) -> str | None:
    """Why an egress domain is refused, or None: IP literals (in any form a resolver accepts)
    and in-cluster or special-use names would open a hole to the cluster. Names that merely
    resolve there (``127.0.0.1.nip.io``) pass here: the controller drops such addresses."""
    text = domain
    if not text.strip():
        return "must not be empty"
    if text != text.strip():
        return "has leading or trailing whitespace"
    if len(text) > MAX_DOMAIN_LENGTH:
        return f"is {len(text)} characters; the limit is {MAX_DOMAIN_LENGTH}"
    try:
        ipaddress.ip_address(text.strip("[]"))
    except ValueError:
        numeric = _NUMERIC_HOST.match(text) is not None
    else:
        numeric = True
    if numeric:
        return "is an IP address; egress rules take host names only"
    lowered = text.lower().rstrip(".")
    for suffix in _INTERNAL_SUFFIXES:
        if lowered.endswith(suffix):
            return f"ends in the internal or special-use suffix {suffix!r}; use a public host name"
    if not _DOMAIN.fullmatch(text):
        return "is not a valid host name (letters, digits and '-' per label, optional leading '*.')"
    return None
