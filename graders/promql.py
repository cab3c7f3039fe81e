"""A small, honest PromQL reader: tokenizer, parser and instant-vector evaluator for the subset alert rules on
node resources use.

Covered (the grammar of the Prometheus docs, “Querying basics” and “Operators”): vector selectors with label
matchers (``=``, ``!=``, ``=~``, ``!~``), numbers, parentheses, unary minus, the arithmetic, comparison (with
``bool``) and set operators (``and``, ``or``, ``unless``) with one-to-one matching (``on``/``ignoring``), and the
aggregations ``sum``, ``min``, ``max``, ``avg``, ``count`` with ``by``/``without``. Anything else (range
selectors, functions, ``offset``, group modifiers) parses into a ``PromQLError`` that names it: the lab's
checks then say what gpulab cannot evaluate, never a wrong verdict. Plain data: no cluster, no network.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import re2

from cluster import errors


class PromQLError(errors.CourseError):
    """An expression gpulab cannot read or evaluate, with the position and the reason in words."""


_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
  | (?P<ident>[a-zA-Z_:][a-zA-Z0-9_:]*)
  | (?P<op>==|!=|<=|>=|=~|!~|[-+*/%^<>=(){}\[\],])
""", re.X)
_CMP = ("==", "!=", "<", ">", "<=", ">=")
_PRECEDENCE: tuple[tuple[str, ...], ...] = (("or",), ("and", "unless"), _CMP, ("+", "-"), ("*", "/", "%"))
AGGREGATIONS = ("sum", "min", "max", "avg", "count")
_UNSUPPORTED = ("offset", "group_left", "group_right", "@")


@dataclass(frozen=True)
class Token:
    kind: str
    text: str
    pos: int


def tokenize(text: str) -> list[Token]:
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise PromQLError(f"unexpected character {text[pos]!r} at position {pos + 1}")
        if m.lastgroup != "ws":
            out.append(Token(str(m.lastgroup), m.group(), pos))
        pos = m.end()
    return out


# A learner writes the regex of a =~ or !~ matcher: it runs under RE2, as in Prometheus (Go's regexp is RE2), so
# matching takes time linear in the label value whatever the pattern, and `.` matches a newline as there (the
# `(?s:` of its label matcher); a pattern past this size is refused.
MAX_PATTERN = 1024
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.max_mem = 1 << 20


def compile_label_regex(value: str) -> Any:
    """A label matcher's regex, anchored at both ends as Prometheus anchors it, compiled by RE2; a pattern RE2
    refuses (or one too large) is a ``PromQLError`` that says why."""
    if len(value) > MAX_PATTERN:
        raise PromQLError(f"a label regex of {len(value)} characters is longer than gpulab reads ({MAX_PATTERN})")
    try:
        re2.compile(value, _RE2_OPTIONS)  # on its own first: "a)|(b" must not pass through the wrapping group
        return re2.compile(f"^(?s:{value})$", _RE2_OPTIONS)  # Prometheus model/labels/regexp.go wraps it so
    except re2.error as exc:
        raise PromQLError(f"{value!r} is not a valid regular expression (RE2 syntax, as in Prometheus): "
                          f"{exc}") from None


@dataclass(frozen=True)
class Matcher:
    label: str
    op: str
    value: str
    pattern: Any = field(default=None, compare=False, repr=False)  # compiled by RE2 for =~ and !~

    def __post_init__(self) -> None:
        if self.op in ("=~", "!~") and self.pattern is None:
            object.__setattr__(self, "pattern", compile_label_regex(self.value))

    def test(self, labels: Mapping[str, str]) -> bool:
        got = labels.get(self.label, "")
        if self.op in ("=", "!="):
            return (got == self.value) == (self.op == "=")
        return (self.pattern.search(got) is not None) == (self.op == "=~")


@dataclass(frozen=True)
class Selector:
    metric: str
    matchers: tuple[Matcher, ...]


@dataclass(frozen=True)
class Number:
    value: float


