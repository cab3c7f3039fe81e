"""The GPU stack's containers start their logs with lines of the real programs: each line names the upstream
source it comes from, at a version or commit; the lines of the modules gpulab pins (k8s-device-plugin, the GPU
Operator) are found there, read from the Go module cache when it holds them. Lines are printed in their loggers'
formats and belong to containers the simulated operator creates; other pods' containers print nothing."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from prerequisites import require

from cluster import settings
from cluster.sim.gpu import manifests, names, operands, startlogs

ALL_LINES = [(container, line) for container, lines in startlogs.LINES.items() for line in lines]
# Sources in modules gpulab builds or referees against, so the Go module cache holds them once binaries are made.
PINNED = [(c, line) for c, line in ALL_LINES if line.source.startswith((startlogs.DP, startlogs.OP))]


def _module_file(source: str) -> tuple[Path, int | None]:
    """The file in the Go module cache (module paths escape capitals as !lower) and the line number, if any."""
    path, _, number = source.partition(".go:")
    path = path + ".go" if number else path
    escaped = re.sub(r"[A-Z]", lambda m: "!" + m.group(0).lower(), path)
    return settings.cache_root() / "go" / "mod" / escaped, int(number) if number else None


def _pattern(template: str) -> str:
    """A Go format string or a shell word as a regex: verbs and $VARIABLES match any text."""
    out = ""
    for part in re.split(r"(%[-+# 0-9.]*[a-zA-Z]|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?)", template):
        out += ".+" if part.startswith(("%", "$")) else re.escape(part)
    return out


def test_every_line_names_its_source_at_a_version() -> None:
    for container, line in ALL_LINES:
        module, at, rest = line.source.partition("@")
        assert module.startswith("github.com/NVIDIA/") and at and "/" in rest, (container, line.source)
    assert len(PINNED) > len(ALL_LINES) / 2


@pytest.mark.parametrize("container,line", PINNED, ids=[f"{c}:{line.text[:30]}" for c, line in PINNED])
def test_each_line_is_in_the_pinned_upstream_source(container: str, line: startlogs.Line) -> None:
    path, number = _module_file(line.source)
    require(path.exists(), f"{path} is not in the Go module cache (gpulab binaries ensure downloads it)")
    text = path.read_text()
    if number is not None:
        source_line = text.splitlines()[number - 1]
        literal = re.search(r'"((?:[^"\\]|\\.)*)"', source_line)
        assert literal, f"no string at {line.source}: {source_line.strip()}"
        template = literal.group(1).replace('\\"', '"').replace("\\n", "\n")
        assert re.fullmatch(_pattern(template), line.text), (line.source, source_line.strip())
    else:
        echoed = re.findall(r'echo "([^"]*)"', text) + re.findall(r'echo ([^;"\n]+)', text)
        assert any(re.fullmatch(_pattern(e.strip()), line.text) for e in echoed), (line.text, echoed)


def test_lines_are_printed_in_their_loggers_formats() -> None:
    at = 1_700_000_000_123_456_789  # 2023-11-14T22:13:20.123456789Z
    pod = {"metadata": {"namespace": names.NAMESPACE}}
    klog = startlogs.render(startlogs.LINES["nvidia-device-plugin"][1], at)
    assert klog == "I1114 22:13:20.123456       1 main.go:253] Starting FS watcher for /var/lib/kubelet/device-plugins"
    zap = json.loads(startlogs.render(startlogs.LINES["gpu-operator"][0], at))
    assert list(zap) == ["level", "ts", "logger", "msg"] and zap["msg"] == "starting manager"
    assert startlogs.render(startlogs.Line("logrus", 'say "hi"'), at) == (
        'time="2023-11-14T22:13:20Z" level=info msg="say \\"hi\\""')
    assert startlogs.render(startlogs.Line("logrus", "Initializing"), at).endswith(" msg=Initializing")
    assert startlogs.render(startlogs.LINES["nvidia-dcgm-exporter"][0], at) == (
        'time=2023-11-14T22:13:20.123Z level=INFO msg="Starting dcgm-exporter" Version=4.3.1-4.4.0')
    streams = {stream for stream, _ in startlogs.lines(pod, {"name": "nvidia-device-plugin"})}
    assert streams == {"stdout", "stderr"}  # the entrypoint echoes on stdout, klog writes to stderr


def test_only_the_gpu_stacks_own_containers_print_these_lines() -> None:
    made = {c["name"] for operand in manifests.operand_daemonsets() for key in ("containers", "initContainers")
            for c in manifests.daemonset(operand)["spec"]["template"]["spec"].get(key, [])}
    made |= {c["name"] for c in manifests.operator_deployment()["spec"]["template"]["spec"]["containers"]}
    assert set(startlogs.LINES) <= made, set(startlogs.LINES) - made
    assert operands.SIDECARS["device-plugin"] == ("config-manager",)
    assert startlogs.lines({"metadata": {"namespace": "lab-01"}}, {"name": "nvidia-device-plugin"}) == []
    assert startlogs.lines({"metadata": {"namespace": names.NAMESPACE}}, {"name": "sleeper"}) == []
