"""Writing a file so that a reader sees the old or the new bytes, and nobody else's.

Every file the certificate code writes goes through ``write_atomically``: the bytes go into a
temporary file beside the target, which is then renamed over it. The temporary file is opened
with ``O_CREAT | O_EXCL | O_NOFOLLOW`` under a random name:

- a predictable name (``.tls.key.partial``) lets anyone who can write the directory plant a
  symlink there first, and an ``open`` that follows it writes the private key wherever the
  link points (or truncates a file the writer may write: ``/etc/shadow`` when run as root);
- ``O_EXCL`` refuses any existing entry at the name, a symlink included (it is not followed,
  POSIX ``open(2)``), and ``O_NOFOLLOW`` says the same again for platforms that bend
  ``O_EXCL`` on network filesystems;
- the name is 128 random bits, so a planted entry only costs a retry, never a write;
- ``rename(2)`` replaces the directory entry itself: a symlink planted at the target is
  replaced, not followed.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Callable
from pathlib import Path

ATTEMPTS = 8
"""Names tried before giving up; with random names a second attempt already means someone
is planting entries in the directory."""


def random_token() -> str:
    return secrets.token_hex(16)


def write_atomically(
    path: Path, data: bytes, mode: int, *, token: Callable[[], str] = random_token
) -> Path:
    """Write ``data`` to ``path`` with permission bits ``mode`` via a same-directory rename.

    ``token`` names the temporary file (``.<name>.<token>.tmp``); callers keep the default,
    tests pass their own to plant an entry at the exact name. Raises ``FileExistsError`` when
    ``ATTEMPTS`` names were all taken, and ``OSError`` for anything the filesystem refuses;
    the temporary file never outlives a failure.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    for _ in range(ATTEMPTS):
        temporary = path.with_name(f".{path.name}.{token()}.tmp")
        try:
            fd = os.open(temporary, flags, 0o600)
        except FileExistsError:
            continue
        try:
            try:
                os.fchmod(fd, mode)  # O_CREAT's mode is masked by the umask
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)  # the rename must not become visible before the bytes
            finally:
                os.close(fd)
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
        return path
    raise FileExistsError(
        f"could not create a temporary file beside {path}: {ATTEMPTS} names were taken "
        "(something is creating entries in that directory)"
    )
