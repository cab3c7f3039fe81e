"""A prediction counts as made before the reveal only by the API server's times (``labs.predict``), on the real
control plane: a prediction written into predictions.yaml by hand with a back-dated time does not count; one
recorded with ``lab.predict`` is stamped in the lab's namespace, dated by the server (a creation time sent by the
client is not kept), cannot be edited afterwards, and counts once the reveal follows it.
"""

from __future__ import annotations

import shutil
from datetime import datetime, timezone
from pathlib import Path

import pytest

import labs
from cluster import errors
from cluster.testing import LocalCluster, wait_for
from labs import predict

pytestmark = pytest.mark.e2e

LAB = "03b-topology-manager"
KEY, CHECK, NS = "wide-phase", "predicted-wide", "lab-03b"


def _verdict(lab: labs.Lab) -> tuple[bool, str]:
    found = next(c for c in lab.check(wait=0).checks if c.id == CHECK)
    return found.passed, found.message


def _reveal(lab: labs.Lab, local_cluster: LocalCluster) -> None:
    shutil.copy(lab.spec.directory / "solution" / "wide.yaml", lab.workdir / "wide.yaml")
    lab.apply("wide.yaml")
    with local_cluster.client() as client:
        wait_for(lambda: client.get(f"/api/v1/namespaces/{NS}/pods/wide"), timeout=30)


def test_only_the_api_servers_times_show_a_prediction_came_first(local_cluster: LocalCluster, tmp_path: Path) -> None:
    lab = labs.start(LAB, workdir=tmp_path / "work", kubeconfig=local_cluster.kubeconfig, fresh=True)
    stamp_path = f"/api/v1/namespaces/{NS}/configmaps/{predict.stamp_name(KEY)}"
    try:
        _reveal(lab, local_cluster)
        back_dated = datetime(2020, 1, 1, tzinfo=timezone.utc)  # written after seeing the answer
        predict.record(lab.workdir, KEY, "Failed", when=back_dated)
        passed, message = _verdict(lab)
        assert not passed and "is not recorded in the cluster" in message, message
        with pytest.raises(predict.PredictionError, match="too late"):
            lab.predict(KEY, "Failed")

        lab.reset()
        made = lab.predict(KEY, "Failed")
        with local_cluster.client() as client:
            stamp = client.get(stamp_path)
            assert stamp["immutable"] is True and stamp["data"] == {"value": '"Failed"'}
            assert predict.parse_time(stamp["metadata"]["creationTimestamp"]) == made.at
            with pytest.raises(errors.CourseError):  # the API server refuses to change an immutable ConfigMap
                client.patch(stamp_path, {"data": {"value": '"Running"'}})
            forged = predict.stamp_object(NS, "forged", 1)
            forged["metadata"]["creationTimestamp"] = "2020-01-01T00:00:00Z"
            kept = client.create(f"/api/v1/namespaces/{NS}/configmaps", forged)
            dated = predict.parse_time(kept["metadata"]["creationTimestamp"])
            assert dated is not None and dated >= made.at  # the server's time, not the one sent
        _reveal(lab, local_cluster)
        passed, message = _verdict(lab)
        assert passed, message
    finally:
        lab.stop()
