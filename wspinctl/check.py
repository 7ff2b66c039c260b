"""``wspin check``: is an installation healthy? One named check per piece, each with its fix.

Every check reads the cluster through the plain-dict client and turns what it found into a
``Result``: passed or not, one line saying what was seen, and for a failure the command or
setting that repairs it. Checks never write: the two pods they send are server-side dry runs.
A check that cannot read what it needs (403, transport) fails with that reason, so a partial
view is never reported as healthy.
"""

from __future__ import annotations

import base64
import datetime
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

from wspin.core import imagevolume, rollout
from wspin.core.clock import parse_time
from wspin.core.contract import (
    ARTIFACTS,
    DELIVERY_ANNOTATION,
    LABEL_APP,
    LABEL_APP_VALUE,
    LABEL_COMPONENT,
    LABEL_COMPONENT_VALUE,
    LABEL_WORKSPACE,
    MAIN_CONTAINER,
)
from wspin.core.errors import KubeAPIError
from wspin.core.kinds import (
    CUSTOM_RESOURCE_DEFINITIONS,
    DEPLOYMENTS,
    LEASES,
    MUTATING_WEBHOOKS,
    PODS,
    SECRETS,
    SUBJECT_ACCESS_REVIEWS,
    VALIDATING_WEBHOOKS,
    Resource,
)
from wspin.core.objects import Obj
from wspin.core.workspace_pod import WORKSPACE_ARGS, WORKSPACE_COMMAND, parse_receipt
from wspin.kube.client import Kube
from wspinctl.install import LEADER_LEASE, Installation, ProcessArgs
from wspinctl.permissions import needed_calls

CRDS: Final = ("workspaces.llmsafespaces.dev", "inferencerelays.llmsafespaces.dev")
CHECK_POD_LABEL: Final = "wspin-check"


@dataclass(frozen=True)
class Result:
    """One check's outcome: ``detail`` says what was seen, ``fix`` how to repair a failure."""

    name: str
    title: str
    ok: bool
    detail: str
    fix: str = ""

    def as_dict(self) -> Obj:
        return {
            "name": self.name,
            "title": self.title,
            "ok": self.ok,
            "detail": self.detail,
            "fix": self.fix,
        }


@dataclass(frozen=True)
class Scope:
    """What the checks look at, read once: the release, its Deployments, the clock."""

    kube: Kube
    install: Installation
    probe_namespace: str
    now: datetime.datetime
    webhook: Obj | None
    controller: Obj | None

    @property
    def webhook_args(self) -> ProcessArgs:
        return ProcessArgs.of(self.webhook)

    @property
    def controller_args(self) -> ProcessArgs:
        return ProcessArgs.of(self.controller)


def _pass(name: str, title: str, detail: str) -> Result:
    return Result(name, title, True, detail)


def _fail(name: str, title: str, detail: str, fix: str) -> Result:
    return Result(name, title, False, detail, fix)


async def run_checks(
    kube: Kube, install: Installation, *, probe_namespace: str, now: datetime.datetime
) -> list[Result]:
    """Every check, in the order an operator repairs things (CRDs before webhooks before
    the controller), each independent of the others' outcome."""
    ns = install.namespace
    webhook = await _read(kube, DEPLOYMENTS, install.webhook, ns)
    controller = await _read(kube, DEPLOYMENTS, install.controller, ns)
    scope = Scope(
        kube,
        install,
        probe_namespace,
        now,
        webhook if isinstance(webhook, dict) else None,
        controller if isinstance(controller, dict) else None,
    )
    checks: list[Callable[[Scope], Awaitable[Result]]] = [
        check_crds,
        check_mutating_webhook,
        check_validating_webhook,
        check_ca_bundle,
        check_webhook_ready,
        check_image_volumes,
        check_controller_leader,
        check_dry_run_injection,
        check_webhook_rbac,
        check_controller_rbac,
    ]
    results = []
    for check in checks:
        try:
            results.append(await check(scope))
        except KubeAPIError as err:
            results.append(_unreadable(check, err))
    return results


async def _read(kube: Kube, res: Resource, name: str, namespace: str | None) -> Obj | None:
    """The object, None when absent; an error (403, transport) is raised to the check."""
    return await kube.get_or_none(res, name, namespace)


