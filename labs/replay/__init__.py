"""Replay grading: the grader's own cluster redoes what the learner did, and the checks read that cluster.

A learner's evidence bundle says what the learner's cluster showed; anyone can write such a file, so its
``cluster`` section is only the learner's claim (shown beside the result, never scored). What grading trusts is
what it can redo: the learner's manifests and the bundle's ``actions`` (node labels, ClusterPolicy fields, GPU
faults, the operator). A pipeline of stages, each its own module and tested on its own:

1. ``record`` (at submit, on the learner's cluster): the actions a bundle carries;
2. ``planner`` (no cluster): the files and actions validated against what the lab allows (``allowed``), budgeted,
   and put in the order of the lab's own solve steps, so that, as in the lab, the workers are placed before the
   fifth one arrives; what is refused becomes a note;
3. ``execute``: the lab reset on the grader's cluster (``reset``: nothing of the previous submission left), then
   every act done there, the learner's manifests as the unprivileged ``gpulab:replay`` user;
4. ``settle``: the lab's own waits, and a last wait until the scheduler has decided about every pod, leaving the
   outcome to the real scheduler and the simulated GPU stack.

This package must not trust anything in a bundle beyond its manifests and actions.
"""

from __future__ import annotations

from labs.replay.allowed import NAMESPACED_KINDS
from labs.replay.execute import Replayed, run
from labs.replay.planner import (MAX_REPLAY_OBJECTS, MAX_REPLAY_PODS, Act, Plan, confine, plan, pods_asked,
                                 validate_actions)
from labs.replay.record import record_actions, solve_actions
from labs.replay.reset import POD_SECURITY, REPLAY_GROUP, REPLAY_USER
from labs.replay.settle import QUIET_S, WAIT_CAP_S, outcome_fingerprint, still_changing

__all__ = ["MAX_REPLAY_OBJECTS", "MAX_REPLAY_PODS", "NAMESPACED_KINDS", "POD_SECURITY", "QUIET_S", "REPLAY_GROUP",
           "REPLAY_USER", "WAIT_CAP_S", "Act", "Plan", "Replayed", "confine", "outcome_fingerprint", "plan",
           "pods_asked", "record_actions", "run", "solve_actions", "still_changing", "validate_actions"]
