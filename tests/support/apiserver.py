"""A real control plane for the API-level tests, started the way envtest starts one.

``KUBEBUILDER_ASSETS`` names a directory holding ``etcd`` and ``kube-apiserver`` (and, when
present, ``kube-controller-manager``: namespace deletion, garbage collection, the default
ServiceAccount; not its deployment and ReplicaSet controllers, see ``_start``).
``ControlPlane.start`` runs them on free loopback ports with certificates made here, writes an
admin kubeconfig, waits until the API server is ready, and installs the chart's
CRDs and its ValidatingAdmissionPolicies with their bindings (rendered by the real helm for the
release namespace ``wspin-system``). ``stop`` ends every process; the processes also die with
the test process (``PR_SET_PDEATHSIG``) and never get the terminal's Ctrl-C, so an interrupted
or killed session leaves none behind.

The chart's bindings judge only what opted in: namespaces labelled ``CHART_ADMISSION_LABEL`` and,
for the cluster-scoped RuntimeEnvironments, objects carrying that label. A test that acts as
the cluster admin on objects the controller would own is then judged as on the in-repo server.

This module is synchronous on purpose: the session fixture starts it before any test's loop.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import ctypes
import datetime
import http.client
import ipaddress
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from certs.build import KeyPair, new_ca
from tests.chart.helm import PINS, parse_documents, template
from wspin.core.objects import Obj

ASSETS_ENV = "KUBEBUILDER_ASSETS"
FEATURE_GATES_ENV = "WSPIN_TEST_FEATURE_GATES"
"""The API server's ``--feature-gates``; unset: ``ImageVolume=true``; empty: no flag."""
DEFAULT_FEATURE_GATES = "ImageVolume=true"
SETUP_HINT = "setup-envtest use 1.32 -p path"

REPO = Path(__file__).resolve().parents[2]
CRDS = REPO / "charts" / "wspin" / "crds"
RELEASE_NAMESPACE = "wspin-system"
"""The namespace the chart's admission objects are rendered for (their controller account)."""
CHART_ADMISSION_LABEL = "wspin-test/chart-admission"
"""Label a namespace (or a RuntimeEnvironment) ``"true"`` to be judged by the chart's policies."""
SERVICE_RANGE = "10.96.0.0/12"
READY_TIMEOUT = 120.0
"""Seconds a loaded machine may take to bring the control plane up."""
POLL = 0.1
_CLUSTER_SCOPED_RESOURCES = frozenset({"runtimeenvironments"})
_PR_SET_PDEATHSIG = 1


class ControlPlaneError(RuntimeError):
    """The control plane could not be started; the message names what to fix."""


def assets_dir(value: str) -> Path:
    """The binaries directory ``KUBEBUILDER_ASSETS`` names, checked."""
    path = Path(value)
    missing = [b for b in ("etcd", "kube-apiserver") if not os.access(path / b, os.X_OK)]
    if missing:
        raise ControlPlaneError(
            f"{ASSETS_ENV}={value} has no executable {' or '.join(missing)}: point it at a "
            f"directory with etcd and kube-apiserver (`{SETUP_HINT}` prints one)"
        )
    return path


def free_ports(count: int) -> list[int]:
    """``count`` distinct loopback ports nobody listens on (held together, then released)."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]


def _die_with_parent() -> None:
    """Runs in the child before exec: SIGTERM it when the test process dies, however (Linux;
    elsewhere only the session's teardown stops it)."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


# -- certificates -------------------------------------------------------------------------


def _leaf(
    ca: KeyPair,
    common_name: str,
    *,
    organization: str | None = None,
    server_names: Sequence[str] = (),
    now: datetime.datetime,
) -> KeyPair:
    key = ec.generate_private_key(ec.SECP256R1())
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization is not None:
        attributes.insert(0, x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    usages = [ExtendedKeyUsageOID.CLIENT_AUTH]
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name(attributes))
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
    )
    if server_names:
        usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
        sans: list[x509.GeneralName] = []
        for name in server_names:
            try:
                sans.append(x509.IPAddress(ipaddress.ip_address(name)))
            except ValueError:
                sans.append(x509.DNSName(name))
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    return KeyPair(builder.sign(ca.key, hashes.SHA256()), key)


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    path.chmod(0o600)
    return path


