"""FailedScheduling messages are read into counts per reason, whatever the scheduler appended after them."""

from __future__ import annotations

import pytest

from graders import explain, schedmsg

CURRENT = ("0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 2 node(s) had untolerated taint(s). "
           "preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, "
           "2 Preemption is not helpful for scheduling.")


def test_current_format_gives_counts_per_reason_and_the_preemption_part() -> None:
    """The 1.36 format from the control-plane recipe, section 4."""
    m = schedmsg.parse(CURRENT)
    assert m is not None and m.total == 3
    assert m.reasons == (("Insufficient nvidia.com/gpu", 1), ("node(s) had untolerated taint(s)", 2))
    assert m.count(schedmsg.TAINTS) == 2 and m.count("Insufficient *") == 1
    assert m.preemption is not None and m.preemption.counts == {
        "No preemption victims found for incoming pod": 1, "Preemption is not helpful for scheduling": 2}


def test_dra_post_filter_sentence_before_preemption() -> None:
    text = ("0/17 nodes are available: 17 node(s) had untolerated taint(s). no new claims to deallocate, "
            "preemption: 0/17 nodes are available: 17 Preemption is not helpful for scheduling.")
    m = schedmsg.parse(text)
    assert m is not None and m.reasons == (("node(s) had untolerated taint(s)", 17),)
    assert m.postfilter.startswith("no new claims to deallocate")
    assert m.preemption is not None and m.preemption.total == 17


def test_plain_string_sort_order_and_two_digit_counts() -> None:
    """Reasons are sorted as strings ("10 ..." before "2 ..."); the parser keeps the order it read."""
    m = schedmsg.parse("0/12 nodes are available: 10 node(s) didn't match Pod's node affinity/selector, "
                       "2 Insufficient nvidia.com/gpu.")
    assert m is not None and m.reasons == ((schedmsg.AFFINITY, 10), ("Insufficient nvidia.com/gpu", 2))


def test_old_taint_format_with_braces_and_commas() -> None:
    m = schedmsg.parse("0/2 nodes are available: 2 node(s) had untolerated taint {nvidia.com/gpu: present, x: y}.")
    assert m is not None and m.reasons == (("node(s) had untolerated taint {nvidia.com/gpu: present, x: y}", 2),)
    assert schedmsg.is_taint_reason(m.reasons[0][0])


def test_prefilter_sentence_has_no_counts() -> None:
    m = schedmsg.parse("0/7 nodes are available: pod has unbound immediate PersistentVolumeClaims. "
                       "preemption: 0/7 nodes are available: 7 Preemption is not helpful for scheduling.")
    assert m is not None and m.reasons == () and m.prefilter == "pod has unbound immediate PersistentVolumeClaims"


def test_several_insufficient_resources_from_one_node() -> None:
    m = schedmsg.parse("0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient nvidia.com/gpu.")
    assert m is not None and dict(m.counts) == {"Insufficient cpu": 1, "Insufficient nvidia.com/gpu": 1}


@pytest.mark.parametrize("text", ["", "pod didn't trigger scale-up", "0/x nodes are available: 1 a", "x" * 70_000,
                                  "0/3 nodes are available:", "0/3 nodes are available: ,,, .", None])
def test_other_text_gives_none_or_an_empty_parse_without_raising(text: object) -> None:
    m = schedmsg.parse(text)  # type: ignore[arg-type]
    assert m is None or m.reasons == () or all(isinstance(c, int) for _, c in m.reasons)


def test_explain_message_reads_a_message_without_a_cluster() -> None:
    """A message alone gives one plain-words point per reason, each with its course section."""
    points = explain.explain_message(CURRENT)
    assert [p.section for p in points] == ["gpu-fundamentals", "scheduling", "scheduling"]
    assert "taint" in points[1].text and "No running pod has a lower priority" in points[2].text
    quota = explain.explain_message('pods "p" is forbidden: exceeded quota: gpu-quota, requested: '
                                    "requests.nvidia.com/gpu=2, used: requests.nvidia.com/gpu=0, limited: "
                                    "requests.nvidia.com/gpu=1")
    assert len(quota) == 1 and "gpu-quota" in quota[0].text and "requests.nvidia.com/gpu=1" in quota[0].text
    assert explain.explain_message("nothing we know") == ()
