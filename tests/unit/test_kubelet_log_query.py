"""A container-log request is read and answered with the kubelet's semantics (v1.36): the query decoded as the
kubelet decodes ``PodLogOptions``, refused with its status and words, and the log file cut with ``tailLines`` first,
then ``sinceSeconds``/``sinceTime``, ``timestamps`` and ``limitBytes`` (k8s.io/cri-client ``pkg/logs``)."""

from __future__ import annotations

import pytest

from cluster.sim.kubelet import logquery, logstore

SECOND = 1_000_000_000
T0 = 1_700_000_000 * SECOND  # 2023-11-14T22:13:20Z


def _log(*entries: tuple[int, str]) -> bytes:
    """A CRI log file: (seconds after T0, text) per line, on stdout."""
    return b"".join(logstore.cri_line(T0 + s * SECOND, "stdout", text) for s, text in entries)


FIVE = _log((0, "one"), (10, "two"), (20, "three"), (30, "four"), (40, "five"))


def _q(**params: str) -> dict[str, tuple[str, ...]]:
    return {k: (v,) for k, v in params.items()}


def test_no_query_reads_everything_as_written() -> None:
    opts = logquery.decode({})
    assert opts == logquery.LogOptions()
    assert logquery.cut(FIVE, opts, T0 + 60 * SECOND) == b"one\ntwo\nthree\nfour\nfive\n"


@pytest.mark.parametrize("value,expected", [("true", True), ("1", True), ("", True), ("yes", True),
                                            ("false", False), ("FALSE", False), ("0", False)])
def test_booleans_are_false_only_for_false_and_0(value: str, expected: bool) -> None:
    """``runtime.Convert_Slice_string_To_bool``: even an empty value is true."""
    assert logquery.decode(_q(follow=value, previous=value, timestamps=value)) == logquery.LogOptions(
        follow=expected, previous=expected, timestamps=expected)


def test_tail_is_the_old_name_of_tail_lines_and_all_means_no_limit() -> None:
    assert logquery.decode(_q(tail="2")).tail_lines == 2
    assert logquery.decode(_q(tail="all", tailLines="3")).tail_lines is None
    assert logquery.decode(_q(tail="1", tailLines="3")).tail_lines == 1


@pytest.mark.parametrize("query", [_q(tailLines="x"), _q(limitBytes="1.5"), _q(sinceSeconds=" 5"),
                                   _q(tailLines="99999999999999999999"), _q(sinceTime="yesterday"),
                                   _q(sinceTime="2024-02-30T00:00:00Z"), _q(sinceTime="2024-01-01 00:00:00Z")])
def test_a_value_that_does_not_parse_is_400_unable_to_decode(query: dict[str, tuple[str, ...]]) -> None:
    with pytest.raises(logquery.QueryError) as err:
        logquery.decode(query)
    assert (err.value.status, err.value.body) == (400, '{"message": "Unable to decode query."}')


@pytest.mark.parametrize("query", [_q(tailLines="-1"), _q(limitBytes="0"), _q(sinceSeconds="0"),
                                   _q(sinceSeconds="5", sinceTime="2024-01-01T00:00:00Z"),
                                   _q(sinceSeconds="5", sinceTime=""), _q(stream="Both"),
                                   _q(stream="Stdout", tailLines="1")])
def test_options_that_fail_validation_are_422_invalid_request(query: dict[str, tuple[str, ...]]) -> None:
    with pytest.raises(logquery.QueryError) as err:
        logquery.decode(query)
    assert (err.value.status, err.value.body) == (422, '{"message": "Invalid request."}')
    assert logquery.problems(logquery.LogOptions(
        tail_lines=-1, limit_bytes=0)) == ["tailLines: Invalid value: -1: must be greater than or equal to 0",
                                           "limitBytes: Invalid value: 0: must be greater than 0"]


def test_a_stream_other_than_all_needs_a_feature_gate_the_kubelet_has_off() -> None:
    assert logquery.stream_refusal(logquery.decode(_q(stream="All"))) is None
    assert logquery.stream_refusal(logquery.decode(_q(stream="Stderr"))) == (
        'unable to return the given log stream: "Stderr". Please enable PodLogsQuerySplitStreams feature gate in '
        'kubelet')


