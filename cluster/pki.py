"""Generate the lab cluster's TLS PKI and kubeconfigs with the ``cryptography`` package.

One CA signs the apiserver's serving certificate and one client certificate per identity (admin, each
control-plane component, our agents). Keys are ECDSA P-256: quick to make, accepted everywhere we need them,
including service-account token signing. Files are written 0600 and only once: an existing PKI is reused.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = dt.timedelta(days=3650)

# name -> (common name, organisations)
CLIENT_IDENTITIES: dict[str, tuple[str, tuple[str, ...]]] = {
    "admin": ("gpulab-admin", ("system:masters",)),
    "controller-manager": ("system:kube-controller-manager", ()),
    "scheduler": ("system:kube-scheduler", ()),
    "agent": ("gpulab:sim-agent", ("system:masters",)),
    "apiserver-kubelet-client": ("kube-apiserver-kubelet-client", ("system:masters",)),
}


@dataclass(frozen=True)
class Pki:
    directory: Path

    @property
    def ca_cert(self) -> Path:
        return self.directory / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.directory / "ca.key"

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

    def client_cert(self, name: str) -> Path:
        return self.directory / f"{name}.crt"

    def client_key(self, name: str) -> Path:
        return self.directory / f"{name}.key"


def _write(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_bytes(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def _name(cn: str, orgs: tuple[str, ...] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    return x509.Name([*attrs, x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _cert(
    subject: x509.Name,
    public_key: ec.EllipticCurvePublicKey,
    issuer: x509.Name,
    issuer_key: ec.EllipticCurvePrivateKey,
    *,
    ca: bool = False,
    usages: list[x509.ObjectIdentifier] | None = None,
    sans: list[x509.GeneralName] | None = None,
) -> x509.Certificate:
    now = dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=5)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + _VALIDITY)
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


def ensure(directory: Path) -> Pki:
    """Create the PKI under ``directory`` unless it is already complete; return its paths."""
    pki = Pki(directory)
    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, 0o700)
    if pki.ca_cert.exists() and all(pki.client_cert(n).exists() for n in CLIENT_IDENTITIES) and pki.sa_pub.exists():
        return pki
    ca_key = _key()
    ca_name = _name("gpulab-ca")
    ca = _cert(ca_name, ca_key.public_key(), ca_name, ca_key, ca=True)
    _write(pki.ca_key, _key_bytes(ca_key))
    _write(pki.ca_cert, _pem(ca))

    serving_key = _key()
    sans: list[x509.GeneralName] = [
        x509.DNSName(n)
        for n in ("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
                  "kubernetes.default.svc.cluster.local")
    ]
    sans += [x509.IPAddress(ipaddress.ip_address(a)) for a in ("127.0.0.1", "::1", "10.96.0.1")]
    serving = _cert(_name("kube-apiserver"), serving_key.public_key(), ca_name, ca_key,
                    usages=[ExtendedKeyUsageOID.SERVER_AUTH], sans=sans)
    _write(pki.serving_key, _key_bytes(serving_key))
    _write(pki.serving_cert, _pem(serving))

    for name, (cn, orgs) in CLIENT_IDENTITIES.items():
        key = _key()
        cert = _cert(_name(cn, orgs), key.public_key(), ca_name, ca_key, usages=[ExtendedKeyUsageOID.CLIENT_AUTH])
        _write(pki.client_key(name), _key_bytes(key))
        _write(pki.client_cert(name), _pem(cert))

    sa_key = _key()
    _write(pki.sa_key, _key_bytes(sa_key))
    _write(pki.sa_pub, sa_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    return pki
