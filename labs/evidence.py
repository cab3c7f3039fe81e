"""What a lab is graded on: the learner's files and, optionally, a view of the cluster.

``Evidence`` parses each file once (with the graders' safe, bounded YAML reader) and runs the static rules
once over all the lab's manifests, so that every check reads the same result and grading a submission costs
one lint run. A file that is missing, too large or not YAML is a learner's result, reported by the checks
that need it; nothing here raises for bad input.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from pathlib import Path

from cluster import fleet as fleet_mod, inside
from graders import ClusterView, FleetFacts, LintResult, lint_texts, source

log = logging.getLogger(__name__)


@functools.lru_cache(maxsize=8)
def fleet_facts(name: str) -> FleetFacts:
    """What the checks know of fleet ``name`` (its nodes and GPUs), loaded once per process."""
    return FleetFacts.from_fleet(fleet_mod.load(name))

MAX_FILE_BYTES = 1024 * 1024


class Evidence:
    """The inputs of one grading: files by name (bytes), the fleet, and a cluster view or ``None``."""

    def __init__(self, files: Mapping[str, bytes], lint_files: tuple[str, ...], fleet: FleetFacts,
                 view: ClusterView | None, *, compile_cel: bool = True) -> None:
        self.files = dict(files)
        self.lint_files = lint_files
        self.fleet = fleet
        self.view = view
        self.compile_cel = compile_cel
        self._parsed: dict[str, source.SourceFile] = {}

    def parsed(self, name: str) -> source.SourceFile | None:
        """The parsed file, or None when the submission does not have it."""
        if name not in self.files:
            return None
        if name not in self._parsed:
            self._parsed[name] = source.parse_bytes(self.files[name], name)
        return self._parsed[name]

    @functools.cached_property
    def lint(self) -> LintResult:
        present = {n: self.files[n] for n in self.lint_files if n in self.files}
        return lint_texts(present, self.fleet, compile_cel=self.compile_cel)


def read_files(folder: Path, names: tuple[str, ...]) -> dict[str, bytes]:
    """The named files of a submission folder; missing ones are left out, oversized ones cut to a marker.

    An oversized file is kept as the first bytes beyond the limit so that the YAML reader refuses it with
    its own "too large" finding instead of us reading megabytes. The folder may be a learner's, read with the
    grader's rights: a file that is a symbolic link, or under one, is left out (``cluster.inside``).
    """
    out: dict[str, bytes] = {}
    for name in names:
        try:
            data = inside.read(folder, name, MAX_FILE_BYTES + 1)
        except inside.NotInside as exc:  # a link (to ~/.ssh, the grader's files): never opened, never echoed
            log.warning("%s: %s; it is not read", folder / name, exc.strerror)
            continue
        except OSError as exc:
            log.warning("%s: %s; it is not read", folder / name, exc.strerror or exc)
            continue
        if data is not None:
            out[name] = data
    return out
