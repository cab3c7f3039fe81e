"""Read and write kubeconfig files; turn one context into connection settings for our client."""

from __future__ import annotations

import base64
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from cluster import errors, safefs, settings, strict
from cluster.kube import credentials


@dataclass(frozen=True)
class Connection:
    """Everything needed to reach one API server as one identity."""

    server: str
    ca_file: str | None
    cert_file: str | None = None
    key_file: str | None = None
    token: str | None = None
    namespace: str = "default"
    insecure: bool = False


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def write(
    path: Path,
    *,
    server: str,
    ca_file: Path,
    user: str,
    cert_file: Path | None = None,
    key_file: Path | None = None,
    token: str | None = None,
    cluster_name: str = "gpulab",
    namespace: str | None = None,
) -> Path:
    """Write a self-contained kubeconfig (certificates embedded) readable only by the owner."""
    user_entry: dict[str, Any] = {}
    if cert_file and key_file:
        user_entry = {"client-certificate-data": _b64(cert_file), "client-key-data": _b64(key_file)}
    if token:
        user_entry = {"token": token}
    context: dict[str, Any] = {"cluster": cluster_name, "user": user}
    if namespace:
        context["namespace"] = namespace
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster_name, "cluster": {"server": server, "certificate-authority-data": _b64(ca_file)}}],
        "users": [{"name": user, "user": user_entry}],
        "contexts": [{"name": f"{user}@{cluster_name}", "context": context}],
        "current-context": f"{user}@{cluster_name}",
        "preferences": {},
    }
    yaml = YAML(typ="safe")
    yaml.default_flow_style = False
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        yaml.dump(doc, f)
    os.replace(tmp, path)
    return path


CERTS_DIR = "certs"
_FALLBACK_CERTS_DIR = ".certs"


def certs_dir(source: Path | str) -> Path:
    """The private folder (0700, ours, not a link: ``safefs.private_dir``) where embedded credentials of the
    kubeconfig ``source`` are written as files for TLS: ``certs/`` in the gpulab state folder that holds the
    kubeconfig (so ``down --purge`` removes them with it), else ``.certs/`` in the state root."""

    path = Path(source).absolute()
    for parent in list(path.parents)[:3]:  # <state>/admin.kubeconfig, <state>/kubeconfigs/x, <state>/tenants/x
        if safefs.is_marked(parent):
            return safefs.private_dir(parent / CERTS_DIR)
    return safefs.private_dir(settings.state_root() / _FALLBACK_CERTS_DIR)


def _materialise(data_b64: Any, suffix: str, source: Path | str, where: str) -> str:
    """Write embedded PEM data to a private file (content-addressed, so repeated loads reuse it)."""
    try:
        raw = base64.b64decode("".join(str(data_b64).split()), validate=True)
    except ValueError as exc:  # binascii.Error is a ValueError
        raise errors.ConfigError(str(source), [f"{where}: not valid base64 ({exc})"]) from exc
    path = certs_dir(source) / (hashlib.sha256(raw).hexdigest()[:24] + suffix)
    try:
        current = path.read_bytes() if not path.is_symlink() else None
    except OSError:
        current = None
    if current != raw:
        safefs.write_private(path, raw)
    return str(path)


def _pem_b64(pem: str) -> str:
    return base64.b64encode(pem.encode()).decode()


def _local(value: Any, source: Path | str) -> str | None:
    """A file a kubeconfig names, relative paths resolved against the kubeconfig's own folder (as kubectl does)."""
    return str(credentials.resolve(str(value), Path(source))) if value else None


def _named(items: Any, name: str, kind: str, source: Path | str) -> dict[str, Any]:
    for item in items or []:
        if isinstance(item, dict) and item.get("name") == name:
            value = item.get(kind)
            return value if isinstance(value, dict) else {}
    raise errors.ConfigError(str(source), [f"{kind}s: no {kind} named {name!r}"])


def load(path: Path | str, context: str | None = None) -> Connection:
    """Read one context of a kubeconfig into a ``Connection``."""
    try:
        doc = strict.read_yaml(Path(path).read_text())
    except OSError as exc:
        raise errors.ClusterError(f"cannot read kubeconfig {path}: {exc}", hint="gpulab up") from exc
    except Exception as exc:  # ruamel raises many types for malformed YAML
        raise errors.ConfigError(str(path), [f"not valid YAML: {exc}"]) from exc
    if not isinstance(doc, dict):
        raise errors.ConfigError(str(path), ["a kubeconfig must be a mapping"])
    ctx_name = context or doc.get("current-context")
    if not ctx_name:
        raise errors.ConfigError(str(path), ["current-context: not set and no --context given"])
    ctx = _named(doc.get("contexts"), ctx_name, "context", path)
    cl = _named(doc.get("clusters"), str(ctx.get("cluster")), "cluster", path)
    user = _named(doc.get("users"), str(ctx.get("user")), "user", path)
    cl_where, user_where = f"clusters[{ctx.get('cluster')}].cluster", f"users[{ctx.get('user')}].user"
    if not isinstance(cl.get("server"), str) or not cl["server"].startswith(("https://", "http://")):
        raise errors.ConfigError(str(path), [f"{cl_where}.server: missing or not an http(s) URL "
                                             f"({cl.get('server')!r})"])
    ca = _local(cl.get("certificate-authority"), path)
    if cl.get("certificate-authority-data"):
        ca = _materialise(cl["certificate-authority-data"], ".ca.pem", path, f"{cl_where}.certificate-authority-data")
    cert = _local(user.get("client-certificate"), path)
    key = _local(user.get("client-key"), path)
    if user.get("client-certificate-data"):
        cert = _materialise(user["client-certificate-data"], ".crt.pem", path, f"{user_where}.client-certificate-data")
    if user.get("client-key-data"):
        key = _materialise(user["client-key-data"], ".key.pem", path, f"{user_where}.client-key-data")
    token = user.get("token")
    if not token and user.get("tokenFile"):
        token = credentials.token_file(user["tokenFile"], Path(path), user_where)
    if user.get("auth-provider"):
        raise errors.ConfigError(str(path), [f"{user_where}.auth-provider: auth providers were removed from "
                                             "Kubernetes clients (1.26); gpulab speaks exec credential plugins"],
                                 hint="regenerate the kubeconfig with your cloud's exec plugin (for example "
                                 "gke-gcloud-auth-plugin or kubelogin), or use a token-based kubeconfig")
    if user.get("exec") is not None and not token and not cert:
        issued = credentials.run_plugin(user["exec"], Path(path), user_where, cl)
        token = issued.token
        if issued.cert_pem and issued.key_pem:
            cert = _materialise(_pem_b64(issued.cert_pem), ".crt.pem", path, f"{user_where}.exec")
            key = _materialise(_pem_b64(issued.key_pem), ".key.pem", path, f"{user_where}.exec")
    return Connection(
        server=cl["server"],
        ca_file=ca,
        cert_file=cert,
        key_file=key,
        token=token,
        namespace=str(ctx.get("namespace") or "default"),
        insecure=bool(cl.get("insecure-skip-tls-verify", False)),
    )