@dataclass(frozen=True)
class _Pki:
    ca: Path
    ca_key: Path
    server_cert: Path
    server_key: Path
    admin_cert: Path
    admin_key: Path
    kcm_cert: Path
    kcm_key: Path
    sa_key: Path
    sa_pub: Path


def _make_pki(directory: Path) -> _Pki:
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca = new_ca(now, common_name="wspin test cluster CA")
    server = _leaf(
        ca,
        "kube-apiserver",
        server_names=[
            "127.0.0.1",
            "10.96.0.1",
            "localhost",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
        ],
        now=now,
    )
    admin = _leaf(ca, "wspin-test-admin", organization="system:masters", now=now)
    kcm = _leaf(ca, "system:kube-controller-manager", now=now)
    # RSA: the controller manager's token signer reads only RSA keys.
    sa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    d = directory
    return _Pki(
        ca=_write(d / "ca.crt", ca.cert_pem),
        ca_key=_write(
            d / "ca.key",
            ca.key_pem,
        ),
        server_cert=_write(d / "apiserver.crt", server.cert_pem),
        server_key=_write(d / "apiserver.key", server.key_pem),
        admin_cert=_write(d / "admin.crt", admin.cert_pem),
        admin_key=_write(d / "admin.key", admin.key_pem),
        kcm_cert=_write(d / "kcm.crt", kcm.cert_pem),
        kcm_key=_write(d / "kcm.key", kcm.key_pem),
        sa_key=_write(
            d / "sa.key",
            sa.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.TraditionalOpenSSL,
                serialization.NoEncryption(),
            ),
        ),
        sa_pub=_write(
            d / "sa.pub",
            sa.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            ),
        ),
    )


def _kubeconfig(path: Path, url: str, ca: Path, cert: Path, key: Path) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "test", "cluster": {"server": url, "certificate-authority": str(ca)}}
        ],
        "users": [
            {"name": "test", "user": {"client-certificate": str(cert), "client-key": str(key)}}
        ],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
        "current-context": "test",
    }
    return _write(path, yaml.safe_dump(config).encode())


# -- the control plane --------------------------------------------------------------------


