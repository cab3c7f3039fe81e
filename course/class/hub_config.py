"""JupyterHub's configuration in the class's hub image (course/class/Containerfile, target ``hub``), for a hub that
runs as a pod of its own: KubeSpawner starts one pod per learner from the learner image, and configurable-http-proxy
runs beside the hub in the same pod.

What shapes the learner's pod is not written here: it comes from a JSON file of traitlets settings
(``$GPULAB_HUB_SPAWNER_CONFIG``, default /etc/gpulab-hub/spawner.json) that the deployment mounts, rendered from
course/class/z2jh-values.yaml the way the Zero to JupyterHub chart's own hub config renders its values (the kind
tier renders it with tests/z2jh_chart.py). With the chart itself, the chart's hub image and config take this
file's place; the values file is the same.

The values' ``hub.extraConfig`` snippets come in the same file and run last, as the chart runs them.

An admin token for the hub's REST API (``$GPULAB_HUB_ADMIN_TOKEN``, from a Secret) is given to a service named
``class-admin``; without it no such service exists.
"""

import json
import os

c = get_config()  # noqa: F821 (provided by JupyterHub)

STATE = "/srv/jupyterhub"

c.JupyterHub.spawner_class = "kubespawner.KubeSpawner"
# Learners are created and started through the REST API (or an authenticator the instructor adds); the hub's own
# login page accepts no one.
c.JupyterHub.authenticator_class = "null"
c.JupyterHub.db_url = f"sqlite:///{STATE}/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = f"{STATE}/jupyterhub_cookie_secret"
c.ConfigurableHTTPProxy.pid_file = f"{STATE}/jupyterhub-proxy.pid"
# The hub's API listens on the pod's address, so that learners' servers reach it through the Service `hub`; the
# proxy's public side too (the Service `proxy-public`); the proxy's own API stays on the pod's loopback.
c.JupyterHub.hub_bind_url = "http://:8081"
c.JupyterHub.hub_connect_url = os.environ.get("GPULAB_HUB_CONNECT_URL", "http://hub:8081")
c.JupyterHub.bind_url = "http://:8000"
c.ConfigurableHTTPProxy.command = ["configurable-http-proxy"]
# A learner's server comes up in seconds, but its image may still be pulled on a node seeing it the first time.
c.KubeSpawner.start_timeout = 600
c.KubeSpawner.http_timeout = 120

_spawner = os.environ.get("GPULAB_HUB_SPAWNER_CONFIG", "/etc/gpulab-hub/spawner.json")
_extra_config: dict = {}
if os.path.exists(_spawner):
    with open(_spawner, encoding="utf-8") as _fh:
        _rendered = json.load(_fh)
    _extra_config = _rendered.pop("_extra_config", {})
    for _section, _settings in _rendered.pop("_services", {}).items():
        c.JupyterHub.services = [*c.JupyterHub.get("services", []), _settings]
    c.JupyterHub.load_roles = [*c.JupyterHub.get("load_roles", []), *_rendered.pop("_roles", [])]
    for _section, _settings in _rendered.items():
        c[_section].update(_settings)

_token = os.environ.get("GPULAB_HUB_ADMIN_TOKEN")
if _token:
    c.JupyterHub.services = [*c.JupyterHub.get("services", []), {"name": "class-admin", "api_token": _token}]
    c.JupyterHub.load_roles = [*c.JupyterHub.get("load_roles", []), {
        "name": "class-admin", "services": ["class-admin"],
        "scopes": ["admin:users", "admin:servers", "access:servers", "list:users", "read:users"]}]

# The values' hub.extraConfig snippets, last and in key order, as the chart's hub config runs them (the learners'
# own uids among them: course/class/z2jh-values.yaml, "gpulab-learner-uids").
for _key, _code in sorted(_extra_config.items()):
    print(f"Loading extra config: {_key}")
    exec(compile(_code, f"hub.extraConfig.{_key}", "exec"))
