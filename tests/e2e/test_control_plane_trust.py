"""A control plane only its owner can enter (issue 15, item 3 and the "What to build" list): etcd takes only
certificates of its own CA on its client and peer ports, Secrets are encrypted in etcd, the controller manager's
and scheduler's /metrics refuse anonymous requests, the admin is bound by a ClusterRoleBinding that revokes it when
deleted, and two `gpulab up` at once on one state dir both end well."""

from __future__ import annotations

import base64
import json
import os
import ssl
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from cluster import errors, fleet as fleet_mod, pki as pki_mod
from cluster.kube.client import Client
from cluster.testing import LocalCluster, wait_for

GPULAB = str(Path(sys.executable).with_name("gpulab"))


def _pki(local_cluster: LocalCluster) -> pki_mod.Pki:
    return pki_mod.Pki(local_cluster.backend.dir / "pki")


def _ports(local_cluster: LocalCluster) -> dict[str, int]:
    rec = local_cluster.backend.record()
    assert rec is not None
    ports = dict(rec.ports)
    return ports


def _tls(ca: Path, cert: Path | None = None, key: Path | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(ca))
    if cert and key:
        ctx.load_cert_chain(str(cert), str(key))
    return ctx


def _refused(url: str, verify: ssl.SSLContext | bool, method: str = "GET", **kw: object) -> str:
    """How a request is refused: a transport error (the TLS handshake) or an HTTP status; '' if it got in."""
    try:
        with httpx.Client(verify=verify, timeout=5) as http:
            resp = http.request(method, url, **kw)  # type: ignore[arg-type]
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}: {exc}"
    return "" if resp.status_code == 200 else f"HTTP {resp.status_code}"


def _etcd_get(local_cluster: LocalCluster, key: str) -> list[dict[str, str]]:
    """Read one etcd key through etcd's JSON gateway, as the API server (its etcd client certificate)."""
    p = _pki(local_cluster)
    body = {"key": base64.b64encode(key.encode()).decode()}
    ctx = _tls(p.etcd_ca_cert, p.cert("apiserver-etcd-client"), p.key("apiserver-etcd-client"))
    with httpx.Client(verify=ctx, timeout=5) as http:
        resp = http.post(f"https://127.0.0.1:{_ports(local_cluster)['etcd']}/v3/kv/range", json=body)
    resp.raise_for_status()
    kvs: list[dict[str, str]] = resp.json().get("kvs", [])
    return kvs


def test_etcd_refuses_anyone_without_a_certificate_of_its_own_ca(local_cluster: LocalCluster) -> None:
    p = _pki(local_cluster)
    ports = _ports(local_cluster)
    client_port, peer_port = ports["etcd"], ports["etcd-peer"]
    range_body = {"json": {"key": base64.b64encode(b"/registry/namespaces/default").decode()}}
    # Another local account, with no certificate: plain HTTP, or TLS without a client certificate.
    assert _refused(f"http://127.0.0.1:{client_port}/v3/kv/range", False, "POST", **range_body)
    assert _refused(f"https://127.0.0.1:{client_port}/v3/kv/range", _tls(p.etcd_ca_cert), "POST", **range_body)
    assert _refused(f"https://127.0.0.1:{client_port}/version", _tls(p.etcd_ca_cert))
    # A certificate of the cluster's other CA (the admin's) does not open etcd either.
    assert _refused(f"https://127.0.0.1:{client_port}/version",
                    _tls(p.etcd_ca_cert, p.client_cert("admin"), p.client_key("admin")))
    # The peer port asks for a certificate too.
    assert _refused(f"http://127.0.0.1:{peer_port}/members", False)
    assert _refused(f"https://127.0.0.1:{peer_port}/members", _tls(p.etcd_ca_cert))
    # The API server's etcd client certificate gets in.
    kvs = _etcd_get(local_cluster, "/registry/namespaces/default")
    assert len(kvs) == 1 and b"default" in base64.b64decode(kvs[0]["value"])


def test_secrets_are_encrypted_in_etcd_with_the_clusters_own_key(local_cluster: LocalCluster, namespace: str) -> None:
    marker = "plain-text-marker-7f3a"
    with local_cluster.client() as c:
        c.create(f"/api/v1/namespaces/{namespace}/secrets",
                 {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"k": marker}})
        assert base64.b64decode(c.get(f"/api/v1/namespaces/{namespace}/secrets/s")["data"]["k"]).decode() == marker
    kvs = _etcd_get(local_cluster, f"/registry/secrets/{namespace}/s")
    stored = base64.b64decode(kvs[0]["value"])
    assert stored.startswith(b"k8s:enc:secretbox:v1:key1:"), stored[:40]
    assert marker.encode() not in stored
    mode = _pki(local_cluster).encryption_config.stat().st_mode & 0o777
    assert mode == 0o600, oct(mode)


@pytest.mark.parametrize("component,port_key", [("kube-controller-manager", "controller-manager"),
                                                ("kube-scheduler", "scheduler")])
def test_metrics_refuse_anonymous_requests(local_cluster: LocalCluster, component: str, port_key: str) -> None:
    p = _pki(local_cluster)
    base = f"https://127.0.0.1:{_ports(local_cluster)[port_key]}"
    # The scheduler starts last, as `up` returns: wait until it serves (health probes stay open to anyone, as
    # upstream's default).
    wait_for(lambda: not _refused(f"{base}/healthz", False), timeout=30, what=f"{component} serving")
    anonymous = _refused(f"{base}/metrics", False)
    assert anonymous in ("HTTP 401", "HTTP 403"), f"{component} /metrics anonymously: {anonymous or 'HTTP 200'}"
    admin = _tls(p.ca_cert, p.client_cert("admin"), p.client_key("admin"))
    admin.check_hostname = False
    admin.verify_mode = ssl.CERT_NONE  # the components serve self-signed certificates of their own
    # A component loads the client CA from the API server a moment after it starts serving; until then every
    # request is anonymous.
    wait_for(lambda: _refused(f"{base}/metrics", admin) == "", timeout=30, what=f"the admin reading {component} "
             "/metrics")