@dataclass
class ControlPlane:
    """etcd + kube-apiserver (+ kube-controller-manager) under ``workdir``."""

    assets: Path
    workdir: Path
    feature_gates: str = DEFAULT_FEATURE_GATES
    with_controller_manager: bool = True
    url: str = ""
    kubeconfig: Path = field(default_factory=Path)
    _processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    _ssl: ssl.SSLContext | None = None

    @classmethod
    @contextlib.contextmanager
    def running(
        cls, assets: Path, workdir: Path, feature_gates: str = DEFAULT_FEATURE_GATES
    ) -> Iterator[ControlPlane]:
        plane = cls(
            assets,
            workdir,
            feature_gates,
            with_controller_manager=os.access(assets / "kube-controller-manager", os.X_OK),
        )
        try:
            plane.start()
            yield plane
        finally:
            plane.stop()

    def start(self) -> None:
        # helm renders the admission objects while the API server starts (seconds, each).
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            admission = pool.submit(chart_admission_objects)
            self._start(admission)

    def _start(self, admission: concurrent.futures.Future[list[tuple[str, Obj]]]) -> None:
        pki = _make_pki(self.workdir / "pki")
        etcd_port, etcd_peer, api_port, kcm_port = free_ports(4)
        self.url = f"https://127.0.0.1:{api_port}"
        self.kubeconfig = _kubeconfig(
            self.workdir / "kubeconfig", self.url, pki.ca, pki.admin_cert, pki.admin_key
        )
        self._ssl = ssl.create_default_context(cafile=str(pki.ca))
        self._ssl.load_cert_chain(str(pki.admin_cert), str(pki.admin_key))
        gates = [f"--feature-gates={self.feature_gates}"] if self.feature_gates else []
        etcd = f"http://127.0.0.1:{etcd_port}"
        peer = f"http://127.0.0.1:{etcd_peer}"
        self._spawn(
            "etcd",
            "--name=test",
            f"--data-dir={self.workdir / 'etcd'}",
            f"--listen-client-urls={etcd}",
            f"--advertise-client-urls={etcd}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=test={peer}",
            "--unsafe-no-fsync",
        )
        self._spawn(
            "kube-apiserver",
            f"--etcd-servers={etcd}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={api_port}",
            # 127.0.0.1 is not a valid endpoint address for the kubernetes Service.
            "--endpoint-reconciler-type=none",
            f"--service-cluster-ip-range={SERVICE_RANGE}",
            "--allow-privileged=true",
            "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=NodeRestriction",
            f"--client-ca-file={pki.ca}",
            f"--tls-cert-file={pki.server_cert}",
            f"--tls-private-key-file={pki.server_key}",
            "--service-account-issuer=https://kubernetes.default.svc",
            f"--service-account-key-file={pki.sa_pub}",
            f"--service-account-signing-key-file={pki.sa_key}",
            f"--cert-dir={self.workdir / 'apiserver-certs'}",
            "--v=1",
            *gates,
        )
        deadline = time.monotonic() + READY_TIMEOUT
        self._wait(deadline, "kube-apiserver to be ready", lambda: self._ready("/readyz"))
        if self.with_controller_manager:
            kcm_config = _kubeconfig(
                self.workdir / "kcm.kubeconfig", self.url, pki.ca, pki.kcm_cert, pki.kcm_key
            )
            self._spawn(
                "kube-controller-manager",
                f"--kubeconfig={kcm_config}",
                f"--authentication-kubeconfig={kcm_config}",
                f"--authorization-kubeconfig={kcm_config}",
                "--bind-address=127.0.0.1",
                f"--secure-port={kcm_port}",
                "--leader-elect=false",
                "--use-service-account-credentials=true",
                # Not the deployment and ReplicaSet controllers: no test runs a Deployment's
                # pods (there is no scheduler or kubelet), and an installation's tests write
                # its Deployments' status as those controllers would once pods are ready.
                "--controllers=*,-deployment-controller,-replicaset-controller",
                f"--service-account-private-key-file={pki.sa_key}",
                f"--root-ca-file={pki.ca}",
                f"--cluster-signing-cert-file={pki.ca}",
                f"--cluster-signing-key-file={pki.ca_key}",
                f"--service-cluster-ip-range={SERVICE_RANGE}",
                f"--cert-dir={self.workdir / 'kcm-certs'}",
                "--v=1",
                *gates,
            )
        # While the controller manager starts: the chart's objects.
        self._install_crds(deadline)
        self._install_chart_admission(admission.result())
        if self.with_controller_manager:
            self._wait(
                deadline,
                "the default ServiceAccount",
                lambda: self._ready("/api/v1/namespaces/default/serviceaccounts/default"),
            )

    def stop(self) -> None:
        for name in reversed(list(self._processes)):
            proc = self._processes.pop(name)
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()

    # -- processes ----------------------------------------------------------------------

    def _spawn(self, name: str, *args: str) -> None:
        logs = self.workdir / "logs"
        logs.mkdir(exist_ok=True)
        with (logs / f"{name}.log").open("wb") as log:
            self._processes[name] = subprocess.Popen(
                [str(self.assets / name), *args],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                # Its own session: the terminal's Ctrl-C reaches pytest, whose teardown stops
                # the process; a pytest killed outright takes it along by the death signal.
                start_new_session=True,
                preexec_fn=_die_with_parent,  # prctl only: safe between fork and exec
            )

    def _wait(self, deadline: float, what: str, check: Any) -> None:
        while not check():
            for name, proc in self._processes.items():
                if proc.poll() is not None:
                    raise ControlPlaneError(f"{name} exited ({proc.returncode}) {self._logs()}")
            if time.monotonic() > deadline:
                raise ControlPlaneError(
                    f"timed out after {READY_TIMEOUT:.0f}s waiting for {what} {self._logs()}"
                )
            time.sleep(POLL)

    def _logs(self) -> str:
        tails = []
        for name in self._processes:
            path = self.workdir / "logs" / f"{name}.log"
            lines = path.read_text(errors="replace").splitlines()[-10:] if path.exists() else []
            tails.append(f"--- {name} ({path}) ---\n" + "\n".join(lines))
        return "\n" + "\n".join(tails)

    # -- the API, synchronously ---------------------------------------------------------

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        port = int(self.url.rsplit(":", 1)[1])
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=self._ssl, timeout=30)
        try:
            payload = None if body is None else json.dumps(body).encode()
            headers = {"Content-Type": "application/json", "Accept": "application/json"}
            conn.request(method, path, body=payload, headers=headers)
            response = conn.getresponse()
            data = response.read()
        finally:
            conn.close()
        try:
            return response.status, json.loads(data) if data else None
        except ValueError:
            return response.status, data.decode(errors="replace")

    def _ready(self, path: str) -> bool:
        try:
            status, _ = self.request("GET", path)
        except OSError:
            return False
        return status == 200

    def _create(self, path: str, obj: dict[str, Any]) -> None:
        status, answer = self.request("POST", path, obj)
        if status not in (200, 201):
            name = obj["metadata"]["name"]
            raise ControlPlaneError(f"creating {obj['kind']} {name} answered {status}: {answer}")

    def _install_crds(self, deadline: float) -> None:
        path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
        names = []
        for file in sorted(CRDS.glob("*.yaml")):
            for doc in yaml.safe_load_all(file.read_text()):
                if doc:
                    self._create(path, doc)
                    names.append(doc["metadata"]["name"])

        def established() -> bool:
            for name in names:
                status, crd = self.request("GET", f"{path}/{name}")
                conditions = ((crd or {}).get("status") or {}).get("conditions") or []
                if status != 200 or not any(
                    c["type"] == "Established" and c["status"] == "True" for c in conditions
                ):
                    return False
            return True

        self._wait(deadline, "the chart's CRDs to be established", established)

    def _install_chart_admission(self, objects: list[tuple[str, Obj]]) -> None:
        base = "/apis/admissionregistration.k8s.io/v1"
        self._create(
            "/api/v1/namespaces", {"kind": "Namespace", "metadata": {"name": RELEASE_NAMESPACE}}
        )
        for kind, obj in objects:
            plural = "validatingadmissionpolicies"
            if kind == "ValidatingAdmissionPolicyBinding":
                plural = "validatingadmissionpolicybindings"
            self._create(f"{base}/{plural}", obj)