@dataclass(frozen=True)
class Binary:
    op: str
    left: Expr
    right: Expr
    bool_mod: bool = False
    on: tuple[str, ...] | None = None  # None: match on every label (except the metric name)
    ignoring: tuple[str, ...] = ()


@dataclass(frozen=True)
class Aggregate:
    op: str
    expr: Expr
    by: tuple[str, ...] | None
    without: tuple[str, ...] = ()


@dataclass(frozen=True)
class Negate:
    expr: Expr


Expr = Selector | Number | Binary | Aggregate | Negate


class _Parser:
    def __init__(self, text: str) -> None:
        self.text, self.tokens, self.i = text, tokenize(text), 0

    def peek(self, ahead: int = 0) -> Token | None:
        j = self.i + ahead
        return self.tokens[j] if j < len(self.tokens) else None

    def take(self, want: str | None = None) -> Token:
        tok = self.peek()
        if tok is None:
            raise PromQLError(f"the expression ends early{f' (expected {want!r})' if want else ''}")
        if want is not None and tok.text != want:
            raise PromQLError(f"expected {want!r} at position {tok.pos + 1}, found {tok.text!r}")
        self.i += 1
        return tok

    def parse(self) -> Expr:
        if not self.tokens:
            raise PromQLError("the expression is empty")
        expr = self.binary(0)
        if self.peek() is not None:
            tok = self.take()
            raise PromQLError(f"unexpected {tok.text!r} at position {tok.pos + 1}")
        return expr

    def binary(self, level: int) -> Expr:
        if level == len(_PRECEDENCE):
            return self.unary()
        left = self.binary(level + 1)
        while (tok := self.peek()) is not None and tok.text in _PRECEDENCE[level] and tok.kind in ("op", "ident"):
            self.take()
            bool_mod = False
            if self.peek() is not None and self.peek().text == "bool":  # type: ignore[union-attr]
                if tok.text not in _CMP:
                    raise PromQLError(f"`bool` only follows a comparison, not {tok.text!r}")
                self.take()
                bool_mod = True
            on, ignoring = self.matching()
            right = self.binary(level + 1)
            left = Binary(tok.text, left, right, bool_mod, on, ignoring)
        return left

    def matching(self) -> tuple[tuple[str, ...] | None, tuple[str, ...]]:
        tok = self.peek()
        if tok is None or tok.text not in ("on", "ignoring"):
            return None, ()
        self.take()
        labels = self.label_list()
        nxt = self.peek()
        if nxt is not None and nxt.text in ("group_left", "group_right"):
            raise PromQLError(f"{nxt.text} (many-to-one matching) is not evaluated by gpulab")
        return (labels, ()) if tok.text == "on" else (None, labels)

    def label_list(self) -> tuple[str, ...]:
        self.take("(")
        out: list[str] = []
        while (tok := self.peek()) is not None and tok.text != ")":
            if tok.kind != "ident":
                raise PromQLError(f"expected a label name at position {tok.pos + 1}, found {tok.text!r}")
            out.append(self.take().text)
            if self.peek() is not None and self.peek().text == ",":  # type: ignore[union-attr]
                self.take()
        self.take(")")
        return tuple(out)

    def unary(self) -> Expr:
        tok = self.peek()
        if tok is not None and tok.text in ("-", "+"):
            self.take()
            inner = self.unary()
            return Negate(inner) if tok.text == "-" else inner
        return self.primary()

    def primary(self) -> Expr:
        tok = self.take()
        if tok.kind == "number":
            return self.after(Number(float(tok.text)))
        if tok.text == "(":
            inner = self.binary(0)
            self.take(")")
            return self.after(inner)
        if tok.text == "{":
            self.i -= 1
            return self.after(Selector("", self.matchers()))
        if tok.kind != "ident":
            raise PromQLError(f"unexpected {tok.text!r} at position {tok.pos + 1}")
        if tok.text in AGGREGATIONS:
            return self.aggregate(tok.text)
        nxt = self.peek()
        if nxt is not None and nxt.text == "(":
            raise PromQLError(f"the function {tok.text}() is not evaluated by gpulab (only selectors, operators "
                              f"and {', '.join(AGGREGATIONS)})")
        matchers = self.matchers() if nxt is not None and nxt.text == "{" else ()
        return self.after(Selector(tok.text, matchers))

    def after(self, expr: Expr) -> Expr:
        tok = self.peek()
        if tok is not None and tok.text == "[":
            raise PromQLError(f"a range selector ([...] at position {tok.pos + 1}) gives a range vector; an alert "
                              f"expression needs an instant vector")
        if tok is not None and tok.text in _UNSUPPORTED:
            raise PromQLError(f"{tok.text!r} is not evaluated by gpulab")
        return expr

    def matchers(self) -> tuple[Matcher, ...]:
        self.take("{")
        out: list[Matcher] = []
        while (tok := self.peek()) is not None and tok.text != "}":
            if tok.kind != "ident":
                raise PromQLError(f"expected a label name at position {tok.pos + 1}, found {tok.text!r}")
            label = self.take().text
            op = self.take()
            if op.text not in ("=", "!=", "=~", "!~"):
                raise PromQLError(f"expected =, !=, =~ or !~ after {label} at position {op.pos + 1}")
            value = self.take()
            if value.kind != "string":
                raise PromQLError(f"a label value is a quoted string: {label}{op.text}{value.text!r} at position "
                                  f"{value.pos + 1}")
            out.append(Matcher(label, op.text, _unquote(value.text)))
            if self.peek() is not None and self.peek().text == ",":  # type: ignore[union-attr]
                self.take()
        self.take("}")
        return tuple(out)

    def aggregate(self, op: str) -> Expr:
        by: tuple[str, ...] | None = None
        without: tuple[str, ...] = ()
        tok = self.peek()
        if tok is not None and tok.text in ("by", "without"):
            self.take()
            labels = self.label_list()
            by, without = (labels, ()) if tok.text == "by" else (None, labels)
        self.take("(")
        inner = self.binary(0)
        self.take(")")
        tok = self.peek()
        if tok is not None and tok.text in ("by", "without") and by is None and not without:
            self.take()
            labels = self.label_list()
            by, without = (labels, ()) if tok.text == "by" else (None, labels)
        return self.after(Aggregate(op, inner, by if by is not None or without else (), without))


