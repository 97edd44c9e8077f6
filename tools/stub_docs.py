"""Write the docstrings of ``python/ferrograd/_C.pyi`` from the built module.

The Rust doc comments of ``src/python/`` are the one source of the ``_C`` docs: PyO3 exposes
them as ``__doc__``, and this script copies each one into the stub (where IDEs read hover docs),
so they are never written twice by hand. The stub's signatures and types stay hand-written.

    python tools/stub_docs.py          # rewrite the stub's docstrings in place
    python tools/stub_docs.py --check  # exit 1 if the committed stub is out of date

A stub function, class, method or property gets the runtime object's ``__doc__``; one whose
runtime object has none (or only CPython's generic text of a slot such as ``__add__``) gets no
docstring. Attribute docstrings (``is_cuda: bool`` then a string) are left alone. Lines longer
than the stub's 100 columns are wrapped; the text is otherwise the runtime's.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import sys
import textwrap
from pathlib import Path
from typing import Any, List, Optional, Tuple

STUB = Path(__file__).resolve().parent.parent / "python" / "ferrograd" / "_C.pyi"
LINE_LENGTH = 100
REGENERATE = "python tools/stub_docs.py"

# Slot wrappers (``__add__``, ``__len__``, ...) carry CPython's generic text, not ours.
_SLOT_TYPES = (type(object.__eq__), type((1).__add__))


def _runtime_doc(obj: Any) -> Optional[str]:
    """``obj``'s own docstring, cleaned like ``inspect.getdoc`` but not inherited; None for a
    slot wrapper or a plain value (a class attribute such as ``is_cuda``)."""
    if isinstance(obj, (staticmethod, classmethod)):
        obj = obj.__func__
    if obj is None or isinstance(obj, _SLOT_TYPES):
        return None
    documented = (
        inspect.isroutine(obj)
        or inspect.isclass(obj)
        or inspect.isgetsetdescriptor(obj)
        or isinstance(obj, property)
    )
    if not documented or getattr(obj, "__name__", "") == "__new__":
        return None
    doc = getattr(obj, "__doc__", None)
    if not isinstance(doc, str) or not doc.strip():
        return None
    return inspect.cleandoc(doc)


def _lookup(module: Any, path: List[str]) -> Any:
    """The runtime object at ``module.<path>`` without running descriptors, or None."""
    obj: Any = module
    for i, name in enumerate(path):
        if i == 0:
            obj = getattr(obj, name, None)
        else:
            obj = next((c.__dict__[name] for c in obj.__mro__ if name in c.__dict__), None)
        if obj is None:
            return None
    return obj


def _format(doc: str, indent: str) -> str:
    """``doc`` as a triple-quoted literal whose lines fit ``LINE_LENGTH`` at ``indent``."""
    doc = doc.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    lines: List[str] = []
    for k, line in enumerate(doc.split("\n")):
        budget = LINE_LENGTH - len(indent) - (3 if k == 0 else 0)
        if len(line) + 3 <= budget:
            lines.append(line)
        else:
            lead = line[: len(line) - len(line.lstrip())]
            wrapped = textwrap.wrap(
                line, width=budget - 3, subsequent_indent=lead, break_long_words=False
            )
            lines.extend(wrapped or [""])
    body = ("\n" + indent).join(lines)
    return f'"""{body}"""'.replace("\n" + indent + "\n", "\n\n")


def _edits(source: str, module: Any) -> List[Tuple[int, int, int, int, str]]:
    """Replacements ``(line0, col0, line1, col1, text)`` (1-based lines) that make every
    docstring of the stub the runtime's."""
    tree = ast.parse(source)
    lines = source.splitlines()
    edits: List[Tuple[int, int, int, int, str]] = []

    def visit(body: List[ast.stmt], prefix: List[str]) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                handle(node, prefix + [node.name])
                visit(node.body, prefix + [node.name])
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                handle(node, prefix + [node.name])

    def handle(node: Any, path: List[str]) -> None:
        doc = _runtime_doc(_lookup(module, path))
        first = node.body[0]
        has_doc = (
            isinstance(first, ast.Expr)
            and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)
        )
        indent = " " * (node.col_offset + 4)
        if has_doc:
            if doc is None:
                text = "..." if len(node.body) == 1 else ""
            else:
                text = _format(doc, indent)
            edits.append(
                (first.lineno, first.col_offset, first.end_lineno, first.end_col_offset, text)
            )
            return
        if doc is None or isinstance(node, ast.ClassDef):
            if doc is not None:
                edits.append(
                    (first.lineno, 0, first.lineno, 0, indent + _format(doc, indent) + "\n")
                )
            return
        # ``def f(...) -> T: ...``: the docstring replaces the ellipsis, on a line of its own.
        is_ellipsis = (
            isinstance(first, ast.Expr)
            and isinstance(first.value, ast.Constant)
            and first.value.value is Ellipsis
        )
        if not is_ellipsis:
            return
        header_end = lines[first.lineno - 1][: first.col_offset].rstrip()
        if header_end.endswith(":") and header_end.strip() != "":
            edits.append(
                (
                    first.lineno,
                    len(header_end),
                    first.end_lineno,
                    first.end_col_offset,
                    "\n" + indent + _format(doc, indent),
                )
            )
        else:
            edits.append(
                (
                    first.lineno,
                    first.col_offset,
                    first.end_lineno,
                    first.end_col_offset,
                    _format(doc, indent),
                )
            )

    visit(tree.body, [])
    return edits


def _apply(source: str, edits: List[Tuple[int, int, int, int, str]]) -> str:
    lines = source.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))

    def pos(line: int, col: int) -> int:
        # ast columns are UTF-8 byte offsets.
        text = lines[line - 1].encode("utf-8")[:col].decode("utf-8")
        return offsets[line - 1] + len(text)

    out = source
    for l0, c0, l1, c1, text in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        a, b = pos(l0, c0), pos(l1, c1)
        out = out[:a] + text + out[b:]
    # A removed docstring can leave a line of only spaces.
    return "\n".join(line.rstrip() for line in out.split("\n"))


def generate(source: str) -> str:
    """The stub ``source`` with every docstring taken from the built ``ferrograd._C``."""
    import ferrograd  # noqa: F401  (attaches the Python-written Tensor members)
    from ferrograd import _C

    return _apply(source, _edits(source, _C))


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report whether it is current")
    args = parser.parse_args(argv)
    source = STUB.read_text()
    new = generate(source)
    if args.check:
        if new != source:
            print(f"{STUB} is out of date; run `{REGENERATE}`", file=sys.stderr)
            return 1
        return 0
    if new != source:
        STUB.write_text(new)
        print(f"rewrote {STUB}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
