"""The generated PKI serves 127.0.0.1 and names each identity; kubeconfigs round-trip and stay private."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.exceptions import InvalidSignature
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


# --- issue 15: identities, lifetimes, etcd's own CA, encryption at rest ---------------------------------------


def _subject_orgs(path: Path) -> list[str]:
    cert = x509.load_pem_x509_certificate(path.read_bytes())
    return [str(a.value) for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]


def test_no_identity_is_in_system_masters(tmp_path: Path) -> None:
    """system:masters bypasses RBAC and cannot be revoked; gpulab's identities get their rights from bindings."""
    p = pki.ensure(tmp_path / "pki")
    for name in pki.LEAVES:
        assert "system:masters" not in _subject_orgs(p.cert(name)), name
    assert _subject_orgs(p.client_cert("admin")) == [pki.ADMIN_GROUP]
    assert _subject_orgs(p.client_cert("agent")) == [pki.AGENT_GROUP]


def test_component_certificates_are_short_lived_and_the_cas_long_lived(tmp_path: Path) -> None:
    p = pki.ensure(tmp_path / "pki")
    for name in pki.LEAVES:
        cert = x509.load_pem_x509_certificate(p.cert(name).read_bytes())
        life = cert.not_valid_after_utc - cert.not_valid_before_utc
        assert life <= pki.LEAF_VALIDITY, (name, life)
    ca = x509.load_pem_x509_certificate(p.ca_cert.read_bytes())
    assert ca.not_valid_after_utc - ca.not_valid_before_utc == pki.CA_VALIDITY


def _resign(p: pki.Pki, name: str, *, days_left: float, orgs: tuple[str, ...] | None = None) -> None:
    """Replace ``name``'s certificate by one from the same CA that ends in ``days_left`` days."""
    import datetime as dt

    from cryptography.hazmat.primitives import hashes, serialization

    old = x509.load_pem_x509_certificate(p.cert(name).read_bytes())
    ca = x509.load_pem_x509_certificate(p.ca_cert.read_bytes())
    ca_key = serialization.load_pem_private_key(p.ca_key.read_bytes(), None)
    subject = old.subject if orgs is None else x509.Name(
        [*(x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs),
         *old.subject.get_attributes_for_oid(NameOID.COMMON_NAME)])
    now = dt.datetime.now(dt.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(ca.subject).public_key(old.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(days=1))
            .not_valid_after(now + dt.timedelta(days=days_left))
            .sign(ca_key, hashes.SHA256()))  # type: ignore[arg-type]
    p.cert(name).write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def test_certificates_near_expiry_are_renewed_by_ensure(tmp_path: Path) -> None:
    p = pki.ensure(tmp_path / "pki")
    sched_before = p.cert("scheduler").read_bytes()
    _resign(p, "admin", days_left=2)
    again = pki.ensure(tmp_path / "pki")
    assert again.renewed == ("admin",)
    cert = x509.load_pem_x509_certificate(p.client_cert("admin").read_bytes())
    assert cert.not_valid_after_utc - cert.not_valid_before_utc == pki.LEAF_VALIDITY
    assert p.cert("scheduler").read_bytes() == sched_before
    assert pki.ensure(tmp_path / "pki").renewed == ()


def test_an_older_gpulabs_ten_year_system_masters_admin_is_replaced(tmp_path: Path) -> None:
    p = pki.ensure(tmp_path / "pki")
    _resign(p, "admin", days_left=3650, orgs=("system:masters",))
    assert "admin" in pki.ensure(tmp_path / "pki").renewed
    assert _subject_orgs(p.client_cert("admin")) == [pki.ADMIN_GROUP]


def test_etcd_trusts_only_its_own_ca(tmp_path: Path) -> None:
    """kubeadm's layout: etcd's CA signs etcd's certificates and the API server's etcd client certificate only, so
    no API client certificate (the admin's, say) is accepted by etcd."""
    p = pki.ensure(tmp_path / "pki")
    etcd_ca = x509.load_pem_x509_certificate(p.etcd_ca_cert.read_bytes())
    ca = x509.load_pem_x509_certificate(p.ca_cert.read_bytes())
    assert etcd_ca.subject != ca.subject
    for name in ("etcd-server", "etcd-peer", "apiserver-etcd-client"):
        x509.load_pem_x509_certificate(p.cert(name).read_bytes()).verify_directly_issued_by(etcd_ca)
    admin = x509.load_pem_x509_certificate(p.client_cert("admin").read_bytes())
    with pytest.raises((ValueError, InvalidSignature)):
        admin.verify_directly_issued_by(etcd_ca)
    server = x509.load_pem_x509_certificate(p.cert("etcd-server").read_bytes())
    sans = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "127.0.0.1" in {str(ip) for ip in sans.get_values_for_type(x509.IPAddress)}


def test_encryption_key_is_private_and_per_cluster(tmp_path: Path) -> None:
    import base64

    from ruamel.yaml import YAML

    a = pki.ensure(tmp_path / "a")
    b = pki.ensure(tmp_path / "b")
    assert stat.S_IMODE(a.encryption_config.stat().st_mode) == 0o600
    docs = [YAML(typ="safe").load(x.encryption_config.read_text()) for x in (a, b)]
    keys = [d["resources"][0]["providers"][0]["secretbox"]["keys"][0]["secret"] for d in docs]
    assert keys[0] != keys[1] and len(base64.b64decode(keys[0])) == 32
    assert docs[0]["kind"] == "EncryptionConfiguration" and docs[0]["resources"][0]["resources"] == ["secrets"]
    first = a.encryption_config.read_bytes()
    assert pki.ensure(tmp_path / "a").encryption_config.read_bytes() == first  # never rotated under the data


def test_break_glass_certificate_is_masters_for_minutes_only(tmp_path: Path) -> None:
    p = pki.ensure(tmp_path / "pki")
    cert_path, key_path = pki.break_glass(p, tmp_path / "certs")
    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    assert _subject_orgs(cert_path) == ["system:masters"]
    assert cert.not_valid_after_utc - cert.not_valid_before_utc <= pki.BREAK_GLASS_VALIDITY
    assert stat.S_IMODE(key_path.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "certs").stat().st_mode) == 0o700


def test_a_pki_folder_of_another_user_or_a_link_is_refused(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir(mode=0o700)
    (tmp_path / "pki").symlink_to(tmp_path / "real")
    with pytest.raises(errors.ClusterError, match="symbolic link"):
        pki.ensure(tmp_path / "pki")
    assert not any((tmp_path / "real").iterdir())