def _unreadable(check: Callable[[Scope], Awaitable[Result]], err: KubeAPIError) -> Result:
    name = check.__name__.removeprefix("check_").replace("_", "-")
    return _fail(
        name,
        name,
        f"could not read what this check needs: {err.message}",
        "run wspin check with credentials that may read the release's objects "
        "(cluster-admin, or --kubeconfig naming such a context)",
    )


# -- CRDs -----------------------------------------------------------------------------------


def crd_problem(crd: Obj | None) -> str | None:
    """None when the CRD exists and is Established, else what is wrong."""
    if crd is None:
        return "not installed"
    for condition in (crd.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Established":
            if condition.get("status") == "True":
                return None
            return f"not Established: {condition.get('message') or condition.get('reason')}"
    return "not Established yet"


async def check_crds(scope: Scope) -> Result:
    title = "CRDs installed and Established"
    problems = []
    for name in CRDS:
        problem = crd_problem(await _read(scope.kube, CUSTOM_RESOURCE_DEFINITIONS, name, None))
        if problem:
            problems.append(f"{name} {problem}")
    if problems:
        return _fail(
            "crds",
            title,
            "; ".join(problems),
            "kubectl apply --server-side -f charts/wspin/crds/ (Helm installs CRDs only on "
            "the first install and never upgrades or restores them)",
        )
    return _pass("crds", title, ", ".join(CRDS))


# -- webhook configurations -----------------------------------------------------------------


def configuration_problem(config: Obj | None, install: Installation) -> str | None:
    """None when every entry calls the release's webhook Service with a caBundle."""
    if config is None:
        return "missing"
    webhooks = config.get("webhooks") or []
    if not webhooks:
        return "has no webhooks"
    for webhook in webhooks:
        client = webhook.get("clientConfig") or {}
        service = client.get("service") or {}
        if (service.get("namespace"), service.get("name")) != (install.namespace, install.webhook):
            return (
                f"entry {webhook.get('name')} calls {service.get('namespace')}/"
                f"{service.get('name')}, not {install.namespace}/{install.webhook}"
            )
        if not client.get("caBundle"):
            return f"entry {webhook.get('name')} has no caBundle"
    return None


async def _check_configuration(scope: Scope, name: str, res: Resource, config_name: str) -> Result:
    title = f"{res.kind} {config_name}"
    problem = configuration_problem(await _read(scope.kube, res, config_name, None), scope.install)
    if problem:
        release, ns = scope.install.release, scope.install.namespace
        return _fail(
            name,
            title,
            problem,
            f"helm upgrade {release} charts/wspin -n {ns} --reuse-values restores it; the "
            "webhook then fills in caBundle (self-managed certificates) within a minute",
        )
    return _pass(name, title, f"calls {scope.install.namespace}/{scope.install.webhook}")


async def check_mutating_webhook(scope: Scope) -> Result:
    return await _check_configuration(
        scope, "mutating-webhook", MUTATING_WEBHOOKS, scope.install.mutating_webhook
    )


async def check_validating_webhook(scope: Scope) -> Result:
    return await _check_configuration(
        scope, "validating-webhook", VALIDATING_WEBHOOKS, scope.install.validating_webhook
    )


# -- the serving certificate against the caBundle -------------------------------------------


def serving_secret(args: ProcessArgs, install: Installation) -> tuple[str, str] | None:
    """(Secret, key) holding the certificate the webhook serves."""
    if args.switch("--self-managed-certs"):
        return (args.value("--secret") or f"{install.webhook}-tls", "tls.crt")
    cert_file = args.value("--tls-cert-file")
    return args.secret_of_file(cert_file) if cert_file else None


def bundle_problem(
    bundle_pem: bytes, serving_pem: bytes, dns_name: str, now: datetime.datetime
) -> str | None:
    """None when ``serving_pem``'s leaf is valid now, names ``dns_name`` and is signed by a
    CA in ``bundle_pem``: what the API server checks on every call."""
    from certs.build import (
        CertificateError,
        dns_names_of,
        fingerprint,
        load_certificates,
        signed_by,
    )

    try:
        cas = load_certificates(bundle_pem, "caBundle")
        leaf = load_certificates(serving_pem, "serving certificate")[0]
    except CertificateError as err:
        return str(err)
    if not any(signed_by(leaf, ca) for ca in cas):
        listed = ", ".join(fingerprint(ca) for ca in cas)
        return (
            f"the serving certificate {fingerprint(leaf)} is not signed by any CA in the "
            f"caBundle ({listed}): the API server refuses every call"
        )
    if not leaf.not_valid_before_utc <= now <= leaf.not_valid_after_utc:
        return f"the serving certificate is not valid now (until {leaf.not_valid_after_utc:%F})"
    if dns_name not in dns_names_of(leaf):
        return f"the serving certificate does not name {dns_name}"
    return None


async def check_ca_bundle(scope: Scope) -> Result:
    name, title = "ca-bundle", "caBundle verifies the serving certificate"
    install = scope.install
    args = scope.webhook_args
    located = serving_secret(args, install)
    if scope.webhook is None or located is None:
        return _fail(
            name, title, "cannot tell where the webhook's certificate is", _restore(install)
        )
    secret_name, key = located
    secret = await _read(scope.kube, SECRETS, secret_name, install.namespace)
    raw = ((secret or {}).get("data") or {}).get(key)
    if not raw:
        return _fail(
            name,
            title,
            f"Secret {secret_name} has no {key} yet",
            f"kubectl -n {install.namespace} logs deploy/{install.webhook} says why "
            "(self-managed mode creates it at start)",
        )
    serving = base64.b64decode(raw)
    dns_name = f"{install.webhook}.{install.namespace}.svc"
    for res, config_name in (
        (MUTATING_WEBHOOKS, install.mutating_webhook),
        (VALIDATING_WEBHOOKS, install.validating_webhook),
    ):
        config = await _read(scope.kube, res, config_name, None) or {}
        for webhook in config.get("webhooks") or []:
            bundle = base64.b64decode((webhook.get("clientConfig") or {}).get("caBundle") or "")
            problem = bundle_problem(bundle, serving, dns_name, scope.now)
            if problem:
                return _fail(
                    name, title, f"{res.kind} {config_name}: {problem}", _bundle_fix(scope, config)
                )
    return _pass(name, title, f"Secret {secret_name} {key} for {dns_name}")


def _bundle_fix(scope: Scope, config: Obj) -> str:
    install = scope.install
    annotations = (config.get("metadata") or {}).get("annotations") or {}
    if "cert-manager.io/inject-ca-from" in annotations:
        return (
            "cert-manager's cainjector writes the caBundle: check that it runs "
            "(kubectl -n cert-manager get deploy cert-manager-cainjector) and its logs"
        )
    if scope.webhook_args.switch("--self-managed-certs"):
        return (
            f"kubectl -n {install.namespace} rollout restart deployment/{install.webhook} "
            "(the webhook publishes its CA into both configurations at start)"
        )
    return (
        f"wspin certs patch-ca-bundle --mutating {install.mutating_webhook} --validating "
        f"{install.validating_webhook} --ca-file ca.crt (the CA that issued the Secret's "
        "certificate; Helm: certificates.caBundle)"
    )


def _restore(install: Installation) -> str:
    return (
        f"helm upgrade {install.release} charts/wspin -n {install.namespace} --reuse-values "
        "(or pass --release/--namespace naming the installation)"
    )


# -- Deployments and the Lease --------------------------------------------------------------


def deployment_problem(deployment: Obj | None) -> str | None:
    """None when every desired replica is updated and ready, else what is not."""
    if deployment is None:
        return "missing"
    wanted = int((deployment.get("spec") or {}).get("replicas", 1))
    status = deployment.get("status") or {}
    ready, updated = int(status.get("readyReplicas", 0)), int(status.get("updatedReplicas", 0))
    if ready < wanted or updated < wanted:
        return f"{ready}/{wanted} replicas ready, {updated}/{wanted} updated"
    return None


def _replicas(deployment: Obj) -> str:
    wanted = int((deployment.get("spec") or {}).get("replicas", 1))
    return f"{int((deployment.get('status') or {}).get('readyReplicas', 0))}/{wanted} ready"


async def check_webhook_ready(scope: Scope) -> Result:
    name, title = "webhook-ready", "webhook Deployment ready"
    install = scope.install
    problem = deployment_problem(scope.webhook)
    if problem == "missing":
        return _fail(name, title, f"Deployment {install.webhook} missing", _restore(install))
    if problem and scope.webhook is not None:
        return _fail(
            name,
            title,
            problem,
            f"kubectl -n {install.namespace} logs deploy/{install.webhook} names what readiness "
            "waits for (pins, certificate, or the image-volume probe; see image-volumes)",
        )
    assert scope.webhook is not None
    return _pass(name, title, f"{install.webhook} {_replicas(scope.webhook)}")


async def check_image_volumes(scope: Scope) -> Result:
    """The webhook's start-up probe, run again: the same dry-run pod on the same API server."""
    name, title = "image-volumes", "API server keeps image volumes (ImageVolume gate)"
    install = scope.install
    image = scope.webhook_args.value("--agentd-image")
    if not image:
        return _fail(name, title, "no --agentd-image on the webhook", _restore(install))
    skipped = scope.webhook_args.switch("--skip-image-volume-probe")
    note = " (the webhook's own probe is off: --skip-image-volume-probe)" if skipped else ""
    pod = imagevolume.probe_pod(install.namespace, image)
    try:
        returned = await scope.kube.create(PODS, pod, install.namespace, dry_run=True)
    except KubeAPIError as err:
        if err.status != 422:
            raise
        returned = {}
    if imagevolume.kept_image_volume(returned):
        return _pass(name, title, f"a dry-run pod kept its image volume{note}")
    return _fail(
        name,
        title,
        f"the API server dropped or refused a dry-run pod's image volume{note}",
        "enable the ImageVolume feature gate on kube-apiserver and every kubelet "
        "(--feature-gates=ImageVolume=true; on by default from Kubernetes 1.35); until then "
        "the webhook stays unready and workspace pods are refused",
    )


def lease_problem(lease: Obj | None, now: datetime.datetime) -> tuple[str | None, str]:
    """(problem or None, what the Lease shows)."""
    if lease is None:
        return "no Lease: no replica has ever led", ""
    spec = lease.get("spec") or {}
    holder = str(spec.get("holderIdentity") or "")
    renewed = parse_time(spec.get("renewTime"))
    duration = int(spec.get("leaseDurationSeconds") or 15)
    if not holder:
        return "no holder: the last leader released the Lease and none took over", ""
    if renewed is None:
        return f"held by {holder} but never renewed", holder
    age = (now - renewed).total_seconds()
    seen = f"held by {holder}, renewed {age:.0f}s ago (lease {duration}s)"
    if age > duration:
        return f"expired: {seen}", holder
    return None, seen


async def check_controller_leader(scope: Scope) -> Result:
    name, title = "controller-leader", "controller leader"
    install = scope.install
    if scope.controller is None:
        return _fail(name, title, f"Deployment {install.controller} missing", _restore(install))
    logs = f"kubectl -n {install.namespace} logs deploy/{install.controller}"
    if not scope.controller_args.switch("--enable-leader-election"):
        problem = deployment_problem(scope.controller)
        if problem:
            return _fail(name, title, f"leader election off; {problem}", f"{logs} says why")
        return _pass(name, title, f"leader election off; {_replicas(scope.controller)}")
    lease = await _read(scope.kube, LEASES, LEADER_LEASE, install.namespace)
    problem, seen = lease_problem(lease, scope.now)
    if problem:
        return _fail(
            name,
            title,
            f"Lease {LEADER_LEASE}: {problem}",
            f"{logs} (a replica that cannot reach the API server or lacks its Lease RBAC "
            "never leads; see rbac-controller)",
        )
    return _pass(name, title, f"Lease {LEADER_LEASE} {seen}")


# -- a dry-run workspace pod ----------------------------------------------------------------


def check_pod(namespace: str) -> Obj:
    """The smallest workspace pod the webhook injects; valid under restricted PSS."""
    return {
        "metadata": {
            "generateName": f"{CHECK_POD_LABEL}-",
            "namespace": namespace,
            "labels": {
                LABEL_APP: LABEL_APP_VALUE,
                LABEL_COMPONENT: LABEL_COMPONENT_VALUE,
                LABEL_WORKSPACE: CHECK_POD_LABEL,
            },
        },
        # A workspace pod runs the delivered supervisor (the injector and the delivery policy
        # refuse anything else); a dry run never starts it.
        "spec": imagevolume.dry_run_pod_spec(
            [
                {
                    "name": MAIN_CONTAINER,
                    "image": "registry.k8s.io/pause:3.10",
                    "command": list(WORKSPACE_COMMAND),
                    "args": list(WORKSPACE_ARGS[0]),
                }
            ]
        ),
    }


def served_digests(args: ProcessArgs) -> dict[str, str]:
    """Artifact name → the digest the webhook's configuration injects."""
    served: dict[str, str] = {}
    for artifact in ARTIFACTS:
        digest = rollout.digest_of(args.value(f"--{artifact.name}-image") or "")
        if digest:
            served[artifact.name] = digest
    return served


def injection_problem(pod: Obj, served: dict[str, str]) -> tuple[str | None, str]:
    """(problem or None, fix) for a dry-run workspace pod as the API server returned it."""
    receipt = parse_receipt(pod)
    if not receipt:
        return (
            f"came back without the {DELIVERY_ANNOTATION} receipt: the webhook was not called",
            "pass --probe-namespace naming a namespace where workspaces run (the release "
            "namespace, kube-system and webhook.excludedNamespaces are never injected), and "
            "check that the MutatingWebhookConfiguration's selectors are the chart's",
        )
    for artifact in ARTIFACTS:
        digest = receipt.get(artifact.name, "")
        if not rollout.volume_digest(pod, artifact):
            return (
                f"has the receipt but no {artifact.name} image volume: the API server dropped it",
                "enable the ImageVolume feature gate (see image-volumes)",
            )
        if artifact.name in served and digest != served[artifact.name]:
            return (
                f"{artifact.name} {digest[:19]} injected, the Deployment configures "
                f"{served[artifact.name][:19]}: a replica runs an older configuration",
                "wait for the webhook rollout to finish (kubectl rollout status)",
            )
    return None, ""


async def check_dry_run_injection(scope: Scope) -> Result:
    name, title = "dry-run-injection", "a dry-run workspace pod comes back injected"
    namespace = scope.probe_namespace
    try:
        returned = await scope.kube.create(PODS, check_pod(namespace), namespace, dry_run=True)
    except KubeAPIError as err:
        if err.status == 404:
            fix = "pass --probe-namespace naming an existing namespace where workspaces run"
        elif "failed calling webhook" in err.message:
            fix = "the API server cannot call the webhook: see webhook-ready and ca-bundle"
        else:
            fix = "see the API server's message; a policy may refuse the check's pod"
        return _fail(name, title, f"in {namespace}: {err.message}", fix)
    problem, fix = injection_problem(returned, served_digests(scope.webhook_args))
    if problem:
        return _fail(name, title, f"in {namespace}: {problem}", fix)
    digests = parse_receipt(returned)
    shown = ", ".join(f"{a.name} {digests[a.name][:19]}" for a in ARTIFACTS if a.name in digests)
    return _pass(name, title, f"in {namespace}: {shown}")


# -- RBAC of both service accounts ----------------------------------------------------------


async def _rbac(scope: Scope, component: str, args: ProcessArgs, deployment: Obj | None) -> Result:
    name, title = f"rbac-{component}", f"{component} ServiceAccount may make its API calls"
    install = scope.install
    if deployment is None:
        return _fail(name, title, "its Deployment is missing", _restore(install))
    account = args.service_account
    user = f"system:serviceaccount:{install.namespace}:{account}"
    calls = needed_calls(component, args, install)
    denied = []
    for call in calls:
        review = {
            "spec": {
                "user": user,
                "groups": [
                    "system:serviceaccounts",
                    f"system:serviceaccounts:{install.namespace}",
                    "system:authenticated",
                ],
                "resourceAttributes": call.attributes(),
            }
        }
        answer = await scope.kube.create(SUBJECT_ACCESS_REVIEWS, review)
        if not (answer.get("status") or {}).get("allowed"):
            denied.append(call.describe())
    if denied:
        return _fail(
            name,
            title,
            f"{account} is denied: {'; '.join(denied)}",
            f"{_restore(install)} restores the chart's Roles and bindings",
        )
    return _pass(name, title, f"{account}: {len(calls)} calls allowed")


async def check_webhook_rbac(scope: Scope) -> Result:
    return await _rbac(scope, "webhook", scope.webhook_args, scope.webhook)


async def check_controller_rbac(scope: Scope) -> Result:
    return await _rbac(scope, "controller", scope.controller_args, scope.controller)
