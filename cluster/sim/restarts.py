"""When a simulated container that ended starts again, and after how long: the kubelet's rules, as plain functions.

A container restarts under ``restartPolicy: Always``, and under ``OnFailure`` when it failed
(k8s.io/kubernetes v1.36 ``pkg/kubelet/kuberuntime``). The first restart is immediate; each later one waits out
a back-off that starts at 10 s and doubles up to 5 minutes (``initialCrashLoopBackOff``,
``MaxContainerBackOff``; no jitter), measured from when the container ended, and meanwhile the container waits
in ``CrashLoopBackOff`` with the kubelet's message. The pod agent applies these; nothing here touches the API.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

INITIAL_BACKOFF_SECONDS = 10
MAX_BACKOFF_SECONDS = 300


def will_restart(pod: Mapping[str, Any], exit_code: int) -> bool:
    policy = pod.get("spec", {}).get("restartPolicy", "Always")
    return bool(policy == "Always" or (policy == "OnFailure" and exit_code != 0))


def backoff_seconds(restart: int) -> int:
    """How long the ``restart``-th restart (1 for the first) waits after the container ended."""
    if restart <= 1:
        return 0
    return min(INITIAL_BACKOFF_SECONDS << (restart - 2), MAX_BACKOFF_SECONDS)


def go_duration(seconds: int) -> str:
    """Go's ``time.Duration.String`` for whole seconds: ``10s``, ``1m20s``, ``5m0s``."""
    minutes, rest = divmod(seconds, 60)
    return f"{minutes}m{rest}s" if minutes else f"{rest}s"


def pod_desc(pod: Mapping[str, Any]) -> str:
    """The kubelet's ``format.Pod``: ``name_namespace(uid)``."""
    meta = pod["metadata"]
    return f"{meta['name']}_{meta['namespace']}({meta['uid']})"


def crashloop_message(pod: Mapping[str, Any], container: str, seconds: int) -> str:
    return f"back-off {go_duration(seconds)} restarting failed container={container} pod={pod_desc(pod)}"


def backoff_event(pod: Mapping[str, Any], container: str) -> str:
    return f"Back-off restarting failed container {container} in pod {pod_desc(pod)}"


def terminated(exit_code: int, started: str, finished: str, container_id: str) -> dict[str, Any]:
    return {"exitCode": exit_code, "reason": "Completed" if exit_code == 0 else "Error", "startedAt": started,
            "finishedAt": finished, "containerID": container_id}