def _groups(client: Client) -> list[str]:
    review = client.create("/apis/authentication.k8s.io/v1/selfsubjectreviews",
                           {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    groups: list[str] = review["status"]["userInfo"]["groups"]
    return groups


def test_admin_is_not_in_system_masters_and_deleting_its_binding_revokes_it(local_cluster: LocalCluster) -> None:
    crb = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/gpulab:cluster-admins"
    with local_cluster.client() as c:
        groups = _groups(c)
        assert "system:masters" not in groups and pki_mod.ADMIN_GROUP in groups, groups
        binding = c.get(crb)
        assert binding["roleRef"]["name"] == "cluster-admin"
        assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                                        "name": pki_mod.ADMIN_GROUP}]
        c.delete(crb)
        try:
            def forbidden() -> bool:
                try:
                    c.get("/api/v1/nodes")
                except errors.ApiError as exc:
                    return exc.status == 403
                return False

            wait_for(forbidden, timeout=15, what="the admin's rights to go with its binding")
            denied = local_cluster.kubectl("get", "secrets", "-A", check=False)
            assert denied.returncode != 0 and "forbidden" in denied.stderr
        finally:
            # The owner holds the CA key: `gpulab up` grants the admin again (break-glass, as kubeadm does).
            local_cluster.gpulab("up")
        assert c.exists(crb)
        c.get("/api/v1/nodes")
    assert not list((local_cluster.backend.dir / "certs").glob("break-glass*")), "break-glass credentials left behind"


def test_agents_are_not_in_system_masters(local_cluster: LocalCluster) -> None:
    conn_path = local_cluster.backend._kc("agent")
    with Client.from_kubeconfig(conn_path) as agent:
        groups = _groups(agent)
    assert "system:masters" not in groups and pki_mod.AGENT_GROUP in groups, groups


def test_two_concurrent_ups_on_one_state_dir_both_end_well(tmp_path: Path) -> None:
    fleet_file = tmp_path / "two.yaml"
    fleet_file.write_text(fleet_mod.dump(fleet_mod.scaled(2, name="two")))
    env = dict(os.environ, GPULAB_STATE_DIR=str(tmp_path / "root"))
    cmd = [GPULAB, "up", "--fleet", str(fleet_file)]
    first = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(0.3)
    second = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        outs = [proc.communicate(timeout=240)[0] for proc in (first, second)]
        assert first.returncode == 0, outs[0]
        assert second.returncode == 0, outs[1]
        assert "waiting: `gpulab up`" in outs[1], outs[1]
        status = subprocess.run([GPULAB, "status", "--json"], env=env, capture_output=True, text=True, timeout=60)
        data = json.loads(status.stdout)
        assert data["healthy"] is True, data["problems"]
        # One process each (the API server, controller manager and scheduler share kube-control-plane's).
        processes = {c["detail"] or c["name"] for c in data["components"]}
        assert len({c["pid"] for c in data["components"]}) == len(processes), data["components"]
    finally:
        for proc in (first, second):
            if proc.poll() is None:
                proc.kill()
        subprocess.run([GPULAB, "down", "--purge"], env=env, capture_output=True, timeout=120)
    assert not (tmp_path / "root" / "gpulab").exists()


def _shorten(p: pki_mod.Pki, name: str, hours_left: float) -> None:
    """Re-sign ``name``'s certificate (same key, same CA) so that it ends in ``hours_left`` hours."""
    import datetime as dt

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization

    old = x509.load_pem_x509_certificate(p.cert(name).read_bytes())
    ca = x509.load_pem_x509_certificate(p.ca_cert.read_bytes())
    ca_key = serialization.load_pem_private_key(p.ca_key.read_bytes(), None)
    now = dt.datetime.now(dt.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(old.subject).issuer_name(ca.subject)
               .public_key(old.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - dt.timedelta(days=13)).not_valid_after(now + dt.timedelta(hours=hours_left)))
    for ext in old.extensions:
        builder = builder.add_extension(ext.value, ext.critical)
    cert = builder.sign(ca_key, hashes.SHA256())  # type: ignore[arg-type]
    p.cert(name).write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def test_certificates_near_expiry_are_reported_and_renewed_by_up(local_cluster: LocalCluster) -> None:
    p = _pki(local_cluster)
    _shorten(p, "scheduler", hours_left=12)
    status = local_cluster.gpulab("status", check=False)
    assert status.returncode != 0
    assert "certificates (scheduler) expires" in status.stdout.replace("\n", " "), status.stdout
    before = {c.name: c.pid for c in local_cluster.backend.components()}
    local_cluster.gpulab("up")
    after = {c.name: c.pid for c in local_cluster.backend.components()}
    assert all(after[n] and after[n] != before[n] for n in before), (before, after)  # restarted to load them
    left = pki_mod.expiry(p.directory)["scheduler"].timestamp() - time.time()
    assert left > 13 * 86400, left
    data = json.loads(local_cluster.gpulab("status", "--json").stdout)
    assert data["healthy"] is True, data["problems"]