def _unquote(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text[1:-1])


def parse(text: str) -> Expr:
    """The expression's tree, or ``PromQLError`` with what is wrong and where."""
    return _Parser(text).parse()


def selectors(expr: Expr) -> list[Selector]:
    """Every vector selector in ``expr``, left to right."""
    if isinstance(expr, Selector):
        return [expr]
    if isinstance(expr, Binary):
        return selectors(expr.left) + selectors(expr.right)
    if isinstance(expr, (Aggregate, Negate)):
        return selectors(expr.expr)
    return []


# --- evaluation ------------------------------------------------------------------------------------------------

Labels = tuple[tuple[str, str], ...]
Vector = dict[Labels, float]  # labels (with __name__ for raw series) -> value
Series = Sequence[tuple[Mapping[str, str], float]]


def _key(labels: Mapping[str, str]) -> Labels:
    return tuple(sorted(labels.items()))


def _drop_name(v: Vector) -> Vector:
    return {tuple(kv for kv in k if kv[0] != "__name__"): x for k, x in v.items()}


_ARITH: dict[str, Callable[[float, float], float]] = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "/": lambda a, b: a / b if b else float("nan"), "%": lambda a, b: a % b if b else float("nan"),
}
_COMPARE: dict[str, Callable[[float, float], bool]] = {
    "==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b, ">": lambda a, b: a > b,
    "<=": lambda a, b: a <= b, ">=": lambda a, b: a >= b,
}


