"""The class report as a page of the hub, for the instructor: a JupyterHub service at ``/services/class-report/``.

``gpulab class up`` runs it as a managed hub service (``hubconfig``), so it runs as root like the hub: the report
reads every learner's answer store with that learner's own rights (``report.copy_stores``), which the
instructor's account does not have. It lets in only those the hub's OAuth gives ``access:services`` on it: the
hub's admins (the instructor), never a learner. Each request builds the report afresh (``gpulab class report``
prints the same text).
"""

from __future__ import annotations

import html
import os
import secrets
from collections.abc import Callable
from urllib.parse import urlparse

NAME = "class-report"


def serve(render: Callable[[], str]) -> None:
    """Serve ``render()``'s text behind the hub's OAuth until the hub stops this service."""
    from jupyterhub.services.auth import HubOAuthCallbackHandler, HubOAuthenticated
    from jupyterhub.utils import url_path_join
    from tornado import ioloop, web

    class ReportPage(HubOAuthenticated, web.RequestHandler):  # type: ignore[misc]  # untyped libraries
        @web.authenticated
        def get(self) -> None:
            try:
                text, status = render(), 200
            except Exception as exc:  # noqa: BLE001  (the page says why, as the command would)
                text, status = f"The class report could not be built: {exc}", 500
            self.set_status(status)
            self.set_header("Content-Type", "text/html; charset=utf-8")
            self.write("<!doctype html><html><head><title>Class report</title></head><body><h1>Class report</h1>"
                       f"<pre id='class-report'>{html.escape(text)}</pre></body></html>")

    prefix = os.environ["JUPYTERHUB_SERVICE_PREFIX"]
    app = web.Application([(prefix, ReportPage), (url_path_join(prefix, "oauth_callback"), HubOAuthCallbackHandler)],
                          cookie_secret=secrets.token_bytes(32))
    url = urlparse(os.environ["JUPYTERHUB_SERVICE_URL"])
    app.listen(url.port or 80, url.hostname or "127.0.0.1")
    ioloop.IOLoop.current().start()
