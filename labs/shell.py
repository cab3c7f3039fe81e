"""Run kubectl and gpulab from a notebook against the lab cluster, and read the DCGM exporter's metrics.

A notebook cell calls ``kubectl("get nodes")``: the command runs with the lab cluster's kubeconfig (the same one
``gpulab env`` exports), its output is printed as a terminal would show it, and the result is returned. Cells
state what they expect (``expect="failure"`` for a manifest the API server must reject); an outcome that differs
raises ``UnexpectedOutcome``, shown as one short message instead of a traceback, so a notebook run headless
fails loudly when the cluster does not behave as the text says. Learners' mistakes are not exceptions: a failing
command they typed prints its error like a terminal would, unless the cell said it must succeed.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from cluster import backends, binaries, errors
from cluster.kube import http

EXPECTATIONS = ("success", "failure", "any")
_TIMEOUT_S = 120


class UnexpectedOutcome(errors.CommandFailed):
    """A command ended differently from what the notebook cell said it would."""

    def _render_traceback_(self) -> list[str]:  # IPython shows this instead of a traceback
        return [f"\033[31m{self}\033[0m"]


@dataclass(frozen=True)
class Result:
    """What one command printed and how it ended."""

    command: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def _ipython_display_(self) -> None:
        """Shown as a cell's value: nothing more, the output was printed as the command ran."""


def kubeconfig() -> Path:
    """The lab cluster's admin kubeconfig (what ``gpulab env`` exports); a clear error when no cluster exists."""
    path = backends.current().kubeconfig()
    if not path.is_file():
        raise errors.ClusterError(f"no lab cluster kubeconfig at {path}", hint="gpulab up")
    return path


def kubectl_path() -> str:
    found = binaries.cached()
    if found is not None and found.path("kubectl").is_file():
        return str(found.path("kubectl"))
    on_path = shutil.which("kubectl")
    if on_path:
        return on_path
    raise errors.BinariesUnavailable("kubectl was not found in the gpulab cache or on PATH",
                                     hint="gpulab binaries ensure")  # fmt: skip


def use_cluster() -> Path:
    """Export KUBECONFIG and put kubectl on PATH for this kernel, so ``!kubectl ...`` cells reach the lab cluster."""
    path = kubeconfig()
    os.environ["KUBECONFIG"] = str(path)
    kubectl_dir = str(Path(kubectl_path()).parent)
    if kubectl_dir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = kubectl_dir + os.pathsep + os.environ.get("PATH", "")
    return path


def _split(args: str | list[str]) -> list[str]:
    return shlex.split(args) if isinstance(args, str) else list(args)


def _run(cmd: list[str], stdin: str | None, expect: str, quiet: bool, env: dict[str, str] | None = None) -> Result:
    if expect not in EXPECTATIONS:
        raise errors.ConfigError("notebook cell", [f"expect={expect!r} is not one of {', '.join(EXPECTATIONS)}"])
    try:
        proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=_TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired as exc:
        raise errors.CommandFailed(cmd, -1, f"no answer within {_TIMEOUT_S} s",
                                   hint="gpulab status shows whether the cluster is healthy") from exc  # fmt: skip
    result = Result(tuple(cmd), proc.returncode, proc.stdout, proc.stderr)
    if not quiet:
        sys.stdout.write(result.stdout)
        if result.stderr:
            sys.stdout.write(result.stderr)
        sys.stdout.flush()
    if (expect == "success" and not result.ok) or (expect == "failure" and result.ok):
        said = "succeed" if expect == "success" else "fail"
        raise UnexpectedOutcome(_shown(cmd), result.returncode, result.output,
                                hint=f"this cell expected the command to {said}; check the cluster with gpulab status")  # fmt: skip
    return result


def _shown(cmd: list[str]) -> list[str]:
    """The command as a learner would type it (no absolute binary path, no --kubeconfig)."""
    shown = [Path(cmd[0]).name, *(c for c in cmd[1:] if not c.startswith("--kubeconfig="))]
    return ["gpulab", *shown[3:]] if shown[1:3] == ["-m", "labs.cli.main"] else shown


def kubectl(args: str | list[str], *, stdin: str | None = None, expect: str = "success",
            quiet: bool = False) -> Result:  # fmt: skip
    """Run ``kubectl <args>`` against the lab cluster and print what it prints.

    ``expect``: ``"success"`` (default), ``"failure"`` (the command must be refused) or ``"any"``.
    """
    cmd = [kubectl_path(), f"--kubeconfig={kubeconfig()}", *_split(args)]
    return _run(cmd, stdin, expect, quiet)


def apply(manifest: str, *, expect: str = "success", quiet: bool = False) -> Result:
    """``kubectl apply -f -`` with the manifest text on stdin."""
    return kubectl(["apply", "-f", "-"], stdin=manifest, expect=expect, quiet=quiet)


def create(manifest: str, *, expect: str = "success", quiet: bool = False) -> Result:
    """``kubectl create -f -`` (a pod the API server must validate, as a learner would submit it)."""
    return kubectl(["create", "-f", "-"], stdin=manifest, expect=expect, quiet=quiet)


def gpulab(args: str | list[str], *, expect: str = "success", quiet: bool = False) -> Result:
    """Run the ``gpulab`` command line (same interpreter, same state dir) and print what it prints."""
    cmd = [sys.executable, "-m", "labs.cli.main", *_split(args)]
    return _run(cmd, None, expect, quiet, env={**os.environ, "COLUMNS": "150", "TTY_INTERACTIVE": "0"})


# --- DCGM exporter -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sample:
    """One Prometheus sample: metric name, labels, value."""

    metric: str
    labels: dict[str, str]
    value: float


def dcgm_url() -> str:
    """Where the (simulated) DCGM exporter serves its metrics, as the operator publishes it."""
    res = kubectl(["-n", "gpu-operator", "get", "configmap", "gpulab-dcgm-exporter", "-o", "jsonpath={.data.url}"],
                  quiet=True, expect="any")  # fmt: skip
    if not res.ok or not res.stdout.strip():
        raise errors.ClusterError("the DCGM exporter has not published its URL", hint="gpulab gpu-operator install")
    return res.stdout.strip()


def dcgm_samples(metric: str = "", url: str | None = None) -> list[Sample]:
    """Scrape the exporter once, like Prometheus would, and keep the samples of ``metric`` (all when empty)."""
    where = url or dcgm_url()
    try:
        text = http.get_text(where, timeout=10)
    except http.HttpError as exc:
        raise errors.ClusterError(f"cannot scrape the DCGM exporter: {exc}", hint="gpulab status") from exc
    return [s for s in parse_prometheus(text) if not metric or s.metric == metric]


def parse_prometheus(text: str) -> list[Sample]:
    """The text exposition format's sample lines (comments skipped); label values may contain spaces or commas."""
    samples = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, labels, rest = line, {}, ""
        if "{" in line:
            name, _, tail = line.partition("{")
            body, _, rest = tail.rpartition("}")
            labels = _labels(body)
        else:
            name, _, rest = line.partition(" ")
        samples.append(Sample(name.strip(), labels, float(rest.split()[0])))
    return samples


def _labels(body: str) -> dict[str, str]:
    labels: dict[str, str] = {}
    i = 0
    while i < len(body):
        eq = body.index("=", i)
        key = body[i:eq].strip().lstrip(",").strip()
        j, value = eq + 2, []
        while body[j] != '"':
            value.append(body[j + 1] if body[j] == "\\" else body[j])
            j += 2 if body[j] == "\\" else 1
        labels[key] = "".join(value)
        i = j + 1
    return labels
