"""Which lab is in progress on a cluster, so that starting it again resumes it instead of setting it up afresh.

After the idle culler (or *Stop My Server*, or ``gpulab down``) stops a learner's cluster, its etcd keeps the
learner's objects; the learner then runs the notebook's ``labs.start`` cell again, and setting the lab up again
would wipe that work. So ``Lab.setup`` records the lab it has set up in the cluster itself, in the ConfigMap
``kube-system/gpulab-lab-in-progress``, and a later start of the same lab finds the record and resumes.

The record lives and dies with the cluster's data: it is there after a stopped cluster is started again, and
gone once the cluster is purged or made anew (``gpulab down --purge``, a kind cluster deleted). A file in the
state dir would outlive both, and the system namespaces' UIDs cannot tell one cluster from the next: every
local cluster starts from the same etcd seed (``cluster.seed``).

A lab is in progress only while the record names it at the version that was set up. Setting another lab up
replaces the record (that setup may have changed this lab's scope); stopping any lab deletes it (``leave``
may too); a setup deletes it before changing anything, so a setup that fails half-way leaves no lab in
progress. A record that cannot be read (edited by hand, written by another gpulab) counts as none. The
runtime writes no record on an attached cluster (someone else's); this module changes nothing but the record.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from cluster import errors
from cluster.kube.client import Client
from labs.spec import LabSpec

log = logging.getLogger(__name__)

NAMESPACE = "kube-system"
NAME = "gpulab-lab-in-progress"
PATH = f"/api/v1/namespaces/{NAMESPACE}/configmaps/{NAME}"
FORMAT = "1"  # the record's own layout; a record of another layout counts as none


@dataclass(frozen=True)
class Record:
    """The lab set up last on a cluster and not stopped since."""

    lab: str
    version: int
    set_up_at: str


def read(client: Client) -> Record | None:
    """The cluster's record, or None when there is none or it cannot be read."""
    try:
        found = client.get(PATH)
    except errors.NotFound:
        return None
    record = _parse(found.get("data"))
    if record is None:
        log.info("%s/%s is not a record this gpulab wrote; no lab counts as in progress", NAMESPACE, NAME)
    return record


def _parse(data: Any) -> Record | None:
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return None
    lab, version, when = data.get("lab"), data.get("version"), data.get("setUpAt")
    if not isinstance(lab, str) or not lab or not isinstance(when, str) or not isinstance(version, str) \
            or not version.isdigit():
        return None
    return Record(lab, int(version), when)


def in_progress(client: Client, spec: LabSpec) -> bool:
    """Whether ``spec`` is the lab set up last on this cluster, at this version, and not stopped since."""
    record = read(client)
    return record is not None and record.lab == spec.id and record.version == spec.version


def mark(client: Client, spec: LabSpec) -> None:
    """Record ``spec`` as the lab in progress (its setup has just finished)."""
    client.apply(PATH, {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": {"app.kubernetes.io/managed-by": "gpulab"}},
        "data": {"format": FORMAT, "lab": spec.id, "version": str(spec.version),
                 "setUpAt": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")},
    })


def forget(client: Client) -> None:
    """No lab is in progress any more (a setup begins, or a lab was stopped)."""
    try:
        client.delete(PATH)
    except errors.NotFound:
        pass