def test_tail_lines_are_the_last_lines_of_the_file() -> None:
    now = T0 + 60 * SECOND
    assert logquery.cut(FIVE, logquery.decode(_q(tailLines="2")), now) == b"four\nfive\n"
    assert logquery.cut(FIVE, logquery.decode(_q(tailLines="0")), now) == b""
    assert logquery.cut(FIVE, logquery.decode(_q(tailLines="9")), now) == b"one\ntwo\nthree\nfour\nfive\n"


def test_since_seconds_counts_back_from_now_and_since_time_is_absolute() -> None:
    now = T0 + 45 * SECOND
    assert logquery.cut(FIVE, logquery.decode(_q(sinceSeconds="30")), now) == b"three\nfour\nfive\n"
    assert logquery.cut(FIVE, logquery.decode(_q(sinceTime="2023-11-14T22:13:50Z")), now) == b"four\nfive\n"
    assert logquery.cut(FIVE, logquery.decode(_q(sinceTime="2023-11-14T23:13:40+01:00")), now) == \
        b"three\nfour\nfive\n"
    assert logquery.decode(_q(sinceTime="")).since_time_ns == logquery.ZERO_TIME_NS  # the zero time: no limit


def test_tail_is_taken_before_since_so_old_tail_lines_leave_fewer_lines() -> None:
    """ReadLogs seeks to the tail first and then skips older lines: tail 3 since 15 s is 2 lines, not 3."""
    opts = logquery.decode(_q(tailLines="3", sinceSeconds="15"))
    assert logquery.cut(FIVE, opts, T0 + 45 * SECOND) == b"four\nfive\n"


def test_timestamps_prefix_each_line_with_the_fixed_width_rfc3339_nano_time() -> None:
    data = logstore.cri_line(T0 + 5, "stderr", "hello")
    assert logquery.cut(data, logquery.decode(_q(timestamps="true")), T0) == \
        b"2023-11-14T22:13:20.000000005Z hello\n"


def test_limit_bytes_ends_the_reply_mid_line_and_counts_the_timestamps() -> None:
    assert logquery.cut(FIVE, logquery.decode(_q(limitBytes="6")), T0) == b"one\ntw"
    stamped = logquery.cut(FIVE, logquery.decode(_q(limitBytes="35", timestamps="1")), T0)
    assert stamped == b"2023-11-14T22:13:20.000000000Z one\n2023-11-14T22:13:30.000000000Z two\n"[:35]


def test_partial_lines_join_and_get_one_timestamp() -> None:
    data = (logstore.cri_line(T0, "stdout", "hel", partial=True) + logstore.cri_line(T0 + 1, "stdout", "lo")
            + logstore.cri_line(T0 + 2, "stdout", "next"))
    assert logquery.cut(data, logquery.LogOptions(), T0) == b"hello\nnext\n"
    assert logquery.cut(data, logquery.LogOptions(timestamps=True), T0) == (
        b"2023-11-14T22:13:20.000000000Z hello\n2023-11-14T22:13:20.000000002Z next\n")


def test_lines_that_are_not_cri_log_lines_are_skipped_and_a_carriage_return_is_kept() -> None:
    data = b"garbage\n" + logstore.cri_line(T0, "stdout", "a\rb") + b"2023-11-14T22:13:20Z stdin F x\n"
    assert logquery.cut(data, logquery.LogOptions(), T0) == b"a\rb\n"


def test_the_cutter_fed_line_by_line_follows_like_the_whole_cut() -> None:
    """The follow loop feeds lines as they come; without tail it sends what a whole cut would."""
    opts = logquery.decode(_q(sinceSeconds="25", timestamps="true"))
    cutter = logquery.Cutter(opts, T0 + 45 * SECOND)
    fed = b"".join(cutter.feed(raw) for raw in logquery.split_lines(FIVE))
    assert fed == logquery.cut(FIVE, opts, T0 + 45 * SECOND)
    assert logquery.tail_start(FIVE, 2) == FIVE.index(b"2023-11-14T22:13:50")
    assert logquery.split_lines(b"a\nb") == [b"a\n", b"b"]
