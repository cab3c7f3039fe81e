"""Shape measures of the library code (issue 29), read from the source with ``ast`` alone, nothing imported.

``python tests/static/codebase_measures.py`` prints them: the import loops among our own modules (strongly connected
parts of the import graph, counting imports inside functions, leaving out ``if TYPE_CHECKING:`` ones, which never
run), the same counting the ``TYPE_CHECKING`` ones too, the
imports of our own modules made inside a function, the largest modules by lines and the functions longer
than 80 lines. ``test_codebase_measures.py`` holds the rules these figures must keep."""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("cluster", "graders", "labs", "quizzes")
LONG_FUNCTION = 80


@dataclass(frozen=True)
class Import:
    """One import of one of our modules: where it is written and which module it reaches."""

    path: str  # relative to ROOT
    line: int
    source: str  # the importing module
    target: str  # the imported module (the longest dotted prefix that is one of ours)
    inside_function: bool
    type_checking: bool


def modules() -> dict[str, Path]:
    """Every library module by dotted name (``labs/__init__.py`` is ``labs``); the labs' own folders included."""
    out: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in known:
            return candidate
        parts.pop()
    return None


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk(node: ast.AST, in_function: bool, type_checking: bool) -> Iterator[tuple[ast.AST, bool, bool]]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child, in_function, type_checking
        inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        guarded = type_checking or (isinstance(child, ast.If) and _is_type_checking(child.test))
        yield from _walk(child, inner, guarded)


def imports() -> list[Import]:
    """Every import of one of our own modules, in the order written."""
    known = modules()
    out: list[Import] = []
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node, in_function, type_checking in _walk(tree, False, False):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                targets = [f"{base}.{alias.name}" for alias in node.names]
            for target in targets:
                resolved = _resolve(target, known)
                if resolved is not None and resolved != name:
                    rel = str(path.relative_to(ROOT))
                    out.append(Import(rel, node.lineno, name, resolved, in_function, type_checking))
    return out


def loops(type_checking: bool = False) -> list[list[str]]:
    """The import loops: each strongly connected part (two modules or more) of the run-time import graph, or with
    ``type_checking`` of the graph that also counts the imports only a type checker follows."""
    graph: dict[str, set[str]] = {name: set() for name in modules()}
    for imp in imports():
        if type_checking or not imp.type_checking:
            graph[imp.source].add(imp.target)
    # Tarjan's algorithm, iterative so a deep graph cannot hit the recursion limit.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in graph:
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            advanced = False
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                part: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    part.append(member)
                    if member == node:
                        break
                if len(part) > 1:
                    found.append(sorted(part))
    return sorted(found)


def inner_imports() -> list[Import]:
    """Imports of our own modules written inside a function body."""
    return [imp for imp in imports() if imp.inside_function]


def largest(count: int = 10) -> list[tuple[str, int]]:
    sizes = [(str(path.relative_to(ROOT)), len(path.read_text(encoding="utf-8").splitlines()))
             for path in modules().values()]
    return sorted(sizes, key=lambda item: (-item[1], item[0]))[:count]


def long_functions(limit: int = LONG_FUNCTION) -> list[tuple[str, str, int]]:
    """(file, qualified name, lines) of every function or method longer than ``limit`` lines."""
    out: list[tuple[str, str, int]] = []
    for path in modules().values():
        tree = ast.parse(path.read_text(encoding="utf-8"))

        def visit(node: ast.AST, prefix: str) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    qual = f"{prefix}{child.name}"
                    if not isinstance(child, ast.ClassDef):
                        size = (child.end_lineno or child.lineno) - child.lineno + 1
                        if size > limit:
                            out.append((str(path.relative_to(ROOT)), qual, size))
                    visit(child, qual + ".")

        visit(tree, "")
    return sorted(out, key=lambda item: (-item[2], item[0], item[1]))


def report() -> str:
    found = loops()
    typed = loops(type_checking=True)
    inner = inner_imports()
    lines = [f"import loops at run time: {len(found)}"]
    lines += [f"  {' <-> '.join(part)}" for part in found]
    lines.append(f"import loops counting TYPE_CHECKING imports: {len(typed)}")
    lines += [f"  {' <-> '.join(part)}" for part in typed if part not in found]
    lines.append(f"imports of our own modules inside functions: {len(inner)}")
    lines.append("largest modules:")
    lines += [f"  {size:6d}  {path}" for path, size in largest()]
    long = long_functions()
    lines.append(f"functions over {LONG_FUNCTION} lines: {len(long)}")
    lines += [f"  {size:6d}  {path}:{name}" for path, name, size in long]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(report() + "\n")
