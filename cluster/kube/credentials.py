"""Credentials a kubeconfig names indirectly: a token file, or an ``exec`` credential plugin.

Managed clusters log users in through a plugin (EKS ``aws eks get-token``, GKE ``gke-gcloud-auth-plugin``, AKS
``kubelogin``): the kubeconfig's user has an ``exec`` section, the client runs the command and reads an
``ExecCredential`` from its standard output. This follows client-go's contract
(kubernetes.io/docs/reference/access-authn-authz/authentication/#client-go-credential-plugins and
k8s.io/client-go/plugin/pkg/client/auth/exec/exec.go): ``apiVersion`` ``client.authentication.k8s.io/v1`` (or
``v1beta1``), the command resolved against the kubeconfig's folder when it names a path, ``env`` added to ours,
``KUBERNETES_EXEC_INFO`` holding the request (with the cluster when ``provideClusterInfo``), never interactive,
and ``status.token`` or ``status.clientCertificateData``/``clientKeyData`` in the answer. The plugin runs once
per load: a token that expires while one long-lived client holds it is not refreshed. Every failure is one
``ConfigError`` that names the kubeconfig field, what went wrong and (from ``installHint``) how to fix it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cluster import errors

API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
TIMEOUT = 60.0


@dataclass(frozen=True)
class Issued:
    """What a plugin handed out: a bearer token, or a client certificate and key (PEM text)."""

    token: str | None = None
    cert_pem: str | None = None
    key_pem: str | None = None


def token_file(value: Any, source: Path, where: str) -> str:
    """The token in ``tokenFile`` (relative paths resolved against the kubeconfig's folder)."""
    path = resolve(str(value), source)
    try:
        token = path.read_text().strip()
    except OSError as exc:
        raise errors.ConfigError(str(source), [f"{where}.tokenFile: cannot read {path}: {exc.strerror or exc}"]) from exc
    if not token:
        raise errors.ConfigError(str(source), [f"{where}.tokenFile: {path} is empty"])
    return token


def resolve(value: str, source: Path) -> Path:
    path = Path(value).expanduser()
    return path if path.is_absolute() else Path(source).resolve().parent / path


def run_plugin(spec: Any, source: Path, where: str, cluster: Mapping[str, Any]) -> Issued:
    """Run the ``exec`` plugin of a kubeconfig user and read its ``ExecCredential``."""
    where = f"{where}.exec"
    if not isinstance(spec, dict):
        raise errors.ConfigError(str(source), [f"{where}: must be a mapping with apiVersion and command"])
    api_version = spec.get("apiVersion")
    if api_version not in API_VERSIONS:
        raise errors.ConfigError(str(source), [f"{where}.apiVersion: {api_version!r} is not supported "
                                               f"(gpulab speaks {' and '.join(API_VERSIONS)})"])
    argv = _argv(spec, source, where)
    request: dict[str, Any] = {"apiVersion": api_version, "kind": "ExecCredential", "spec": {"interactive": False}}
    if spec.get("provideClusterInfo"):
        request["spec"]["cluster"] = {k: v for k, v in (("server", cluster.get("server")),
                                                        ("certificate-authority-data",
                                                         cluster.get("certificate-authority-data")),
                                                        ("config", spec.get("config"))) if v is not None}
    env = dict(os.environ, KUBERNETES_EXEC_INFO=json.dumps(request))
    for item in spec.get("env") or []:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise errors.ConfigError(str(source), [f"{where}.env: each entry needs a name and a value"])
        env[item["name"]] = str(item.get("value", ""))
    try:
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        raise errors.ConfigError(str(source), [f"{where}: {argv[0]} did not answer within {TIMEOUT:.0f} s "
                                               "(gpulab never runs it interactively)"]) from exc
    except OSError as exc:
        raise _missing(spec, source, where, argv[0], exc) from exc
    if done.returncode != 0:
        said = (done.stderr.strip() or done.stdout.strip())[-400:]
        raise errors.ConfigError(str(source), [f"{where}: {argv[0]} exited with status {done.returncode}"
                                               + (f": {said}" if said else "")],
                                 hint=f"run it yourself to see why: {' '.join(argv)}")
    return _answer(done.stdout, api_version, source, where, argv[0])


def _argv(spec: Mapping[str, Any], source: Path, where: str) -> list[str]:
    command = spec.get("command")
    args = spec.get("args") or []
    if not isinstance(command, str) or not command:
        raise errors.ConfigError(str(source), [f"{where}.command: the plugin's command is missing"])
    if not isinstance(args, list) or not all(isinstance(a, (str, int, float)) for a in args):
        raise errors.ConfigError(str(source), [f"{where}.args: must be a list of strings"])
    # client-go: a command naming a path is relative to the kubeconfig's folder; a bare name is looked up on PATH.
    found = str(resolve(command, source)) if os.sep in command else shutil.which(command)
    if found is None:
        raise _missing(spec, source, where, command, None)
    return [found, *(str(a) for a in args)]


def _missing(spec: Mapping[str, Any], source: Path, where: str, command: str, exc: OSError | None) -> errors.ConfigError:
    why = f"cannot be run ({exc.strerror})" if exc is not None and exc.strerror else "was not found on PATH"
    hint = str(spec.get("installHint") or "").strip() or (
        f"install {command} (the credential plugin this kubeconfig logs in with) and put it on PATH, or attach "
        "with a token-based kubeconfig")
    return errors.ConfigError(str(source), [f"{where}.command: {command!r} {why}; it is the credential plugin "
                                            "this kubeconfig logs in with"], hint=hint)


def _answer(stdout: str, api_version: str, source: Path, where: str, command: str) -> Issued:
    try:
        cred = json.loads(stdout)
    except ValueError as exc:
        raise errors.ConfigError(str(source), [f"{where}: {command} did not print an ExecCredential as JSON "
                                               f"({exc})"]) from exc
    if not isinstance(cred, dict) or cred.get("kind") != "ExecCredential" or cred.get("apiVersion") != api_version:
        raise errors.ConfigError(str(source), [f"{where}: {command} printed no ExecCredential of {api_version}"])
    status = cred.get("status")
    status = status if isinstance(status, dict) else {}
    token, cert, key = status.get("token"), status.get("clientCertificateData"), status.get("clientKeyData")
    if isinstance(token, str) and token:
        return Issued(token=token)
    if isinstance(cert, str) and isinstance(key, str) and cert and key:
        return Issued(cert_pem=cert, key_pem=key)
    raise errors.ConfigError(str(source), [f"{where}: {command}'s ExecCredential holds neither status.token nor "
                                           "status.clientCertificateData and clientKeyData"])
