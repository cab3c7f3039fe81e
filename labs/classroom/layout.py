"""The class folder: who is in the class and where the hub, the exchange and the shared binaries live.

``/srv/gpulab-class`` by default (``--dir`` or ``$GPULAB_CLASS_DIR``), owned by root and readable by all:

- ``class.json``: the settings (instructor, learners, port, course id, culling);
- ``jupyterhub_config.py``: what ``jupyterhub`` runs with (``hubconfig``);
- ``hub/`` (0700): the hub's database, cookie secret and proxy pid;
- ``jupyter/``: ``nbgrader_config.py`` for every server (course id, exchange), through ``JUPYTER_CONFIG_PATH``;
- ``exchange/`` (1777): nbgrader's file-system exchange;
- ``cache/``: a read-only copy of the control-plane binaries and etcd seeds (root's own cache is private).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from cluster import errors, settings

DEFAULT_DIR = Path("/srv/gpulab-class")
ENV = "GPULAB_CLASS_DIR"
LEARNERS_GROUP = "gpulab-learners"
INSTRUCTORS_GROUP = "gpulab-instructors"
COURSE_ID = "gpulab"
# A login name useradd accepts and that is safe in paths, URLs and nbgrader's exchange file names ('+' splits them).
_NAME = re.compile(r"^[a-z_][a-z0-9_-]{0,30}$")


def class_dir(value: str | Path | None = None) -> Path:
    if value:
        return Path(value)
    return settings.current().class_dir or DEFAULT_DIR


def check_name(name: str) -> str:
    if not _NAME.match(name):
        raise errors.ConfigError("account name", [f"{name!r}: use lower-case letters, digits, '_' or '-', starting "
                                                  "with a letter, at most 31 characters"])
    return name


CLUSTER_STARTS = ("login", "first-use")
DEFAULT_CLUSTER_START = "first-use"  # issue 17: the cluster started lazily on first use


@dataclass(frozen=True)
class ClassSettings:
    instructor: str
    port: int = 8000
    cull_after: int = 3600  # seconds idle before the culler stops a server (and its lab cluster)
    cull_every: int = 300
    learners: tuple[str, ...] = field(default_factory=tuple)
    course_id: str = COURSE_ID
    # "first-use" (as issue 17 asks): the learner's lab cluster starts when a lab first needs it, so a learner who
    # logs in only to read holds no cluster; "login": it starts beside their server, so it is (nearly) up when the
    # first lab starts, a few seconds sooner, at the price of a cluster per logged-in learner.
    cluster_start: str = DEFAULT_CLUSTER_START

    def with_learner(self, name: str) -> ClassSettings:
        return self if name in self.learners else replace(self, learners=(*self.learners, name))


@dataclass(frozen=True)
class ClassDir:
    root: Path

    @property
    def settings_file(self) -> Path:
        return self.root / "class.json"

    @property
    def hub_config(self) -> Path:
        return self.root / "jupyterhub_config.py"

    @property
    def hub_state(self) -> Path:
        return self.root / "hub"

    @property
    def jupyter_config(self) -> Path:
        return self.root / "jupyter"

    @property
    def exchange(self) -> Path:
        return self.root / "exchange"

    @property
    def cache(self) -> Path:
        return self.root / "cache"

    def exists(self) -> bool:
        return self.settings_file.is_file()

    def settings(self) -> ClassSettings:
        try:
            data = json.loads(self.settings_file.read_text(encoding="utf-8"))
            data["learners"] = tuple(data.get("learners", ()))
            return ClassSettings(**data)
        except FileNotFoundError as exc:
            raise errors.ConfigError(str(self.root), ["is not a class folder (no class.json)"],
                                     hint=f"gpulab class init --dir {self.root} --instructor NAME") from exc
        except (ValueError, TypeError) as exc:
            raise errors.ConfigError(str(self.settings_file), [f"unreadable: {exc}"]) from exc

    def save(self, settings: ClassSettings) -> None:
        tmp = self.settings_file.with_suffix(".tmp")
        data = asdict(settings)
        data["learners"] = list(settings.learners)
        tmp.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        tmp.chmod(0o644)
        tmp.replace(self.settings_file)
