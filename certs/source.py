"""What the TLS server asks of a certificate source.

The server builds its listening socket once with ``ssl_context()``; a source swaps the
certificate that context serves (through its SNI callback, ``certs/tls.py``), so new
connections get a new certificate without a restart.
"""

from __future__ import annotations

import datetime
import ssl
from typing import Protocol


class CertificateSource(Protocol):
    def ssl_context(self) -> ssl.SSLContext:
        """The server-side context; the same object for the life of the process."""
        ...

    async def run(self) -> None:
        """Keep the certificate current until cancelled (reload, renew)."""
        ...

    def healthy(self) -> bool:
        """A certificate is loaded and valid now (past notBefore, before notAfter)."""
        ...

    def problem(self) -> str | None:
        """What ``healthy()`` is False about, for the readiness reason; None when healthy."""
        ...

    def not_after(self) -> datetime.datetime | None:
        """Expiry of the certificate currently served."""
        ...
