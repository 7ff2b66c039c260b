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


# The Kubernetes API's answers, as the plain-dict client (``wspin.kube.client``) raises them.


class KubeAPIError(WspinError):
    """An API call failed; ``status`` is the HTTP status (0 for a transport error)."""

    def __init__(self, message: str, status: int = 0, reason: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason


class NotFound(KubeAPIError):
    """404: the object (or its namespace) does not exist."""


class Conflict(KubeAPIError):
    """409 Conflict: a stale resourceVersion; re-read and retry."""


class AlreadyExists(KubeAPIError):
    """409 AlreadyExists: create of a name that is taken."""


class Forbidden(KubeAPIError):
    """403: RBAC does not allow this call."""


class NamespaceTerminating(Forbidden):
    """403 from the NamespaceLifecycle admission: the namespace is being deleted, so nothing
    new may be created in it. An expected answer while a namespace goes, not a fault: the
    namespace controller deletes what a controller owns before its owners, and a re-create
    can only get this answer until the owners' deletion arrives."""


class UnsafeName(KubeAPIError):
    """Refused before sending: a name, namespace or selector that is not what it must be to
    go into a request (``wspin.kube.client.checked_segment``); nothing was sent."""


class Gone(KubeAPIError):
    """410: the watch's resourceVersion was compacted away; re-list."""


class Invalid(KubeAPIError):
    """422: the API server rejected the object as invalid."""