def chart_admission_objects() -> list[tuple[str, Obj]]:
    """The chart's policies and bindings for ``RELEASE_NAMESPACE``, every binding narrowed to
    what carries ``CHART_ADMISSION_LABEL`` (see the module's docstring)."""
    result = template(("minimal.yaml",), PINS, namespace=RELEASE_NAMESPACE, kube_version="1.32.0")
    if result.returncode != 0:
        raise ControlPlaneError(f"helm template failed: {result.stderr}")
    docs = parse_documents(result.stdout)
    policies = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ValidatingAdmissionPolicy"}
    opted_in = {"matchLabels": {CHART_ADMISSION_LABEL: "true"}}
    found: list[tuple[str, Obj]] = [("ValidatingAdmissionPolicy", p) for p in policies.values()]
    for doc in docs:
        if doc["kind"] != "ValidatingAdmissionPolicyBinding":
            continue
        match = doc["spec"].setdefault("matchResources", {})
        match["namespaceSelector"] = opted_in
        rules = policies[doc["spec"]["policyName"]]["spec"]["matchConstraints"]["resourceRules"]
        if all(set(r["resources"]) <= _CLUSTER_SCOPED_RESOURCES for r in rules):
            match["objectSelector"] = opted_in
        found.append(("ValidatingAdmissionPolicyBinding", doc))
    return found
