"""The generated PKI serves 127.0.0.1 and names each identity; kubeconfigs round-trip and stay private."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import NameOID

from cluster import errors, pki
from cluster.kube import kubeconfig


def test_serving_cert_covers_loopback_and_in_cluster_names(tmp_path: Path) -> None:
    p = pki.ensure(tmp_path / "pki")
    cert = x509.load_pem_x509_certificate(p.serving_cert.read_bytes())
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "127.0.0.1" in {str(ip) for ip in sans.get_values_for_type(x509.IPAddress)}
    assert "kubernetes.default.svc" in sans.get_values_for_type(x509.DNSName)


def test_client_identities_have_the_rbac_names_kubernetes_expects(tmp_path: Path) -> None:
    p = pki.ensure(tmp_path / "pki")
    for name, (cn, orgs) in pki.CLIENT_IDENTITIES.items():
        cert = x509.load_pem_x509_certificate(p.client_cert(name).read_bytes())
        assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == cn
        assert [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == list(orgs)
    assert stat.S_IMODE(p.ca_key.stat().st_mode) == 0o600


def test_existing_pki_is_reused(tmp_path: Path) -> None:
    first = pki.ensure(tmp_path / "pki").ca_cert.read_bytes()
    assert pki.ensure(tmp_path / "pki").ca_cert.read_bytes() == first


def test_kubeconfig_round_trip(tmp_path: Path) -> None:
    p = pki.ensure(tmp_path / "pki")
    path = kubeconfig.write(tmp_path / "admin.kubeconfig", server="https://127.0.0.1:6443", ca_file=p.ca_cert,
                            user="admin", cert_file=p.client_cert("admin"), key_file=p.client_key("admin"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    conn = kubeconfig.load(path)
    assert conn.server == "https://127.0.0.1:6443"
    assert conn.cert_file and Path(conn.cert_file).read_bytes() == p.client_cert("admin").read_bytes()
    token = kubeconfig.write(tmp_path / "t.kubeconfig", server="https://127.0.0.1:1", ca_file=p.ca_cert,
                             user="t", token="abc", namespace="team-a")
    loaded = kubeconfig.load(token)
    assert loaded.token == "abc" and loaded.namespace == "team-a"


def test_broken_kubeconfig_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    bad.write_text("clusters: [")
    with pytest.raises(errors.ConfigError):
        kubeconfig.load(bad)
    with pytest.raises(errors.ClusterError):
        kubeconfig.load(tmp_path / "missing")
    empty = tmp_path / "empty"
    empty.write_text("apiVersion: v1\nkind: Config\n")
    with pytest.raises(errors.ConfigError) as info:
        kubeconfig.load(empty)
    assert "current-context" in str(info.value)
