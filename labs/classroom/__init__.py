"""Class mode on one host: a JupyterHub where every learner's server runs the learner's own lab cluster.

``layout`` (the class folder and its settings), ``accounts`` (system accounts, private homes), ``hubconfig``
(the ``jupyterhub_config.py`` the hub runs with), ``singleuser`` (the learner's server, which stops the lab
cluster when it stops), ``ondemand`` (the lab cluster starts on first use), ``loop`` (the instructor's nbgrader
steps as the instructor's account) and ``report`` (per-learner scores and quiz statistics across the class).
Every module but ``ondemand`` and ``report`` expects root: it creates accounts and runs commands as them.
"""

__all__ = ["accounts", "hubconfig", "layout", "loop", "ondemand", "report", "singleuser"]
