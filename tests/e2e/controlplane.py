"""A real Kubernetes control plane on loopback for the end-to-end tests: etcd, kube-apiserver, kube-scheduler.

:func:`build_binaries` runs ``scripts/build-k8s.sh`` (the pinned release, from the Go module
proxy, cached between runs). :class:`ControlPlane` starts etcd and kube-apiserver on free
loopback ports with a self-signed serving certificate (openssl), a service-account signing key,
authorization ``RBAC`` and two static identities, the admin (``system:masters``) and
``system:kube-scheduler`` (for a kube-scheduler of its own, as kubeadm gives it); every toposched
component gets its own ServiceAccount token through the TokenRequest API
(:meth:`ControlPlane.service_account_kubeconfig`), so it holds exactly the permissions deploy/
grants it. kube-scheduler is started on demand (:meth:`ControlPlane.start_kube_scheduler`).

Every process runs in its own process group and is stopped with it (SIGTERM, then SIGKILL);
:meth:`ControlPlane.stop` also runs at interpreter exit, so a failed run leaves nothing behind.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import yaml

REPO = Path(__file__).resolve().parents[2]
KUBERNETES_VERSION = (REPO / "tests" / "kubernetes-version").read_text().strip()
ADMIN_TOKEN = "toposched-e2e-admin"
#: The token of the user ``system:kube-scheduler``, whom Kubernetes' own RBAC bootstrap grants what kube-scheduler needs.
KUBE_SCHEDULER_TOKEN = "toposched-e2e-kube-scheduler"


class BuildUnavailable(Exception):
    """The control plane cannot be built here (no Go toolchain); the message says why."""


def build_binaries(timeout: float = 3600.0) -> Path:
    """The directory holding etcd, kube-apiserver and kube-scheduler of the pinned release, built if needed.

    Raises :class:`BuildUnavailable` when they are not built and cannot be (no Go toolchain), or
    when openssl (for the certificates) is missing; ``RuntimeError`` with the build's output
    when the build fails.
    """
    if shutil.which("openssl") is None:
        raise BuildUnavailable("no openssl on PATH: cannot make the API server's certificates")
    done = subprocess.run(["bash", str(REPO / "scripts" / "build-k8s.sh")], capture_output=True, text=True,
                          timeout=timeout, check=False)
    if done.returncode == 3:
        raise BuildUnavailable(done.stderr.strip())
    if done.returncode != 0:
        raise RuntimeError(f"scripts/build-k8s.sh failed ({done.returncode}):\n{done.stderr[-4000:]}")
    return Path(done.stdout.strip().splitlines()[-1])


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_certificates(directory: Path) -> None:
    """A CA, a serving certificate for 127.0.0.1/localhost signed by it, and the service-account key pair."""
    directory.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
             "-subj", "/CN=toposched-e2e-ca", cwd=directory)
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "serving.key", "-out", "serving.csr",
             "-subj", "/CN=kube-apiserver", cwd=directory)
    (directory / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                                       "extendedKeyUsage=serverAuth\n")
    _openssl("x509", "-req", "-in", "serving.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", "serving.crt", "-days", "2", "-extfile", "san.ext", cwd=directory)
    _openssl("genrsa", "-out", "sa.key", "2048", cwd=directory)
    _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=directory)


class Process:
    """A child process in its own process group, its output in ``log``."""

    def __init__(self, name: str, argv: Sequence[str], log: Path):
        self.name, self.argv, self.log = name, list(argv), log
        with open(log, "ab") as out:
            self.popen = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          start_new_session=True)

    @property
    def running(self) -> bool:
        """Whether the process has not exited."""
        return self.popen.poll() is None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` to the whole process group (no-op once it is gone)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, sig)

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM the group, SIGKILL it after ``grace`` seconds, and reap the process."""
        if self.running:
            self.kill(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(grace)
        self.kill(signal.SIGKILL)
        self.popen.wait()

    def tail(self, lines: int = 40) -> str:
        """The last lines of its log, for failure messages."""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


class ControlPlane:
    """etcd + kube-apiserver (+ kube-scheduler on demand) on loopback, state under ``workdir``."""

    def __init__(self, bin_dir: Path, workdir: Path):
        self.bin_dir, self.workdir = bin_dir, workdir
        self.certs = workdir / "pki"
        self.processes: list[Process] = []
        self.etcd: Process | None = None
        self.apiserver: Process | None = None
        self.api_port = 0
        self.etcd_port = 0
        self._apiserver_args: list[str] = []
        atexit.register(self.stop)

    @property
    def url(self) -> str:
        """The API server's URL."""
        return f"https://127.0.0.1:{self.api_port}"

    @property
    def ca_file(self) -> Path:
        """The CA that signed the serving certificate."""
        return self.certs / "ca.crt"

    # ---- lifecycle ----------------------------------------------------------------------------------

    def start(self, extra_apiserver_args: Sequence[str] = ()) -> None:
        """Start etcd and kube-apiserver; return once the API server answers /readyz."""
        make_certificates(self.certs)
        (self.workdir / "tokens.csv").write_text(f'{ADMIN_TOKEN},admin,admin-uid,"system:masters"\n'
                                                 f'{KUBE_SCHEDULER_TOKEN},system:kube-scheduler,kube-scheduler-uid\n')
        self.etcd_port, peer = free_port(), free_port()
        self.etcd = self.spawn("etcd", [
            str(self.bin_dir / "etcd"), "--name", "e2e", "--data-dir", str(self.workdir / "etcd"),
            "--listen-client-urls", f"http://127.0.0.1:{self.etcd_port}",
            "--advertise-client-urls", f"http://127.0.0.1:{self.etcd_port}",
            "--listen-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-cluster", f"e2e=http://127.0.0.1:{peer}",
            "--unsafe-no-fsync", "--log-level", "warn"])
        self.api_port = free_port()
        self._apiserver_args = list(extra_apiserver_args)
        self.start_apiserver()

    def start_apiserver(self) -> None:
        """(Re)start kube-apiserver on the same port and etcd; wait until it is ready."""
        c = self.certs
        self.apiserver = self.spawn("kube-apiserver", [
            str(self.bin_dir / "kube-apiserver"),
            f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={self.api_port}",
            f"--cert-dir={self.workdir / 'apiserver-certs'}",
            f"--tls-cert-file={c / 'serving.crt'}", f"--tls-private-key-file={c / 'serving.key'}",
            f"--token-auth-file={self.workdir / 'tokens.csv'}",
            "--authorization-mode=RBAC",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={c / 'sa.pub'}", f"--service-account-signing-key-file={c / 'sa.key'}",
            "--service-cluster-ip-range=10.96.0.0/24",
            # The "kubernetes" Service's endpoints would have to be a non-loopback address.
            "--endpoint-reconciler-type=none",
            # No kube-controller-manager runs, so no namespace gets its "default" ServiceAccount:
            # the admission plugin that requires it would refuse every pod.
            "--disable-admission-plugins=ServiceAccount",
            "--profiling=false", "--v=1", *self._apiserver_args])
        self.wait_ready()

    def stop_apiserver(self) -> None:
        """Stop kube-apiserver (etcd keeps the state)."""
        if self.apiserver is not None:
            self.apiserver.stop()
            self.processes.remove(self.apiserver)
            self.apiserver = None

    def stop(self) -> None:
        """Stop every process this control plane started, newest first."""
        for process in reversed(self.processes):
            process.stop()
        self.processes.clear()

    def spawn(self, name: str, argv: Sequence[str]) -> Process:
        """Start a process that is stopped with the control plane, its output in ``<workdir>/<name>.log``."""
        process = Process(name, argv, self.workdir / f"{name}.log")
        self.processes.append(process)
        return process

    def wait_ready(self, timeout: float = 90.0) -> None:
        """Wait until kube-apiserver answers /readyz with 200; fail with its log otherwise."""
        deadline = time.monotonic() + timeout
        with self.admin_http() as http:
            while True:
                if self.apiserver is None or not self.apiserver.running:
                    raise RuntimeError(f"kube-apiserver exited:\n{self.apiserver.tail() if self.apiserver else ''}")
                try:
                    if http.get("/readyz").status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"kube-apiserver not ready after {timeout} s:\n{self.apiserver.tail()}")
                time.sleep(0.25)

    # ---- identities ---------------------------------------------------------------------------------

    def admin_http(self, token: str = ADMIN_TOKEN) -> httpx.Client:
        """A raw HTTP client for the API server with ``token`` (the admin's by default)."""
        return httpx.Client(base_url=self.url, verify=ssl.create_default_context(cafile=str(self.ca_file)), timeout=30.0,
                            headers={"Authorization": f"Bearer {token}"})

    def delete_all(self, collection: str) -> None:
        """Delete every object of a collection path (e.g. ``/api/v1/namespaces/x/pods``) at once, no grace period.

        Without a kubelet a bound pod deleted gracefully would stay until its grace period ends.
        """
        with self.admin_http() as http:  # thousands of objects take a while
            http.delete(collection, params={"gracePeriodSeconds": 0}, timeout=600).raise_for_status()

    def kubeconfig(self, name: str, token: str) -> Path:
        """A kubeconfig file for this API server with ``token`` as the user."""
        path = self.workdir / f"{name}.kubeconfig"
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": name,
            "clusters": [{"name": "e2e", "cluster": {"server": self.url, "certificate-authority": str(self.ca_file)}}],
            "users": [{"name": name, "user": {"token": token}}],
            "contexts": [{"name": name, "context": {"cluster": "e2e", "user": name, "namespace": "default"}}],
        }))
        return path

    def admin_kubeconfig(self) -> Path:
        """The admin's kubeconfig (system:masters): for setting tests up, never for a component under test."""
        return self.kubeconfig("admin", ADMIN_TOKEN)

    def service_account_token(self, namespace: str, name: str, seconds: int = 7200) -> str:
        """A token for the ServiceAccount from the TokenRequest API (what a pod's projected token is)."""
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                "spec": {"expirationSeconds": seconds}}
        with self.admin_http() as http:
            response = http.post(f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token", json=body)
        response.raise_for_status()
        return response.json()["status"]["token"]

    def service_account_kubeconfig(self, namespace: str, name: str) -> Path:
        """A kubeconfig that authenticates as the ServiceAccount ``namespace/name``."""
        return self.kubeconfig(f"{namespace}-{name}", self.service_account_token(namespace, name))

    # ---- kube-scheduler ----------------------------------------------------------------------------

    def start_kube_scheduler(self, config: Mapping[str, Any], kubeconfig: Path, name: str = "kube-scheduler",
                             verbosity: int = 2) -> Process:
        """Start kube-scheduler with the KubeSchedulerConfiguration ``config`` as the identity of ``kubeconfig``.

        ``clientConnection.kubeconfig`` is set to ``kubeconfig``; nothing else of ``config`` changes.
        The scheduler serves no HTTPS endpoint (``--secure-port=0``); it logs at ``--v=verbosity``.
        """
        document = dict(config)
        document["clientConnection"] = {**(document.get("clientConnection") or {}), "kubeconfig": str(kubeconfig)}
        path = self.workdir / f"{name}-config.yaml"
        path.write_text(yaml.safe_dump(document))
        return self.spawn(name, [str(self.bin_dir / "kube-scheduler"), f"--config={path}", "--secure-port=0",
                                  f"--v={verbosity}"])