def evaluate(expr: Expr, series: Series) -> Vector | float:
    """``expr`` at one instant over ``series`` (each: labels with ``__name__``, value): a vector or a scalar."""
    if isinstance(expr, Number):
        return expr.value
    if isinstance(expr, Selector):
        return {_key(lab): val for lab, val in series
                if (not expr.metric or lab.get("__name__") == expr.metric) and all(m.test(lab) for m in expr.matchers)}
    if isinstance(expr, Negate):
        inner = evaluate(expr.expr, series)
        return -inner if isinstance(inner, float) else {k: -v for k, v in _drop_name(inner).items()}
    if isinstance(expr, Aggregate):
        return _aggregate(expr, evaluate(expr.expr, series))
    return _binary(expr, evaluate(expr.left, series), evaluate(expr.right, series))


def _aggregate(expr: Aggregate, inner: Vector | float) -> Vector:
    if isinstance(inner, float):
        raise PromQLError(f"{expr.op}() needs a vector, not a number")
    groups: dict[Labels, list[float]] = {}
    for labels, value in inner.items():
        kept = tuple(kv for kv in labels if kv[0] != "__name__" and
                     (kv[0] in expr.by if expr.by is not None else kv[0] not in expr.without))
        groups.setdefault(kept, []).append(value)
    fold: dict[str, Callable[[list[float]], float]] = {
        "sum": sum, "min": min, "max": max, "avg": lambda xs: sum(xs) / len(xs), "count": lambda xs: float(len(xs))}
    return {k: fold[expr.op](xs) for k, xs in groups.items()}


def _signature(labels: Labels, expr: Binary) -> Labels:
    if expr.on is not None:
        return tuple(kv for kv in labels if kv[0] in expr.on)
    return tuple(kv for kv in labels if kv[0] != "__name__" and kv[0] not in expr.ignoring)


def _binary(expr: Binary, left: Vector | float, right: Vector | float) -> Vector | float:
    op = expr.op
    if op in ("and", "or", "unless"):
        if isinstance(left, float) or isinstance(right, float):
            raise PromQLError(f"{op!r} works on two vectors")
        rsigs = {_signature(k, expr) for k in right}
        if op == "and":
            return {k: v for k, v in left.items() if _signature(k, expr) in rsigs}
        if op == "unless":
            return {k: v for k, v in left.items() if _signature(k, expr) not in rsigs}
        lsigs = {_signature(k, expr) for k in left}
        return {**left, **{k: v for k, v in right.items() if _signature(k, expr) not in lsigs}}
    if isinstance(left, float) and isinstance(right, float):
        if op in _COMPARE:
            if not expr.bool_mod:
                raise PromQLError("comparisons between two numbers need `bool`")
            return float(_COMPARE[op](left, right))
        return _ARITH[op](left, right)
    pairs: list[tuple[Labels, float, float, Labels]] = []  # (result labels, l, r, left labels)
    if isinstance(left, float) or isinstance(right, float):
        vec, num = (right, left) if isinstance(left, float) else (left, right)
        assert not isinstance(vec, float) and isinstance(num, float)
        for k, v in vec.items():
            lv, rv = (num, v) if isinstance(left, float) else (v, num)
            pairs.append((k, lv, rv, k))
    else:
        by_sig: dict[Labels, tuple[Labels, float]] = {}
        for k, v in right.items():
            sig = _signature(k, expr)
            if sig in by_sig:
                raise PromQLError("many-to-many matching: two series on the right side have the same labels "
                                  "(use on(...) or ignoring(...), or aggregate first)")
            by_sig[sig] = (k, v)
        for k, v in left.items():
            hit = by_sig.get(_signature(k, expr))
            if hit is not None:
                pairs.append((_signature(k, expr) if expr.on is not None else k, v, hit[1], k))
    out: Vector = {}
    for labels, lv, rv, left_labels in pairs:
        if op in _COMPARE:
            ok = _COMPARE[op](lv, rv)
            if expr.bool_mod:
                out[tuple(kv for kv in labels if kv[0] != "__name__")] = float(ok)
            elif ok:
                out[left_labels if not isinstance(left, float) else labels] = lv
        else:
            out[tuple(kv for kv in labels if kv[0] != "__name__")] = _ARITH[op](lv, rv)
    return out
