"""The error hierarchy: every error carries what went wrong and how to fix it.

Each process maps these to an exit code, an HTTP/admission status or a condition in exactly
one place; nothing else inspects error types.
"""

from __future__ import annotations


class WspinError(Exception):
    """Base error: ``message`` says what was wrong, ``fix`` which flag, value or field fixes it."""

    def __init__(self, message: str, fix: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix

    def __str__(self) -> str:
        return f"{self.message}; {self.fix}" if self.fix else self.message


class ConfigError(WspinError):
    """Invalid configuration found at start: the process exits 1 before serving."""


class AdmissionDenied(WspinError):
    """A request the webhook refuses; ``code`` becomes the AdmissionResponse status code."""

    def __init__(self, message: str, fix: str = "", code: int = 403) -> None:
        super().__init__(message, fix)
        self.code = code


class TransientError(WspinError):
    """A reconcile failure worth retrying; ``delay`` overrides the queue's backoff when set."""

    def __init__(self, message: str, fix: str = "", delay: float | None = None) -> None:
        super().__init__(message, fix)
        self.delay = delay


class TerminalError(WspinError):
    """A reconcile failure that retrying cannot help: logged, not requeued."""
