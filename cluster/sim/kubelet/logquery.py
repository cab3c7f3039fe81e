"""How a kubelet answers a container-log request: the query decoded and checked, then the log file cut.

The query is read as the kubelet reads it (k8s.io/kubernetes v1.36 ``pkg/kubelet/server/server.go``
``getContainerLogs``: ``tail`` as an old name of ``tailLines``, the generated ``url.Values`` conversion of
``PodLogOptions``, then ``pkg/apis/core/v1/validation`` ``ValidatePodLogOptions``), and a refusal carries the
kubelet's own status and words. The file is cut as ``k8s.io/cri-client`` ``pkg/logs`` ``ReadLogs`` cuts it: the
last ``tailLines`` lines of the file first, then lines older than ``sinceSeconds``/``sinceTime`` skipped, each
line prefixed with its time when ``timestamps``, and the reply ended after ``limitBytes``, mid-line if need be.
``stream`` selection is behind the alpha feature gate ``PodLogsQuerySplitStreams``, off in 1.36, so a kubelet
refuses any stream but ``All``. Pure functions and one small stateful ``Cutter`` that the follow loop feeds.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cluster.sim.kubelet import logstore

ZERO_TIME_NS = -62135596800 * 1_000_000_000  # Go's zero time.Time (year 1), the default "since"
VALID_STREAMS = ("Stdout", "Stderr", "All")
_INT64 = re.compile(r"[+-]?[0-9]+")


class QueryError(Exception):
    """A request the kubelet refuses before reading any log: its HTTP status and body."""

    def __init__(self, status: int, body: str) -> None:
        super().__init__(body)
        self.status = status
        self.body = body


DECODE_ERROR = (400, '{"message": "Unable to decode query."}')
INVALID = (422, '{"message": "Invalid request."}')


@dataclass(frozen=True)
class LogOptions:
    """``v1.PodLogOptions`` as the kubelet uses it (``None``: not given)."""

    follow: bool = False
    previous: bool = False
    timestamps: bool = False
    tail_lines: int | None = None
    limit_bytes: int | None = None
    since_seconds: int | None = None
    since_time_ns: int | None = None  # ZERO_TIME_NS when given empty
    stream: str | None = None


def _bool(values: Sequence[str]) -> bool:
    """``runtime.Convert_Slice_string_To_bool``: only "0" and "false" (any case) are false."""
    return not (values[0] == "0" or values[0].lower() == "false")


def _int64(values: Sequence[str]) -> int:
    """``strconv.ParseInt(s, 10, 64)``."""
    if not _INT64.fullmatch(values[0]):
        raise QueryError(*DECODE_ERROR)
    value = int(values[0])
    if not -(1 << 63) <= value < (1 << 63):
        raise QueryError(*DECODE_ERROR)
    return value


def _time(values: Sequence[str]) -> int:
    """``metav1.Time.UnmarshalQueryParameter``: RFC3339; empty or "null" is the zero time."""
    if values[0] in ("", "null"):
        return ZERO_TIME_NS
    ns = logstore.parse_stamp(values[0])
    if ns is None:
        raise QueryError(*DECODE_ERROR)
    return ns


def decode(query: Mapping[str, Sequence[str]]) -> LogOptions:
    """The options of a ``/containerLogs`` query, or ``QueryError`` with the kubelet's 400 or 422."""
    q = {k: list(v) for k, v in query.items() if v}
    tail = q.get("tail", [""])[0]
    if tail:  # backwards compatibility: "tail" is "tailLines", and "all" is the same as leaving it out
        q["tailLines"] = [tail]
        if tail == "all":
            del q["tailLines"]
    opts = LogOptions(
        follow=_bool(q["follow"]) if "follow" in q else False,
        previous=_bool(q["previous"]) if "previous" in q else False,
        timestamps=_bool(q["timestamps"]) if "timestamps" in q else False,
        tail_lines=_int64(q["tailLines"]) if "tailLines" in q else None,
        limit_bytes=_int64(q["limitBytes"]) if "limitBytes" in q else None,
        since_seconds=_int64(q["sinceSeconds"]) if "sinceSeconds" in q else None,
        since_time_ns=_time(q["sinceTime"]) if "sinceTime" in q else None,
        stream=q["stream"][0] if "stream" in q else None,
    )
    if problems(opts):
        raise QueryError(*INVALID)
    return opts


