"""Generate the lab cluster's TLS PKI, laid out as kubeadm lays out its own, with the ``cryptography`` package.

Two certificate authorities (kubeadm "PKI certificates and requirements", kubernetes.io/docs/setup/best-practices/
certificates/):

- the cluster CA signs the API server's serving certificate and one client certificate per identity (admin, each
  control-plane component, our agents);
- a separate etcd CA signs etcd's serving and peer certificates and the API server's etcd client certificate. etcd
  trusts only this CA (``--trusted-ca-file``), so no API client certificate, and no other local user, gets into etcd.

Identities are bound through RBAC, not ``system:masters``: the admin is in group ``gpulab:cluster-admins`` and the
agents in ``gpulab:sim-agents``, each bound to ``cluster-admin`` by a ClusterRoleBinding that deleting revokes
(kubeadm 1.29 made the same change: its admin.conf is in ``kubeadm:cluster-admins``). Only ``break_glass`` makes a
``system:masters`` certificate, valid for minutes, to create those bindings when they are missing.

Each simulated node's kubelet gets a serving certificate of the cluster CA (``kubelets/<node>.pem``, certificate
and key in one file as a kubelet's ``kubelet-server-current.pem``): subject ``system:node:<node>`` in
``system:nodes``, as the ``kubernetes.io/kubelet-serving`` signer requires, with the node's name and InternalIP as
SANs, so the API server (``--kubelet-certificate-authority``) verifies the address it dials.

The CAs live ten years, as kubeadm's do; every other certificate ``LEAF_VALIDITY`` (two weeks) and is renewed by
``ensure`` (so by ``gpulab up``) once less than ``RENEW_BEFORE`` is left. Keys are ECDSA P-256: quick to make and
accepted everywhere we need them, including service-account token signing. Files are written 0600 in a 0700 folder.
The folder also holds the API server's ``EncryptionConfiguration`` with this cluster's own key, so Secrets are
encrypted in etcd (kubernetes.io/docs/tasks/administer-cluster/encrypt-data/).
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from cluster import safefs

CA_VALIDITY = dt.timedelta(days=3650)
LEAF_VALIDITY = dt.timedelta(days=14)
RENEW_BEFORE = dt.timedelta(days=7)
BREAK_GLASS_VALIDITY = dt.timedelta(minutes=10)

ADMIN_GROUP = "gpulab:cluster-admins"
AGENT_GROUP = "gpulab:sim-agents"

# name -> (common name, organisations); signed by the cluster CA
CLIENT_IDENTITIES: dict[str, tuple[str, tuple[str, ...]]] = {
    "admin": ("gpulab-admin", (ADMIN_GROUP,)),
    "controller-manager": ("system:kube-controller-manager", ()),
    "scheduler": ("system:kube-scheduler", ()),
    "agent": ("gpulab:sim-agent", (AGENT_GROUP,)),
    # The API server's identity towards kubelets (--kubelet-client-certificate); the simulated kubelets admit only
    # it (cluster.sim.kubelet.server). It needs no RBAC rights: it calls kubelets, not the API.
    "apiserver-kubelet-client": ("kube-apiserver-kubelet-client", ()),
}
KUBELETS = "kubelets"  # folder of the simulated kubelets' serving certificates

_SERVER = [ExtendedKeyUsageOID.SERVER_AUTH]
_CLIENT = [ExtendedKeyUsageOID.CLIENT_AUTH]
_BOTH = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
_LOOPBACK_IPS = ("127.0.0.1", "::1")


def _apiserver_sans() -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = [
        x509.DNSName(n) for n in ("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
                                  "kubernetes.default.svc.cluster.local")]
    return names + [x509.IPAddress(ipaddress.ip_address(a)) for a in (*_LOOPBACK_IPS, "10.96.0.1")]


def _etcd_sans() -> list[x509.GeneralName]:
    return [x509.DNSName("localhost"), *(x509.IPAddress(ipaddress.ip_address(a)) for a in _LOOPBACK_IPS)]


@dataclass(frozen=True)
class _Leaf:
    name: str
    issuer: str  # "ca" or "etcd-ca"
    cn: str
    orgs: tuple[str, ...]
    usages: tuple[x509.ObjectIdentifier, ...]
    server: bool = False  # serving certificates get SANs
    etcd: bool = False


def _leaves() -> list[_Leaf]:
    out = [_Leaf("apiserver", "ca", "kube-apiserver", (), tuple(_SERVER), server=True)]
    out += [_Leaf(name, "ca", cn, orgs, tuple(_CLIENT)) for name, (cn, orgs) in CLIENT_IDENTITIES.items()]
    out += [
        # kubeadm gives etcd's serving and peer certificates both usages (peers dial each other).
        _Leaf("etcd-server", "etcd-ca", "gpulab-etcd", (), tuple(_BOTH), server=True, etcd=True),
        _Leaf("etcd-peer", "etcd-ca", "gpulab-etcd-peer", (), tuple(_BOTH), server=True, etcd=True),
        _Leaf("apiserver-etcd-client", "etcd-ca", "kube-apiserver-etcd-client", (), tuple(_CLIENT)),
    ]
    return out


LEAVES = tuple(leaf.name for leaf in _leaves())


@dataclass(frozen=True)
class Pki:
    directory: Path
    renewed: tuple[str, ...] = field(default=(), compare=False)  # what the last ``ensure`` (re)made

    @property
    def ca_cert(self) -> Path:
        return self.directory / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.directory / "ca.key"

    @property
    def etcd_ca_cert(self) -> Path:
        return self.directory / "etcd-ca.crt"

    @property
    def serving_cert(self) -> Path:
        return self.directory / "apiserver.crt"

    @property
    def serving_key(self) -> Path:
        return self.directory / "apiserver.key"

    @property
    def sa_key(self) -> Path:
        return self.directory / "sa.key"

    @property
    def sa_pub(self) -> Path:
        return self.directory / "sa.pub"

    @property
    def encryption_config(self) -> Path:
        return self.directory / "encryption-config.yaml"

    def client_cert(self, name: str) -> Path:
        return self.directory / f"{name}.crt"

    def client_key(self, name: str) -> Path:
        return self.directory / f"{name}.key"

    def cert(self, name: str) -> Path:
        return self.directory / f"{name}.crt"

    @property
    def kubelet_dir(self) -> Path:
        return self.directory / KUBELETS

    def kubelet_serving(self, node: str) -> Path:
        """The node's kubelet serving certificate, then its key, in one PEM file."""
        return self.kubelet_dir / f"{node}.pem"

    def key(self, name: str) -> Path:
        return self.directory / f"{name}.key"


