"""An in-process Kubernetes API server for tests: real HTTP on loopback, plain dicts inside.

It exists because the product's API-level tests must run unchanged against a real cluster
(``WSPIN_TEST_KUBECONFIG``), so the fake is reached only over HTTP through the real
kubernetes_asyncio client, never by patching it. It emulates what the controller relies on:
server-set metadata, optimistic concurrency, selectors, the three patch flavours, the status
subresource (on built-in kinds metadata changes through it apply, as on v1.32), generation,
finalizers, garbage collection and watches with resume, 410 and bookmarks,
ValidatingAdmissionPolicies (CEL, ``policies``) on every create, update and delete, the
``pods/ephemeralcontainers`` and ``pods/binding`` subresources; admission webhooks of pods
and custom resources through the stored configurations over verified HTTPS (``webhooks``);
SubjectAccessReview decided by the stored RBAC objects (``authorization``); the chart's CRDs
as Established objects. It is not a full API server: no server-side apply, no authentication
(a request is the cluster admin's, or the user it impersonates with ``Impersonate-User``, as
admission policies see it) or enforcement of RBAC on its own requests, no defaulting beyond
what ``defaults`` lists.

Modules: ``kinds`` (what is served), ``selectors``, ``patch``, ``defaults`` (per-kind
strategies), ``policies`` and ``review`` (admission policies), ``admission`` (mutating
webhooks and scripted refusals), ``authorization``, ``store`` (objects and history),
``watch`` (streams), ``server`` (routing and test controls), ``status`` (error bodies).
"""

from tests.kubeapi.server import KubeServer, Write

__all__ = ["KubeServer", "Write"]
