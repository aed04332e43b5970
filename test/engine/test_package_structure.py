"""The package's shape, checked from its source: no import cycle between its modules (module-level
and function-local imports alike), the core and the kernels import no sglang, every
``SGLANG_DDTREE_*`` variable is declared in config.py and read nowhere else, and no code, test or
docstring names a numbered work session (history lives in git and RESULTS)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "python" / "sglang_ddtree"


def _modules():
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imports(name: str, path: Path, known) -> set:
    """Package modules ``name`` imports anywhere in its file."""
    tree = ast.parse(path.read_text())
    is_pkg = path.name == "__init__.py"
    base = name.split(".") if is_pkg else name.split(".")[:-1]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                root = base[: len(base) - (node.level - 1)]
                mod = ".".join(root + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            targets = [mod] + [f"{mod}.{a.name}" for a in node.names]
        else:
            continue
        for t in targets:
            # the longest known module prefix of the target
            parts = t.split(".")
            for i in range(len(parts), 0, -1):
                cand = ".".join(parts[:i])
                if cand in known and cand != name:
                    found.add(cand)
                    break
    # importlib.import_module("sglang_ddtree....") with a literal name
    for m in re.findall(r"import_module\(\"(sglang_ddtree[\w.]*)\"\)", path.read_text()):
        if m in known:
            found.add(m)
    return found


def _graph():
    mods = _modules()
    graph = {name: _imports(name, path, mods) for name, path in mods.items()}
    # A package's __init__ is imported with every submodule; it must not close a cycle either.
    return graph


def _cycle(graph):
    color, stack = {}, []

    def visit(n):
        color[n] = 1
        stack.append(n)
        for m in sorted(graph[n]):
            if color.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if color.get(m) is None:
                c = visit(m)
                if c:
                    return c
        stack.pop()
        color[n] = 2
        return None

    for n in sorted(graph):
        if color.get(n) is None:
            c = visit(n)
            if c:
                return c
    return None


def test_no_import_cycle():
    graph = _graph()
    assert "sglang_ddtree.worker" in graph and graph["sglang_ddtree.worker"]
    cycle = _cycle(graph)
    assert cycle is None, " -> ".join(cycle)


def test_the_cycle_check_sees_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_core_and_kernels_import_no_sglang():
    for path in list((PKG / "core").rglob("*.py")) + list((PKG / "kernels").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            assert not any(n == "sglang" or n.startswith("sglang.") for n in names), (path, names)


def test_environment_variables_are_declared_and_read_in_config_only():
    from sglang_ddtree import config

    assert config.REGISTRY and all(v.kind in config.KINDS and v.doc for v in config.REGISTRY.values())
    for path in PKG.rglob("*.py"):
        if path.name == "config.py" and path.parent == PKG:
            continue
        text = path.read_text()
        names = set(re.findall(r"SGLANG_DDTREE_[A-Z0-9_]+", text))
        # Docstrings may name a variable; code reads it through config only.
        code = ast.unparse(_strip_docstrings(ast.parse(text)))
        in_code = set(re.findall(r"SGLANG_DDTREE_[A-Z0-9_]+", code))
        assert not in_code, (path, in_code)
        assert names <= set(config.REGISTRY), (path, names - set(config.REGISTRY))
        assert "os.environ.get(\"SGLANG_DDTREE" not in text


def _strip_docstrings(tree):
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
                    and isinstance(body[0].value.value, str):
                body[0] = ast.Pass()
    return tree


def test_no_numbered_work_sessions_in_code():
    pattern = re.compile(r"\bsessions? \d+", re.IGNORECASE)
    root = PKG.parents[1]
    files = [p for p in PKG.rglob("*") if p.suffix in (".py", ".cu", ".cpp", ".h", ".md")]
    # Tests, benchmark scripts and the scripts too (the recorded call scripts under
    # benchmark/ddtree/results/ are records of what ran, and stay as they ran).
    files += list((root / "test").rglob("*.py")) + list((root / "benchmark" / "ddtree").glob("*.py"))
    files += [p for p in (root / "scripts").glob("*") if p.is_file()]
    hits = [f"{p}:{i + 1}" for p in files for i, line in enumerate(p.read_text(errors="replace").splitlines())
            if pattern.search(line)]
    assert not hits, hits[:20]