def _write(path: Path, data: bytes) -> None:
    safefs.write_private(path, data)


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_bytes(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def _name(cn: str, orgs: tuple[str, ...] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    return x509.Name([*attrs, x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def _cert(
    subject: x509.Name,
    public_key: ec.EllipticCurvePublicKey,
    issuer: x509.Name,
    issuer_key: ec.EllipticCurvePrivateKey,
    *,
    validity: dt.timedelta,
    ca: bool = False,
    usages: list[x509.ObjectIdentifier] | None = None,
    sans: list[x509.GeneralName] | None = None,
) -> x509.Certificate:
    start = _now() - dt.timedelta(minutes=5)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + validity)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
    else:
        builder = builder.add_extension(
            x509.KeyUsage(True, False, True, False, False, False, False, False, False), critical=True
        )
    if usages:
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _load_cert(path: Path) -> x509.Certificate | None:
    try:
        return x509.load_pem_x509_certificate(path.read_bytes())
    except (OSError, ValueError):
        return None


def _load_ca(directory: Path, name: str, cn: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey, bool]:
    """The CA ``name`` (``name.crt``/``name.key``), made now if either file is missing or unreadable; the flag says
    whether it was made."""
    cert = _load_cert(directory / f"{name}.crt")
    try:
        key = serialization.load_pem_private_key((directory / f"{name}.key").read_bytes(), None)
    except (OSError, ValueError, TypeError):
        key = None
    if cert is not None and isinstance(key, ec.EllipticCurvePrivateKey) and cert.not_valid_after_utc > _now():
        return cert, key, False
    key = _key()
    cert = _cert(_name(cn), key.public_key(), _name(cn), key, validity=CA_VALIDITY, ca=True)
    _write(directory / f"{name}.key", _key_bytes(key))
    _write(directory / f"{name}.crt", _pem(cert))
    return cert, key, True


def _needs_renewal(path: Path, subject: x509.Name, issuer: x509.Certificate, key_path: Path) -> bool:
    """Missing, another subject (an older gpulab's ``system:masters`` admin), another CA, near expiry, or valid
    longer than ``LEAF_VALIDITY`` (an older gpulab's ten-year certificates)."""
    cert = _load_cert(path)
    if cert is None or not key_path.exists() or cert.subject != subject:
        return True
    try:
        cert.verify_directly_issued_by(issuer)
    except (ValueError, TypeError, InvalidSignature):
        return True
    left = cert.not_valid_after_utc - _now()
    return left < RENEW_BEFORE or left > LEAF_VALIDITY


def expiry(directory: Path) -> dict[str, dt.datetime]:
    """When each leaf certificate under ``directory`` stops being valid (missing ones left out); the kubelets'
    serving certificates count as one, ``kubelet-serving``, at the earliest of them."""
    out = {}
    for name in LEAVES:
        cert = _load_cert(directory / f"{name}.crt")
        if cert is not None:
            out[name] = cert.not_valid_after_utc
    kubelets = [c.not_valid_after_utc for p in sorted((directory / KUBELETS).glob("*.pem"))
                if (c := _load_cert(p)) is not None]
    if kubelets:
        out["kubelet-serving"] = min(kubelets)
    return out


def _kubelet_sans(node: str, ip: str) -> list[x509.GeneralName]:
    return [x509.DNSName(node), x509.IPAddress(ipaddress.ip_address(ip))]


def _kubelet_needs_renewal(path: Path, node: str, ip: str, issuer: x509.Certificate) -> bool:
    if _needs_renewal(path, _name(f"system:node:{node}", ("system:nodes",)), issuer, path):
        return True
    cert = _load_cert(path)
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value if cert else None
    except x509.ExtensionNotFound:
        return True
    return sans is None or list(sans) != _kubelet_sans(node, ip)


def _ensure_kubelets(pki: Pki, nodes: Sequence[tuple[str, str]], ca_cert: x509.Certificate,
                     ca_key: ec.EllipticCurvePrivateKey) -> int:
    """Each (node, InternalIP)'s kubelet serving certificate, made or renewed as needed; returns how many were."""
    if not nodes:
        return 0
    safefs.private_dir(pki.kubelet_dir)
    made = 0
    for node, ip in nodes:
        path = pki.kubelet_serving(node)
        if not _kubelet_needs_renewal(path, node, ip, ca_cert):
            continue
        key = _key()
        cert = _cert(_name(f"system:node:{node}", ("system:nodes",)), key.public_key(), ca_cert.subject, ca_key,
                     validity=LEAF_VALIDITY, usages=list(_SERVER), sans=_kubelet_sans(node, ip))
        _write(path, _pem(cert) + _key_bytes(key))
        made += 1
    return made


def _encryption_config() -> bytes:
    secret = base64.b64encode(os.urandom(32)).decode()
    # secretbox (XSalsa20 and Poly1305) is the upstream page's "strong, fast" choice; identity is listed last so
    # Secrets written before encryption was configured can still be read (and are encrypted when next written).
    return ("apiVersion: apiserver.config.k8s.io/v1\n"
            "kind: EncryptionConfiguration\n"
            "resources:\n"
            "  - resources: [secrets]\n"
            "    providers:\n"
            "      - secretbox:\n"
            "          keys:\n"
            "            - name: key1\n"
            f"              secret: {secret}\n"
            "      - identity: {}\n").encode()


def ensure(directory: Path, kubelets: Sequence[tuple[str, str]] = ()) -> Pki:
    """Create whatever of the PKI under ``directory`` is missing, and renew leaf certificates that are near expiry
    or were signed by a CA that has since been replaced; return its paths (``renewed`` names what was made).
    ``kubelets``: (node, InternalIP) of the simulated nodes whose kubelet serving certificates it keeps too."""
    safefs.private_dir(directory)
    pki = Pki(directory)
    made: list[str] = []
    cas = {}
    for name, cn in (("ca", "gpulab-ca"), ("etcd-ca", "gpulab-etcd-ca")):
        cert, key, fresh = _load_ca(directory, name, cn)
        cas[name] = (cert, key)
        if fresh:
            made.append(name)
    for leaf in _leaves():
        issuer_cert, issuer_key = cas[leaf.issuer]
        subject = _name(leaf.cn, leaf.orgs)
        if not _needs_renewal(pki.cert(leaf.name), subject, issuer_cert, pki.key(leaf.name)):
            continue
        key = _key()
        sans = (_etcd_sans() if leaf.etcd else _apiserver_sans()) if leaf.server else None
        cert = _cert(subject, key.public_key(), issuer_cert.subject, issuer_key,
                     validity=LEAF_VALIDITY, usages=list(leaf.usages), sans=sans)
        _write(pki.key(leaf.name), _key_bytes(key))
        _write(pki.cert(leaf.name), _pem(cert))
        made.append(leaf.name)
    if not (pki.sa_key.exists() and pki.sa_pub.exists()):
        sa_key = _key()
        _write(pki.sa_key, _key_bytes(sa_key))
        _write(pki.sa_pub, sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
        made.append("sa")
    if not pki.encryption_config.exists():
        _write(pki.encryption_config, _encryption_config())
        made.append("encryption-config")
    if _ensure_kubelets(pki, kubelets, *cas["ca"]):
        made.append("kubelet-serving")
    return Pki(directory, tuple(made))


def break_glass(pki: Pki, dest: Path) -> tuple[Path, Path]:
    """A ``system:masters`` client certificate valid for ``BREAK_GLASS_VALIDITY``, written (0600) into the private
    folder ``dest``: only for creating the admin's ClusterRoleBinding when it is missing. The caller deletes both
    files right after use; the certificate expires within minutes either way."""
    ca_cert, ca_key, _ = _load_ca(pki.directory, "ca", "gpulab-ca")
    key = _key()
    cert = _cert(_name("gpulab-break-glass", ("system:masters",)), key.public_key(), ca_cert.subject, ca_key,
                 validity=BREAK_GLASS_VALIDITY, usages=list(_CLIENT))
    safefs.private_dir(dest)
    cert_path, key_path = dest / "break-glass.crt", dest / "break-glass.key"
    _write(key_path, _key_bytes(key))
    _write(cert_path, _pem(cert))
    return cert_path, key_path
