"""The dry-run places each field error of an apiserver answer on the line of the field it names."""

from __future__ import annotations

from typing import Any

import pytest

from cluster import errors
from cluster.kube import restmapper
from graders import dryrun

INTEGER = ('Pod "half" is invalid: [spec.containers[0].resources.limits[nvidia.com/gpu]: Invalid value: "500m": '
           'must be an integer, spec.containers[0].resources.requests[nvidia.com/gpu]: Invalid value: "500m": '
           "must be an integer]")

MANIFEST = """apiVersion: v1
kind: Pod
metadata:
  name: half
spec:
  containers:
  - name: cuda
    image: cuda
    resources:
      limits:
        nvidia.com/gpu: 0.5
"""


def test_split_field_errors_keeps_the_prefix_and_each_path() -> None:
    parts = dryrun.split_field_errors(INTEGER)
    assert [p for p, _ in parts] == [
        ("spec", "containers", 0, "resources", "limits", "nvidia.com/gpu"),
        ("spec", "containers", 0, "resources", "requests", "nvidia.com/gpu"),
    ]
    assert parts[0][1] == ('Pod "half" is invalid: spec.containers[0].resources.limits[nvidia.com/gpu]: '
                           'Invalid value: "500m": must be an integer')


@pytest.mark.parametrize(("text", "path"), [
    ('Deployment.apps "d" is invalid: spec.template.spec.containers[0].resources.requests: Invalid value: "1": '
     "must be equal to nvidia.com/gpu limit of 2", ("spec", "template", "spec", "containers", 0, "resources", "requests")),
    ('strict decoding error: unknown field "spec.containers[0].resoures"', ("spec", "containers", 0, "resoures")),
    ('pods "p" is forbidden: exceeded quota: q, requested: requests.nvidia.com/gpu=2, used: '
     "requests.nvidia.com/gpu=0, limited: requests.nvidia.com/gpu=1", ()),
    ('ResourceClaim.resource.k8s.io "c" is invalid: spec.devices.requests[0].exactly.deviceClassName: Required value',
     ("spec", "devices", "requests", 0, "exactly", "deviceClassName")),
])
def test_paths_from_other_answers(text: str, path: tuple[object, ...]) -> None:
    parts = dryrun.split_field_errors(text)
    assert parts[0][0] == path and parts[0][1].endswith(text.rpartition(": ")[2])


class Recorder:
    """Answers like an API server: discovery for core/v1, a 422 for the half-GPU pod. Records the calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []

    def get(self, path: str, **params: Any) -> dict[str, Any]:
        if path == "/api/v1":
            return {"resources": [{"name": "pods", "kind": "Pod", "namespaced": True},
                                  {"name": "pods/status", "kind": "Pod", "namespaced": True}]}
        raise errors.NotFound(404, "NotFound", "the server could not find the requested resource")

    def create(self, path: str, body: dict[str, Any], **params: Any) -> dict[str, Any]:
        self.calls.append(("POST", path, params))
        raise errors.ApiError(422, "Invalid", INTEGER)

    @property
    def mapper(self) -> restmapper.RESTMapper:  # as Client.mapper: the discovery answers above
        if not hasattr(self, "_mapper"):
            self._mapper = restmapper.live(self.get)
        return self._mapper


def test_refusal_becomes_findings_on_the_field_lines() -> None:
    client = Recorder()
    found = dryrun.dry_run_texts(client, {"pod.yaml": MANIFEST + "---\napiVersion: nvidia.com/v1\nkind: ClusterPolicy\n"
                                          "metadata: {name: cluster-policy}\n"}, namespace="lab")  # type: ignore[arg-type]
    assert client.calls == [("POST", "/api/v1/namespaces/lab/pods",
                             {"dryRun": "All", "fieldManager": dryrun.FIELD_MANAGER, "fieldValidation": "Strict"})]
    integer = [f for f in found if f.rule == "apiserver" and "must be an integer" in f.message]
    assert [f.line for f in integer] == [11, 11]  # requests were defaulted from the limits line
    assert integer[0].section == "gpu-fundamentals" and "time-slicing" in integer[0].hint
    unknown = [f for f in found if "does not serve kind `ClusterPolicy`" in f.message]
    assert len(unknown) == 1 and unknown[0].line == 13 and unknown[0].severity.value == "warning"
