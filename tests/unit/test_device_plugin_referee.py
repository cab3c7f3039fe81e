"""NVIDIA's own decoder as the referee: gpulab's device-plugin config decoder and linter must agree with it.

A generated corpus (``dp_corpus``) goes through NVIDIA's ``api/config/v1`` at the pinned module version (the
``dpcheck`` helper) and through gpulab: the runtime decoder (``cluster.gpu.device_plugin_config.load``) and the
linter, on each config as a file and inside a ConfigMap. For every case they must agree on: refused or accepted,
the log line the plugin prints when it refuses, which keys are dropped, and the effective replicas, renaming and
``failRequestsGreaterThanOne``. Where the course's version (v0.20) behaves differently from the newest version
the Go module proxy serves, the expectation is adjusted by ``course_version`` below, one documented rule each
(docs/gpu-stack.md, "NVIDIA's decoder as the referee").
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, replace

from cluster.gpu import device_plugin_config as dpc, dpcheck
from dp_corpus import cases, configmap
from graders import lint, manifests, source
from prerequisites import require

MPS_ROOT_ARGS = ("--mps-root=/run/nvidia/mps",)  # what the GPU Operator passes; the linter assumes it
_CM_KEYS = ("config.yaml", "any", "a100-ts", "default", "Time-Slicing", "sharing.yml")


@dataclass(frozen=True)
class Outcome:
    refused: bool
    message: str = ""  # the plugin's log line when refused
    dropped: frozenset[str] = frozenset()
    replicated: tuple[tuple[str, tuple[tuple[str, int, str], ...]], ...] = ()  # per strategy: (name, replicas, rename)
    fail_gt1: bool | None = None


def _norm(path: str) -> str:
    return re.sub(r"\[(\d+)\]", r".\1", path)


def nvidia(verdict: dpcheck.Verdict) -> Outcome:
    if not verdict.ok:
        return Outcome(True, verdict.error)
    sharing = verdict.config.get("sharing") or {}
    active = sharing.get("mps") if sharing.get("mps") is not None else sharing.get("timeSlicing") or {}
    return Outcome(False, dropped=frozenset(_norm(d) for d in verdict.dropped),
                   replicated=tuple((s, verdict.replicated(s)) for s in ("timeSlicing", "mps")),
                   fail_gt1=bool(active.get("failRequestsGreaterThanOne", False)))


_POLICY = re.compile(r"(?m)^\s*(?:'|\")?shareddevicesallocationpolicy(?:'|\")?\s*:\s*(\S+)", re.IGNORECASE)


def course_version(text: str, out: Outcome, python: Outcome) -> Outcome:
    """The documented v0.19.1 -> v0.20 differences, applied to NVIDIA's v0.19.1 verdict (docs/gpu-stack.md).

    1. ``flags.plugin.sharedDevicesAllocationPolicy`` exists from v0.20 (distributed|packed): v0.19.1 drops the
       key; v0.20 reads it and refuses other values in validateFlags.
    2. From v0.20 an explicit ``failRequestsGreaterThanOne: false`` under ``sharing.mps`` is honoured; v0.19.1
       forces true.
    """
    found = _POLICY.search(text)
    if found and not out.refused:
        dropped = frozenset(d for d in out.dropped if not d.lower().endswith("shareddevicesallocationpolicy"))
        value = found.group(1).strip("'\"")
        if value not in ("distributed", "packed"):
            line = f"error starting plugins: unable to validate flags: invalid --shared-devices-allocation-policy option: {value}"
            return Outcome(True, line)
        out = replace(out, dropped=dropped)
    if not out.refused and dict(out.replicated).get("mps") and python.fail_gt1 is False:
        out = replace(out, fail_gt1=False)
    return out


def decoder(text: str) -> Outcome:
    try:
        config = dpc.load(text)
    except dpc.PluginConfigError as exc:
        return Outcome(True, exc.crash_message)
    def rep(spec: dpc.SharingSpec | None) -> tuple[tuple[str, int, str], ...]:
        return tuple((r.name, r.replicas, r.rename) for r in spec.resources) if spec else ()
    return Outcome(False, dropped=frozenset(config.ignored_keys),
                   replicated=(("timeSlicing", rep(config.time_slicing)), ("mps", rep(config.mps))),
                   fail_gt1=config.fail_requests_greater_than_one)


_CRASH = re.compile(r"The device plugin refuses this config \(.*\) and crash-loops, logging: `(.*)`\.$", re.DOTALL)
_IGNORED = re.compile(r"The device plugin silently ignores `([^`]+)`")


def linter(name: str, text: str) -> tuple[bool, Outcome]:
    """(recognised as a device-plugin config, what the linter says about it)."""
    parsed = source.parse_text(text, name)
    docs = [d for doc in parsed.documents for d in lint.expand(doc, source.DEFAULT_LIMITS)[0]]
    recognised = any(manifests.classify(d) is manifests.DocType.DEVICE_PLUGIN_CONFIG for d in docs)
    result = lint.lint_texts({name: text}, compile_cel=False)
    crash = [m.group(1) for f in result.findings if f.rule == "device-plugin-config" and (m := _CRASH.match(f.message))]
    syntax = [f.message for f in result.findings if f.rule == "yaml-syntax"]
    dropped = frozenset(m.group(1) for f in result.findings if f.rule == "device-plugin-config"
                        for m in [_IGNORED.match(f.message)] if m)
    if syntax and not recognised:  # a broken document after the config does not stop the plugin
        return True, Outcome(True, syntax[0])
    return recognised, Outcome(bool(crash), crash[0] if crash else "", dropped=dropped)


def _compare(case_id: str, form: str, want: Outcome, got: Outcome, *, full: bool) -> Iterator[str]:
    if want.refused != got.refused:
        yield f"{case_id} [{form}]: NVIDIA {'refuses' if want.refused else 'accepts'} ({want.message}); gpulab " \
              f"{'refuses' if got.refused else 'accepts'} ({got.message})"
        return
    if want.refused:
        if full and want.message != got.message:
            yield f"{case_id} [{form}]: log line differs:\n    NVIDIA: {want.message}\n    gpulab: {got.message}"
        return
    if want.dropped != got.dropped:
        yield f"{case_id} [{form}]: dropped keys differ: NVIDIA {sorted(want.dropped)}, gpulab {sorted(got.dropped)}"
    if full and (want.replicated, want.fail_gt1) != (got.replicated, got.fail_gt1):
        yield f"{case_id} [{form}]: effective sharing differs: NVIDIA {want.replicated} fail>1={want.fail_gt1}, " \
              f"gpulab {got.replicated} fail>1={got.fail_gt1}"


def disagreements() -> tuple[int, int, list[str]]:
    """(corpus size, number of checks, disagreements)."""
    corpus = cases()
    bare = dpcheck.check([(text, ()) for _, text in corpus])
    rooted = dpcheck.check([(text, MPS_ROOT_ARGS) for _, text in corpus])
    problems: list[str] = []
    checks = 0
    for i, ((case_id, text), v_bare, v_rooted) in enumerate(zip(corpus, bare, rooted)):
        ours = decoder(text)
        want = course_version(text, nvidia(v_bare), ours)
        want_rooted = course_version(text, nvidia(v_rooted), ours)
        is_json = case_id.startswith("json-")
        forms = [("decoder", want, ours, True)]
        file_name = f"{case_id}.json" if is_json else f"{case_id}.yaml"
        known, said = linter(file_name, text)
        forms.append(("file", want_rooted, said if known else Outcome(False, "not recognised", frozenset({"?"})), False))
        key = "config.json" if is_json else _CM_KEYS[i % len(_CM_KEYS)]
        known, said = linter(f"cm-{case_id}.yaml", configmap(text, key))
        forms.append((f"configmap {key}", want_rooted,
                      said if known else Outcome(False, "not recognised", frozenset({"?"})), False))
        for form, expected, got, full in forms:
            checks += 1
            problems.extend(_compare(case_id, form, expected, got, full=full))
    return len(corpus), checks, problems


def test_gpulab_agrees_with_nvidias_decoder_on_every_case() -> None:
    require(dpcheck.find_binary() is not None,
            f"NVIDIA's decoder {dpcheck.binary_name()} is not built (`gpulab binaries ensure` builds it with Go)")
    size, checks, problems = disagreements()
    failed = {p.split(" ", 1)[0] for p in problems}
    agreement = 100.0 * (size - len(failed)) / size
    print(f"\ndevice-plugin referee: {size} configs, {checks} verdicts (decoder, file, ConfigMap), "
          f"NVIDIA k8s-device-plugin {dpcheck.MODULE_VERSION}; agreement {agreement:.1f} % of configs "
          f"({len(problems)} disagreeing verdicts)")
    assert not problems, "\n".join(problems[:60])


def test_corpus_is_a_few_hundred_distinct_configs() -> None:
    corpus = cases()
    assert len(corpus) >= 300
    assert len({case_id for case_id, _ in corpus}) == len(corpus)
    assert len({text for _, text in corpus}) == len(corpus)
