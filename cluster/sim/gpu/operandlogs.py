"""The failing operand containers' logs: each failed container instance gets its failure's lines once.

The GPU stack reconciles a node many times while one of its operands keeps failing; the failure's lines
(``faillogs``) belong in the log of the container instance that failed, once, as the program printed them once
before it exited. This remembers, per pod UID and container, which instance it wrote and for which failure, so a
later pass writes nothing, and a different failure of the same container (another fault) goes to a new instance.
It also gives the termination message the kubelet reports for that instance (``pod_agent.termination_message``).
It decides no container's state (that is ``operands``) and talks to no API server.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

from cluster.sim import pod_agent
from cluster.sim.gpu import operands, startlogs
from cluster.sim.kubelet import logstore

log = logging.getLogger("gpulab.gpu-stack")


class OperandLogs:
    def __init__(self, logs: logstore.LogStore | None) -> None:
        self.logs = logs  # None: no log store, nothing is written (on kind the store feeds the stand-in containers)
        # (pod uid, container) -> (instance, failure) last written
        self._written: dict[tuple[str, str], tuple[int, str]] = {}

    def changed(self, pod: Mapping[str, Any], st: operands.OperandState) -> bool:
        """Whether the pod's crash loop is another failure than the one its log holds (a new fault)."""
        before = self._written.get(_key(pod, st))
        return before is not None and before[1] != st.message

    def is_written(self, pod: Mapping[str, Any], st: operands.OperandState) -> bool:
        """Whether the instance now failing already holds ``st``'s lines."""
        key = _key(pod, st)
        return self._written.get(key) == (operands.restarts_of(pod, key[1]), st.message)

    def write(self, pod: Mapping[str, Any], st: operands.OperandState,
              lines: tuple[startlogs.Line, ...] | None = None) -> str:
        """Write the failure's lines (``lines``, else ``st.lines``) to the failing instance's log unless it holds
        them already; the termination message the kubelet reports for that instance."""
        if self.logs is None:
            return ""
        uid, container = _key(pod, st)
        meta = pod["metadata"]
        instance = operands.restarts_of(pod, container)
        ref = logstore.ContainerRef(meta["namespace"], meta["name"], uid, container, instance)
        spec: Mapping[str, Any] = next((c for c in pod["spec"].get("containers", []) + pod["spec"].get("initContainers", [])
                                        if c.get("name") == container), {})
        try:
            if self._written.get((uid, container)) != (instance, st.message):
                self._written[(uid, container)] = (instance, st.message)
                if not self.logs.read(ref):  # an instance nobody started: its program's first lines come first
                    for stream, text in startlogs.lines(pod, spec):
                        self.logs.write(ref, text, stream=stream)
                now = time.time_ns()
                for line in st.lines if lines is None else lines:
                    self.logs.write(ref, startlogs.render(line, now), stream=line.stream)
            return pod_agent.termination_message(spec, self.logs.read(ref))
        except (OSError, ValueError) as exc:
            log.warning("could not write the %s log of %s: %s", container, meta["name"], exc)
            return ""

    def forget(self, live_uids: Iterable[str]) -> None:
        """Drop what is remembered of pods that are gone."""
        keep = set(live_uids)
        for key in [k for k in self._written if k[0] not in keep]:
            del self._written[key]


def _key(pod: Mapping[str, Any], st: operands.OperandState) -> tuple[str, str]:
    return str(pod["metadata"]["uid"]), operands.failing_container(pod, st)
