"""Class mode on one host: a JupyterHub where every learner's server runs the learner's own lab cluster.

``layout`` (the class folder and its settings), ``accounts`` (system accounts, private homes), ``hubconfig``
(the ``jupyterhub_config.py`` the hub runs with), ``singleuser`` (the learner's server, which stops the lab
cluster when it stops, and by default starts it at login), ``ondemand`` (the lab cluster starts when first
needed), ``loop`` (the instructor's nbgrader steps as the instructor's account), ``formgrade`` (what makes
formgrader's Release and Autograde buttons do what ``loop`` does), ``report`` (per-learner scores and quiz
statistics across the class), ``reportservice`` (that report as a hub page for the instructor), ``solutions``
(the lab solutions withheld from learners, and the refusal of ``solve``) and ``similarity`` (submissions alike,
flagged for the instructor).
Every module but ``ondemand``, ``formgrade``, ``report``, ``solutions`` and ``similarity`` expects root: it creates
accounts and runs commands as them (``solutions.withhold`` alone needs root).
"""

__all__ = ["accounts", "formgrade", "hubconfig", "layout", "loop", "ondemand", "report", "reportservice", "similarity",
           "singleuser", "solutions"]
