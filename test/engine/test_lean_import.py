"""The serving import path stays lean: the modules sglang loads to serve DDTREE pull in nothing
from ``sglang_ddtree.testing`` (test helpers, tiny models) or ``sglang_ddtree.demo`` (the
SmolLM2 converter, the drafter trainer), neither when imported nor through an import written
inside a function. (The test plugin is loaded by name only when a test variable of config.py is
set: ``plugin.register``.)"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "sglang_ddtree"
NOT_SERVING = ("sglang_ddtree.testing", "sglang_ddtree.demo")
# Where these lived before they moved under testing/ and demo/: an import of one is also broken.
OLD = ("sglang_ddtree.tiny_models", "sglang_ddtree.real_models", "sglang_ddtree.train_dflash")
SERVING = ("sglang_ddtree.plugin", "sglang_ddtree.config", "sglang_ddtree.worker")


_PROBE = """
import importlib, importlib.util, json, sys
out = {}
for name in sys.argv[1:]:
    if importlib.util.find_spec(name) is None:
        out[name] = None
        continue
    importlib.import_module(name)
    out[name] = sorted(m for m in sys.modules if m.startswith(%r))
print(json.dumps(out))
""" % (NOT_SERVING,)


@pytest.fixture(scope="module")
def loaded():
    """{serving module: test / demo modules in sys.modules after importing it (and the ones
    before it), or None where the module does not exist}, from one fresh interpreter."""
    r = subprocess.run([sys.executable, "-c", _PROBE, *SERVING], capture_output=True, text=True,
                       timeout=600, env=os.environ.copy())
    assert r.returncode == 0, r.stderr[-4000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("module", SERVING)
def test_serving_import_loads_no_test_or_demo_module(loaded, module):
    if loaded[module] is None:
        pytest.skip(f"{module} does not exist in this tree")
    assert loaded[module] == [], f"importing {module} loaded {loaded[module]}"


def _imports(path: Path):
    """Absolute names of the modules ``path`` imports, at any depth of the file (``from X import
    y`` names X, and X.y too where y is a module of this package)."""
    package = list(path.relative_to(PACKAGE.parent).parts[:-1])
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            yield mod
            where = PACKAGE.parent.joinpath(*mod.split("."))
            for a in node.names:
                if (where / f"{a.name}.py").exists() or (where / a.name).is_dir():
                    yield f"{mod}.{a.name}"


def test_serving_code_never_imports_test_or_demo_modules():
    found = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] in ("testing", "demo"):
            continue
        found |= {(rel.as_posix(), n) for n in _imports(path) if n.startswith(NOT_SERVING + OLD)}
    # `from ..testing import tiny_models` names the package and the module: keep the module.
    found = {(f, n) for f, n in found if not any(g == f and m.startswith(f"{n}.") for g, m in found)}
    assert not found, f"serving code imports test / demo modules: {sorted(found)}"
