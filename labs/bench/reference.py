"""kind's start-up figures, for comparison only: published elsewhere, never measured here.

kind's own documentation publishes no start-up time or memory figure (its "Resource Requirements" page says
there is no single recommended figure and asks users to measure their own scenario). The only figures we
found are the wall-clock times a user reported in kind's issue tracker, with a maintainer's caveat about what
kind counts as "done"; they are quoted with that context. Sources were read through the project's search
tool; update this list only from a source you can cite.
"""

from __future__ import annotations

from labs.bench.figures import Reference

_ISSUE = "https://github.com/kubernetes-sigs/kind/issues/2893"
_CAVEAT = ("user-reported, single-node `kind create cluster`, Ubuntu 22.04; kind counts a cluster done when "
           "the API server is healthy, not when all nodes are Ready (maintainer's comment in the same issue); "
           "needs Docker and a node image")

KIND: tuple[Reference, ...] = (
    Reference("kind v0.14.0: `kind create cluster` wall clock", 17.1, "s", _ISSUE, _CAVEAT),
    Reference("kind v0.12.0: `kind create cluster` wall clock", 12.5, "s", _ISSUE, _CAVEAT),
    Reference("kind: published memory / start-up target", None, "",
              "https://kind.sigs.k8s.io/docs/user/resource-requirements/",
              "none published: kind's docs say there is no single recommended figure"),
)