def problems(opts: LogOptions) -> list[str]:
    """``ValidatePodLogOptions`` (v1): what is wrong with the options, in the API's words."""
    out = []
    if opts.tail_lines is not None and opts.tail_lines < 0:
        out.append(f"tailLines: Invalid value: {opts.tail_lines}: must be greater than or equal to 0")
    if opts.limit_bytes is not None and opts.limit_bytes < 1:
        out.append(f"limitBytes: Invalid value: {opts.limit_bytes}: must be greater than 0")
    if opts.since_seconds is not None and opts.since_time_ns is not None:
        out.append("Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified")
    elif opts.since_seconds is not None and opts.since_seconds < 1:
        out.append(f"sinceSeconds: Invalid value: {opts.since_seconds}: must be greater than 0")
    if opts.stream is not None:
        if opts.stream not in VALID_STREAMS:
            out.append(f"stream: Unsupported value: {json.dumps(opts.stream)}")
        if opts.stream != "All" and opts.tail_lines is not None:
            out.append("Forbidden: `tailLines` and specific `stream` are mutually exclusive for now")
    return out


def stream_refusal(opts: LogOptions) -> str | None:
    """The kubelet's 400 for a stream it cannot select while ``PodLogsQuerySplitStreams`` is off."""
    if opts.stream is not None and opts.stream != "All":
        return (f"unable to return the given log stream: {json.dumps(opts.stream)}. Please enable "
                "PodLogsQuerySplitStreams feature gate in kubelet")
    return None


def since_ns(opts: LogOptions, now_ns: int) -> int:
    """The oldest time a line may carry: ``sinceSeconds`` before now, or ``sinceTime`` when that is later."""
    since = ZERO_TIME_NS
    if opts.since_seconds is not None:
        since = now_ns - opts.since_seconds * 1_000_000_000
    if opts.since_time_ns is not None and opts.since_time_ns > since:
        since = opts.since_time_ns
    return since


def tail_start(data: bytes, n: int | None) -> int:
    """Where the last ``n`` lines of ``data`` start (``findTailLineStartIndex``: lines are counted by newlines)."""
    if n is None or n < 0:
        return 0
    count, start = data.count(b"\n"), 0
    while count > n:
        start = data.index(b"\n", start) + 1
        count -= 1
    return start


@dataclass(frozen=True)
class Line:
    at_ns: int
    stream: str
    text: bytes  # with its newline, unless the runtime wrote a partial line ("P")


def parse(raw: bytes) -> Line | None:
    """One line of a CRI log file (``parseCRILog``), or None when it is not one."""
    try:
        stamp, stream, tag, text = raw.split(b" ", 3)
    except ValueError:
        return None
    at = logstore.parse_stamp(stamp.decode("ascii", "replace"))
    if at is None or stream not in (b"stdout", b"stderr"):
        return None
    if tag.split(b":")[0] == b"P" and text.endswith(b"\n"):
        text = text[:-1]
    return Line(at, stream.decode(), text)


def split_lines(data: bytes) -> list[bytes]:
    """``data`` cut after each newline (only newlines: a log line may hold a carriage return); an unfinished last
    line is kept."""
    parts = data.split(b"\n")
    lines = [part + b"\n" for part in parts[:-1]]
    return lines + [parts[-1]] if parts[-1] else lines


class Cutter:
    """``logWriter`` of ReadLogs: fed the file's lines in order, returns the bytes to send for each."""

    def __init__(self, opts: LogOptions, now_ns: int) -> None:
        self.opts = opts
        self.since = since_ns(opts, now_ns)
        self.remain = opts.limit_bytes if opts.limit_bytes is not None else 1 << 63
        self.new_line = True
        self.done = False  # the byte limit is reached: send nothing more

    def feed(self, raw: bytes) -> bytes:
        msg = parse(raw)
        if msg is None or self.done:
            return b""
        out = b""
        if msg.at_ns >= self.since:
            out = msg.text
            if self.opts.timestamps and self.new_line:
                out = logstore.format_stamp(msg.at_ns).encode() + b" " + out
            out = out[:self.remain]
            self.remain -= len(out)
            self.done = self.remain <= 0
        self.new_line = not msg.text or msg.text.endswith(b"\n")
        return out


def cut(data: bytes, opts: LogOptions, now_ns: int) -> bytes:
    """The whole reply to a request that does not follow: ``data`` is the container's current log file."""
    cutter = Cutter(opts, now_ns)
    out = []
    lines = split_lines(data[tail_start(data, opts.tail_lines):])
    if opts.tail_lines is not None:
        lines = lines[:opts.tail_lines]
    for raw in lines:
        out.append(cutter.feed(raw))
        if cutter.done:
            break
    return b"".join(out)
