"""Kubeconfigs whose user logs in indirectly: a token file, or an ``exec`` credential plugin
(client.authentication.k8s.io/v1), as managed clusters use. A missing, failing or confused plugin is one clear
message naming the kubeconfig field; the plugin's answer becomes the connection's token or client certificate.
Attaching a live cluster with a plugin is in tests/e2e/test_attach_backend_live.py."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from cluster import errors, pki
from cluster.kube import kubeconfig


def write_config(folder: Path, user: dict[str, Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    ca = pki.ensure(folder / "pki").ca_cert
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": "c",
           "clusters": [{"name": "k", "cluster": {"server": "https://203.0.113.10:6443", "certificate-authority": str(ca)}}],
           "users": [{"name": "u", "user": user}], "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}]}
    path = folder / "config"
    with path.open("w") as f:
        YAML(typ="safe").dump(doc, f)
    return path


def plugin(folder: Path, body: str) -> Path:
    """A credential plugin: a Python script whose ``body`` prints (or fails to print) an ExecCredential."""
    script = folder / "bin" / "get-token"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(f"#!{sys.executable}\nimport json, os, sys\n{body}\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def exec_user(command: str, **extra: Any) -> dict[str, Any]:
    return {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": command, "args": ["--cluster", "lab"],
                     "interactiveMode": "Never", **extra}}


TOKEN_PLUGIN = ("req = json.loads(os.environ['KUBERNETES_EXEC_INFO'])\n"
                "assert req['spec']['interactive'] is False and sys.argv[1:] == ['--cluster', 'lab']\n"
                "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1', 'kind': 'ExecCredential',\n"
                "                  'status': {'token': os.environ['LAB_TOKEN'] + req['spec'].get('cluster', {}).get('server', '')}}))")


def test_an_exec_plugin_token_becomes_the_bearer_token(tmp_path: Path) -> None:
    script = plugin(tmp_path, TOKEN_PLUGIN)
    path = write_config(tmp_path, exec_user(str(script), env=[{"name": "LAB_TOKEN", "value": "from-plugin"}]))
    assert kubeconfig.load(path).token == "from-plugin"
    # provideClusterInfo hands the plugin the cluster; a command with a path is relative to the kubeconfig.
    path = write_config(tmp_path, exec_user("./bin/get-token", provideClusterInfo=True,
                                            env=[{"name": "LAB_TOKEN", "value": "t@"}]))
    assert kubeconfig.load(path).token == "t@https://203.0.113.10:6443"


def test_an_exec_plugin_may_answer_with_a_client_certificate(tmp_path: Path) -> None:
    keys = pki.ensure(tmp_path / "client-pki")
    cert, key = keys.client_cert("admin").read_text(), keys.client_key("admin").read_text()
    script = plugin(tmp_path, "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1', "
                              f"'kind': 'ExecCredential', 'status': {{'clientCertificateData': {cert!r}, "
                              f"'clientKeyData': {key!r}}}}}))")
    conn = kubeconfig.load(write_config(tmp_path, exec_user(str(script))))
    assert conn.token is None and conn.cert_file and conn.key_file
    assert Path(conn.cert_file).read_text() == cert and Path(conn.key_file).stat().st_mode & 0o077 == 0


@pytest.mark.parametrize(("user", "body", "fragments"), [
    (exec_user("aws-iam-authenticator-not-installed", installHint="brew install aws-iam-authenticator"), None,
     ("users[u].user.exec.command", "'aws-iam-authenticator-not-installed' was not found on PATH",
      "brew install aws-iam-authenticator")),
    (exec_user("SCRIPT"), "sys.stderr.write('token expired, run login'); sys.exit(3)",
     ("exited with status 3", "token expired, run login")),
    (exec_user("SCRIPT"), "print('not json')", ("did not print an ExecCredential as JSON",)),
    (exec_user("SCRIPT"), "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1', "
                          "'kind': 'ExecCredential', 'status': {}}))", ("neither status.token",)),
    ({"exec": {"apiVersion": "client.authentication.k8s.io/v1alpha1", "command": "x"}}, None,
     ("exec.apiVersion", "v1alpha1")),
    ({"exec": {"apiVersion": "client.authentication.k8s.io/v1"}}, None, ("exec.command",)),
    ({"auth-provider": {"name": "gcp"}}, None, ("auth-provider", "exec credential plugins")),
    ({"tokenFile": "missing-token"}, None, ("users[u].user.tokenFile", "missing-token")),
])
def test_credential_problems_are_one_clear_message(tmp_path: Path, user: dict[str, Any], body: str | None,
                                                    fragments: tuple[str, ...]) -> None:
    if body is not None:
        user = json.loads(json.dumps(user).replace("SCRIPT", str(plugin(tmp_path, body))))
    with pytest.raises(errors.ConfigError) as info:
        kubeconfig.load(write_config(tmp_path, user))
    for fragment in fragments:
        assert fragment in str(info.value), str(info.value)


def test_a_token_file_is_read_relative_to_the_kubeconfig(tmp_path: Path) -> None:
    (tmp_path / "kube").mkdir()
    (tmp_path / "kube" / "token").write_text("file-token\n")
    assert kubeconfig.load(write_config(tmp_path / "kube", {"tokenFile": "token"})).token == "file-token"
