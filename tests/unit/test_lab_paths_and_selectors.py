"""The lab checks' path language and expectations, and label selectors for recorded views."""

from __future__ import annotations

import pytest

from labs import paths, selectors

pytestmark = pytest.mark.unit

POD = {
    "metadata": {"labels": {"app": "x", "nvidia.com/gpu.product": "NVIDIA-L40S"}},
    "spec": {"containers": [
        {"name": "a", "resources": {"limits": {"nvidia.com/gpu": 1}}},
        {"name": "b", "resources": {"limits": {"nvidia.com/gpu": "2"}}},
    ], "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]},
}
CONFIGMAP = {"data": {"timeslice-4": "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                                      "    - {name: nvidia.com/gpu, replicas: 4}\n", "bad": "a: [unclosed"}}


@pytest.mark.parametrize(("path", "found"), [
    ("spec.containers[0].name", ["a"]),
    ("spec.containers[-1].name", ["b"]),
    ("spec.containers[*].resources.limits[nvidia.com/gpu]", [1, "2"]),
    ("spec.containers[name=b].resources.limits[nvidia.com/gpu]", ["2"]),
    ("metadata.labels[nvidia.com/gpu.product]", ["NVIDIA-L40S"]),
    ("metadata.labels[*]", ["x", "NVIDIA-L40S"]),
    ("spec.missing.deeper", []),
    ("spec.containers[7]", []),
])
def test_paths_walk_plain_data(path: str, found: list[object]) -> None:
    assert paths.walk(paths.parse(path), POD) == found


def test_embedded_yaml_is_parsed_in_place_and_bad_yaml_finds_nothing() -> None:
    p = paths.parse("data[timeslice-4]|yaml.sharing.timeSlicing.resources[name=nvidia.com/gpu].replicas")
    assert paths.walk(p, CONFIGMAP) == [4]
    assert paths.walk(paths.parse("data.bad|yaml.a"), CONFIGMAP) == []


def test_a_root_list_can_be_filtered() -> None:
    patch = [{"op": "replace", "path": "/spec/devicePlugin/config", "value": {"name": "x"}}]
    assert paths.walk(paths.parse("[path=/spec/devicePlugin/config].value.name"), patch) == ["x"]


@pytest.mark.parametrize("bad", ["", "a..b", "a.", "a[", "a[]", "a|toml", ".a", "a b"])
def test_malformed_paths_are_refused(bad: str) -> None:
    with pytest.raises(paths.PathError):
        paths.parse(bad)


@pytest.mark.parametrize(("op", "value", "every", "passed"), [
    ("equals", 1, False, True),        # any container
    ("equals", 1, True, False),        # every container
    ("equals", "2", False, True),      # YAML 2 and "2" compare equal
    ("in", [3, 2], False, True),
    ("notIn", [1, 2], False, False),
    ("atLeast", 2, False, True),
    ("atMost", 0, False, False),
    ("notEquals", 5, True, True),
])
def test_expectations_on_several_values(op: str, value: object, every: bool, passed: bool) -> None:
    exp = paths.Expect(paths.parse("spec.containers[*].resources.limits[nvidia.com/gpu]"), op, value, every)
    assert exp.test(POD)[0] is passed


def test_contains_is_case_and_space_insensitive_on_text_and_exact_on_lists() -> None:
    answer = {"a": "0/6 nodes are available:  6 Insufficient   NVIDIA.com/gpu.", "l": ["x", "y"]}
    assert paths.Expect(paths.parse("a"), "contains", "insufficient nvidia.com/gpu").test(answer)[0]
    assert paths.Expect(paths.parse("l"), "contains", "y").test(answer)[0]
    assert not paths.Expect(paths.parse("l"), "contains", "Y").test(answer)[0]


def test_exists_and_what_was_found() -> None:
    assert paths.Expect(paths.parse("spec.tolerations[*].key"), "exists", True).test(POD) == (True, "'nvidia.com/gpu'")
    assert paths.Expect(paths.parse("spec.nope"), "exists", False).test(POD) == (True, "not set")
    assert paths.Expect(paths.parse("spec.nope"), "equals", 1).test(POD) == (False, "not set")


def test_quantities_compare_numerically() -> None:
    data = {"q": "1000m", "m": "40Gi"}
    assert paths.Expect(paths.parse("q"), "equals", 1).test(data)[0]
    assert paths.Expect(paths.parse("m"), "atLeast", "32Gi").test(data)[0]
    assert not paths.Expect(paths.parse("m"), "atLeast", "41Gi").test(data)[0]


@pytest.mark.parametrize(("text", "labels", "matches"), [
    ("app=x", {"app": "x"}, True),
    ("app==x,tier!=web", {"app": "x", "tier": "db"}, True),
    ("app in (a, b,x)", {"app": "x"}, True),
    ("app notin (x)", {"app": "x"}, False),
    ("app", {}, False),
    ("!legacy", {"app": "x"}, True),
    ("", {"anything": "at all"}, True),
])
def test_label_selectors(text: str, labels: dict[str, str], matches: bool) -> None:
    assert selectors.parse(text).matches(labels) is matches


@pytest.mark.parametrize("bad", ["app in x", "=x", "app=(x)", "a b"])
def test_malformed_selectors_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="is not a label requirement"):
        selectors.parse(bad)


def test_a_matches_check_runs_in_linear_time_on_the_learners_text() -> None:
    """A lab's ``matches`` pattern runs over text the learner wrote (a CEL expression, a PromQL rule): RE2, so a
    long text shaped against a backtracking pattern is answered at once (Python's ``re`` took minutes)."""
    import time

    expect = paths.Expect(paths.parse("spec.expr"), "matches", "^(a|aa)+$")
    started = time.monotonic()
    ok, _ = expect.test({"spec": {"expr": "a" * 40 + "b"}})
    assert not ok and time.monotonic() - started < 1.0
    assert paths.Expect(paths.parse("spec.expr"), "matches", "semver\\(").test({"spec": {"expr": "x semver('8.0')"}})[0]
