"""The ``jupyterhub_config.py`` of a one-host class, written by ``gpulab class init``.

What it sets, and why:

- the hub and its proxy (configurable-http-proxy, from npm) listen on 127.0.0.1 only (the proxy on ``port``,
  the hub on ``port + 1``, the proxy's API on ``port + 2``, the class report on ``port + 3``); put a TLS
  reverse proxy
  in front to open the class to a network;
- PAM logins (JupyterHub's default authenticator) for the members of the class's two groups, the instructor an
  admin; the hub runs as root, so it can check passwords and start each server as its own account;
- ``LocalProcessSpawner`` starts ``gpulab class singleuser`` as the account: the Jupyter server, which stops the
  learner's lab cluster when it stops; the lab cluster itself starts on first use (``GPULAB_CLUSTER_ON_DEMAND``)
  from the class's copy of the binaries (the default, ``cluster_start`` "first-use"); with ``cluster_start``
  "login" ``singleuser`` starts it beside the server (``GPULAB_CLUSTER_AT_LOGIN``), so that it is up by the
  time the learner starts a lab;
- ``jupyterhub-idle-culler`` runs as a hub service and stops servers idle longer than the class's ``cull_after``;
- the class report is a hub service too (``/services/class-report/``, port ``port + 3``), open to the hub's
  admins only (``reportservice``).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from cluster import errors
from labs.classroom import layout, runtime

NBGRADER_CONFIG = '''"""nbgrader settings for every server of the class (written by gpulab class init)."""
c = get_config()  # noqa: F821
c.CourseDirectory.course_id = {course_id!r}
c.Exchange.root = {exchange!r}
# Renders feedback under the class runtime's interpreter too (labs/classroom/feedback.py says why).
c.GenerateFeedback.exporter_class = "labs.classroom.feedback.FeedbackExporter"
# Formgrader's buttons do what `gpulab class release/grade` do, and collect and submit check who a submission
# belongs to (labs/classroom/formgrade.py says why): the settings every grading config of the course loads.
from labs.classroom import nbsafe
nbsafe.configure(c)
'''

_TEMPLATE = '''"""JupyterHub for the gpulab class in {root} (written by `gpulab class init`; see labs/classroom/hubconfig.py)."""
import json

c = get_config()  # noqa: F821
settings = json.load(open({settings!r}, encoding="utf-8"))

c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = settings["port"]
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = settings["port"] + 1
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{{settings['port'] + 2}}"
c.JupyterHub.db_url = "sqlite:///" + {hub_state!r} + "/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = {hub_state!r} + "/jupyterhub_cookie_secret"
c.JupyterHub.pid_file = {hub_state!r} + "/jupyterhub.pid"
c.ConfigurableHTTPProxy.command = [{proxy!r}]
c.ConfigurableHTTPProxy.pid_file = {hub_state!r} + "/proxy.pid"
c.ConfigurableHTTPProxy.debug = False

c.JupyterHub.authenticator_class = "pam"
c.PAMAuthenticator.allowed_groups = {{{learners_group!r}, {instructors_group!r}}}
c.Authenticator.admin_users = {{settings["instructor"]}}
c.PAMAuthenticator.open_sessions = False

c.JupyterHub.spawner_class = "localprocess"
c.Spawner.cmd = [{gpulab!r}, "class", "singleuser"]
c.Spawner.default_url = "/lab"
c.Spawner.notebook_dir = "~"
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 60
c.Spawner.environment = {{
    "PATH": {bindir!r} + ":/usr/local/bin:/usr/bin:/bin",
    "GPULAB_CACHE_DIR": {cache!r},
    "GPULAB_CLUSTER_ON_DEMAND": "1",
    "GPULAB_CLUSTER_AT_LOGIN": "1" if settings.get("cluster_start", {default_start!r}) == "login" else "0",
    "JUPYTER_CONFIG_PATH": {jupyter_config!r},
    "JUPYTER_PATH": {jupyter_path!r},
}}
# SIGINT first: the server stops its kernels, then the lab cluster (a few seconds), before SIGTERM would come.
c.LocalProcessSpawner.interrupt_timeout = 60
c.LocalProcessSpawner.term_timeout = 10

c.JupyterHub.services = [{{
    "name": "idle-culler",
    "command": [{python!r}, "-m", "jupyterhub_idle_culler", f"--timeout={{settings['cull_after']}}",
                f"--cull-every={{settings['cull_every']}}"],
}}, {{
    # The class report for the instructor (labs/classroom/reportservice.py); runs as root, like the hub.
    "name": "class-report",
    "url": f"http://127.0.0.1:{{settings['port'] + 3}}",
    "command": [{hub_gpulab!r}, "class", "report-service", "--dir", {root!r}],
    "environment": {{"PATH": {hub_bindir!r} + ":/usr/local/bin:/usr/bin:/bin"}},
    "oauth_no_confirm": True,
    "display": True,
}}]
c.JupyterHub.load_roles = [{{
    "name": "idle-culler",
    "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"],
    "services": ["idle-culler"],
}}]
'''


def proxy_command() -> Path:
    """configurable-http-proxy: installed beside the venv by ``make proxy`` (npm), else on PATH."""
    local = Path(sys.prefix) / "node_modules" / ".bin" / "configurable-http-proxy"
    if local.exists():
        return local
    found = shutil.which("configurable-http-proxy")
    if found:
        return Path(found)
    raise errors.CourseError("configurable-http-proxy (npm) is not installed",
                             hint="make proxy (runs npm install --prefix .venv configurable-http-proxy)")


def render(cd: layout.ClassDir, bindir: Path) -> str:
    jupyter_path, project_config = runtime.jupyter_paths()
    return _TEMPLATE.format(
        root=str(cd.root), settings=str(cd.settings_file), hub_state=str(cd.hub_state), proxy=str(proxy_command()),
        learners_group=layout.LEARNERS_GROUP, instructors_group=layout.INSTRUCTORS_GROUP,
        gpulab=str(bindir / "gpulab"), bindir=str(bindir), cache=str(cd.cache), jupyter_config=f"{cd.jupyter_config}:{project_config}",
        jupyter_path=jupyter_path, default_start=layout.DEFAULT_CLUSTER_START,
        python=sys.executable, hub_gpulab=str(Path(sys.executable).parent / "gpulab"),
        hub_bindir=str(Path(sys.executable).parent))


def nbgrader_config(cd: layout.ClassDir, course_id: str) -> str:
    return NBGRADER_CONFIG.format(course_id=course_id, exchange=str(cd.exchange))
