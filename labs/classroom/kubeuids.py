"""One uid per learner for a class on Kubernetes, and how the instructor's collect tells a learner's files by it.

On one host every learner is a system account, and nbgrader's exchange relies on the file system to keep them
apart: a submission folder belongs to the account that made it (``formgrade.CheckedCollect`` takes it only from
the learner whose name it bears). A Kubernetes class has no accounts: each learner's server is a pod, and the pod
runs as whatever uid KubeSpawner gives it. With one uid for everyone (the chart's ``singleuser.uid``) every learner
could read, change or remove every other learner's submission on the shared exchange volume, and no collect could
tell whose a folder is.

So course/class/z2jh-values.yaml gives each learner's pod a uid of its own (``hub.extraConfig``, a callable
``KubeSpawner.uid``, and the same number as its group and fsGroup): ``learner_uid(name)``, a number in
``LEARNER_UIDS`` taken from a hash of the hub's user name. It needs no state shared between the hub and the
grader: collect, run by the instructor, computes the same number from the name a folder claims and takes the
folder only if the folder and everything in it are owned by that uid. Two names whose numbers meet would share a
uid; the hub refuses to start the second one's server (for a class of 300, about one chance in 50,000), and says to
rename one of them. Instructors (the hub group ``instructors``) and the grader pod keep ``INSTRUCTOR_UID``, the
image's own account, which owns the exchange.

The values file holds its own copy of ``learner_uid`` (the chart's hub has no gpulab in it);
tests/unit/test_class_learner_uids.py runs that copy and checks that it gives the same numbers as this one."""

from __future__ import annotations

import hashlib

INSTRUCTOR_UID = 1000  # the images' own account (course/class/install.sh NB_UID): the exchange's owner
INSTRUCTORS_GROUP = "instructors"
# Above every range a distribution gives its users and subordinate ids (Debian: 1000-59999 and 100000 + 65536 per
# user in /etc/subuid), below 2^31, the largest runAsUser Kubernetes accepts.
LEARNER_UIDS = (1 << 24, 1 << 31)


def learner_uid(name: str) -> int:
    """The uid of the learner called ``name`` on the hub: the same on every hub, for every run."""
    low, high = LEARNER_UIDS
    digest = hashlib.sha256(name.encode("utf-8")).digest()
    return low + int.from_bytes(digest[:8], "big") % (high - low)
