"""The safe YAML reader: positions, Kubernetes-style scalar resolution, limits, and embedded configs."""

from __future__ import annotations

import time

from graders import findings, lint, source


def _parse(text: str, **kw: object) -> source.SourceFile:
    return source.parse_text(text, "f.yaml", **kw)  # type: ignore[arg-type]


def test_positions_are_one_based_for_keys_and_items() -> None:
    doc = _parse("a: 1\nb:\n  - x\n  - {c: 2}\n").documents[0]
    assert doc.locate(("a",)) == source.Mark(1, 1)
    assert doc.locate(("b", 1)) == source.Mark(4, 5)
    assert doc.locate(("b", 1, "c")).line == 4
    assert doc.locate(("b", 1, "missing", 3)) == doc.locate(("b", 1))  # nearest written ancestor


def test_scalars_resolve_like_kubectl() -> None:
    """go-yaml v2 semantics: YAML 1.1 booleans, octal and hex ints, quoted text stays text."""
    data = _parse("a: yes\nb: off\nc: 0.5\nd: '1'\ne: 010\nf: 0x1F\ng: ~\nh: 1_000\ni: 1e3\nj: .inf\n").documents[0].data
    assert data == {"a": True, "b": False, "c": 0.5, "d": "1", "e": 8, "f": 31, "g": None, "h": 1000,
                    "i": 1000.0, "j": float("inf")}


def test_multiple_documents_keep_their_index_and_skip_empty_ones() -> None:
    parsed = _parse("a: 1\n---\n---\nb: 2\n")
    assert [d.data for d in parsed.documents] == [{"a": 1}, {"b": 2}]
    assert [d.index for d in parsed.documents] == [0, 1]
    assert parsed.documents[1].start.line == 3


def test_alias_bomb_is_refused_quickly() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 12)]
    started = time.perf_counter()
    parsed = _parse("\n".join(lines))
    assert time.perf_counter() - started < 0.5
    assert [f.rule for f in parsed.findings] == ["input-limits"]
    assert parsed.documents == ()


def test_aliases_within_budget_are_shared_not_copied() -> None:
    doc = _parse("a: &x {k: [1, 2]}\nb: *x\n").documents[0]
    assert doc.data == {"a": {"k": [1, 2]}, "b": {"k": [1, 2]}}


def test_merge_keys_fill_in_missing_keys_only() -> None:
    doc = _parse("base: &b {x: 1, w: 2}\nm:\n  <<: *b\n  w: 3\n").documents[0]
    assert doc.data["m"] == {"w": 3, "x": 1}  # type: ignore[index]


def test_plain_keys_resolve_like_go_yaml_v2() -> None:
    """kubectl and the device plugin read YAML with go-yaml v2 through sigs.k8s.io/yaml: a plain key ``y`` or
    ``on`` is a YAML 1.1 boolean and reaches encoding/json as ``"true"``; ``007`` as ``"7"``; quoted keys stay."""
    doc = _parse("y: 1\non: 2\n007: 3\n'n': 4\nname: 5\n").documents[0]
    assert doc.data == {"true": 2, "7": 3, "n": 4, "name": 5}


def test_depth_and_size_limits() -> None:
    deep = _parse("a: " + "[" * 100 + "]" * 100)
    assert [f.rule for f in deep.findings] == ["input-limits"]
    big = source.parse_bytes(b"x" * 2048, "big.yaml", source.Limits(max_bytes=1024))
    assert big.findings[0].rule == "input-limits" and big.findings[0].line == 0


def test_duplicate_keys_name_both_lines() -> None:
    parsed = _parse("a: 1\nb: 2\na: 3\n")
    assert parsed.documents[0].data == {"a": 3, "b": 2}
    (dup,) = parsed.findings
    assert dup.rule == "yaml-duplicate-key" and dup.line == 3 and "line 1" in dup.message


def test_tags_are_never_constructed() -> None:
    parsed = _parse("a: !!python/object/apply:os.system ['echo hi']\n")
    assert parsed.documents[0].data == {"a": ["echo hi"]}
    assert [f.rule for f in parsed.findings] == ["yaml-tag"]


def test_binary_and_bad_encodings_point_at_the_byte() -> None:
    nul = source.parse_bytes(b"a: 1\nb: x\x00y\n", "n.yaml")
    assert nul.findings[0].rule == "input-encoding" and (nul.findings[0].line, nul.findings[0].column) == (2, 5)
    latin = source.parse_bytes(b"a: caf\xe9\n", "l.yaml")
    assert latin.findings[0].rule == "input-encoding"
    control = source.parse_bytes(b"a: 1\nb: \x07\n", "c.yaml")
    assert control.findings[0].rule == "input-encoding" and control.findings[0].line == 2


def test_syntax_errors_carry_the_parser_position() -> None:
    (finding,) = _parse("a: [1, 2\nb: 3\n").findings
    assert finding.rule == "yaml-syntax" and finding.severity is findings.Severity.ERROR and finding.line >= 2


def test_literal_block_in_configmap_maps_lines_into_the_outer_file() -> None:
    text = (
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata:\n"
        "  any: |\n    version: v1\n    sharing:\n      timeSlicing:\n        resources:\n"
        "        - {name: nvidia.com/gpu, replicas: 1}\n"
    )
    doc = _parse(text).documents[0]
    inner, problems = lint.expand(doc, source.DEFAULT_LIMITS)
    assert not problems and len(inner) == 2
    embedded = inner[1]
    assert embedded.embedded_in == 'ConfigMap "c", key "any"'
    assert embedded.locate(("version",)) == source.Mark(6, 5)
    assert embedded.locate(("sharing", "timeSlicing", "resources", 0, "replicas")).line == 10


def test_quoted_embedded_config_collapses_positions_onto_the_value() -> None:
    text = 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata:\n  any: "version: v1\\nsharing: {}\\n"\n'
    doc = _parse(text).documents[0]
    inner, _ = lint.expand(doc, source.DEFAULT_LIMITS)
    assert inner[1].locate(("sharing",)) == source.Mark(5, 8)
