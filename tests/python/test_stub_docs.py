"""The docstrings of ``_C.pyi`` are the Rust doc comments of the built module, and every public
``_C`` function, class and method the stub declares has one (the docs live once, in Rust)."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _tool():
    spec = importlib.util.spec_from_file_location("stub_docs", ROOT / "tools" / "stub_docs.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["stub_docs"] = module
    spec.loader.exec_module(module)
    return module


def test_stub_docstrings_are_the_runtime_docs():
    tool = _tool()
    source = tool.STUB.read_text()
    assert tool.generate(source) == source, (
        f"{tool.STUB} docstrings differ from the Rust doc comments of the built module; "
        f"run `{tool.REGENERATE}` (after `maturin develop`) and commit the result"
    )


def test_public_members_have_runtime_docs():
    from ferrograd import _C

    tool = _tool()
    tree = ast.parse(tool.STUB.read_text())
    missing = []

    def visit(body, prefix):
        for node in body:
            if not isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                continue
            path = prefix + [node.name]
            public = not node.name.startswith("__") or node.name in ("__getitem__", "__setitem__")
            if public and tool._runtime_doc(tool._lookup(_C, path)) is None:
                slot = isinstance(tool._lookup(_C, path), tool._SLOT_TYPES)
                if not slot and node.name != "__new__":
                    missing.append(".".join(path))
            if isinstance(node, ast.ClassDef):
                visit(node.body, path)

    visit(tree.body, [])
    assert not missing, f"_C members without a Rust doc comment: {missing}"
