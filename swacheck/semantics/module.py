"""One file's facts: its imports, classes, functions and module-level values.

:func:`module_facts` parses nothing itself: it takes CPython's tree of the file and
returns a :class:`ModuleFacts`, plain picklable data computed once per file version and
cached. Every function and method is declared (its signature); those whose source holds
a word of the model's vocabulary (``relevant``) are also executed symbolically
(:mod:`swacheck.semantics.function`), which is where the time goes. The module's own
top level is executed too, so module-level tables and constants have values.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from swacheck.semantics.function import (
    Analysis,
    Columns,
    FunctionFacts,
    Scope,
    Span,
    analyse,
    decorator_names,
    dotted,
    signature,
    span_of,
)
from swacheck.semantics.terms import Global, Term

LINE_BREAK = re.compile(r"\r\n|\r|\n")


@dataclass
class ClassFacts:
    key: str  # within its module: ``Outer.Inner`` for a nested class
    name: str
    # Bases as the module spells them, qualified through its imports.
    bases: tuple[str, ...]
    decorators: tuple[str, ...]
    # Class-level annotated names (dataclass fields): name, annotation text, default.
    fields: tuple[tuple[str, str, Term | None], ...]
    # Class-level plain assignments: name, value.
    constants: tuple[tuple[str, Term], ...]
    methods: tuple[str, ...]
    span: Span

    @property
    def is_dataclass(self) -> bool:
        return any(
            d.rsplit(".", 1)[-1] in ("dataclass", "define", "frozen") for d in self.decorators
        )


@dataclass
class ModuleFacts:
    path: str  # relative to the project root, ``/``-separated
    module: str  # dotted module name
    imports: dict[str, str] = field(default_factory=dict)
    classes: dict[str, ClassFacts] = field(default_factory=dict)
    functions: dict[str, FunctionFacts] = field(default_factory=dict)
    # Module-level names and the values they hold at the end of the top level.
    globals: dict[str, Term] = field(default_factory=dict)
    # The facts of the module's top level as a function (key ``<module>``).
    top: FunctionFacts | None = None


def module_name(path: str) -> str:
    """``pkg/sub/mod.py`` -> ``pkg.sub.mod`` (``__init__`` is the package)."""
    parts = path.replace("\\", "/").split("/")
    if parts and parts[-1].endswith(".py"):
        parts[-1] = parts[-1][:-3]
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join(p for p in parts if p and p != ".")


def _imports(tree: ast.Module, module: str, is_package: bool) -> dict[str, str]:
    """The names the module's top level imports (also under ``if``/``try``), qualified;
    a function's own imports are its locals."""
    found: dict[str, str] = {}
    package = module if is_package else module.rpartition(".")[0]
    stack: list[ast.stmt] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    found[alias.asname] = alias.name
                else:
                    head = alias.name.split(".", 1)[0]
                    found.setdefault(head, head)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".") if package else []
                parts = parts[: len(parts) - (node.level - 1)] if node.level > 1 else parts
                base = ".".join([*parts, *([node.module] if node.module else [])])
            for alias in node.names:
                if alias.name == "*":
                    continue
                found[alias.asname or alias.name] = f"{base}.{alias.name}" if base else alias.name
        elif isinstance(node, ast.If | ast.Try | ast.With):
            for part in ("body", "orelse", "finalbody"):
                stack.extend(getattr(node, part, []) or [])
            for handler in getattr(node, "handlers", []):
                stack.extend(handler.body)
    return found


def module_facts(
    tree: ast.Module,
    text: str,
    path: str,
    relevant: Callable[[str], bool] | None = None,
) -> ModuleFacts:
    """The facts of one parsed file (see the module docstring). ``relevant`` tells,
    from a function's source text, whether to execute it; ``None``: every function."""
    lines = LINE_BREAK.split(text)
    columns = Columns(lines)
    module = module_name(path)
    is_package = path.replace("\\", "/").endswith("__init__.py")
    facts = ModuleFacts(
        path=path,
        module=module,
        imports=_imports(tree, module, is_package),
    )
    defined = {name for node in tree.body for name in _defines(node)}
    classes = {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
    scope = Scope(module, facts.imports, defined, classes)
    offsets = _line_offsets(text)

    def source_of(node: ast.AST) -> str:
        start = offsets[node.lineno - 1] if node.lineno - 1 < len(offsets) else len(text)  # type: ignore[attr-defined]
        end_line = node.end_lineno or node.lineno  # type: ignore[attr-defined]
        end = offsets[end_line] if end_line < len(offsets) else len(text)
        return text[start:end]

    chosen = None if relevant is None else _selected(tree, source_of, relevant)

    def function(node: ast.FunctionDef | ast.AsyncFunctionDef, key: str, cls: str | None) -> None:
        if chosen is None or node in chosen:
            source = source_of(node)
            for found in analyse(node, key, cls, scope, columns, ":=" in source):
                facts.functions[found.key] = found
        else:
            facts.functions[key] = signature(node, key, cls, columns)

    def visit(body: list[ast.stmt], prefix: str, cls: str | None) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                function(node, f"{prefix}{node.name}", cls)
            elif isinstance(node, ast.ClassDef):
                key = f"{prefix}{node.name}"
                facts.classes[key] = _class_facts(node, key, scope, columns)
                body = [s for s in node.body if not isinstance(s, _DEFINITIONS)]
                if body and (relevant is None or relevant(source_of(node))):
                    # the class body's own statements (fields, their defaults)
                    facts.functions[f"{key}.<body>"] = _body(
                        body, f"{key}.<body>", key, scope, columns, node
                    )
                visit(node.body, key + ".", key)
            elif isinstance(node, ast.If | ast.Try | ast.With):
                # definitions under ``if TYPE_CHECKING:``, ``try: import ...`` and the like
                for part in ("body", "orelse", "finalbody"):
                    visit(getattr(node, part, []) or [], prefix, cls)
                for handler in getattr(node, "handlers", []):
                    visit(handler.body, prefix, cls)

    visit(tree.body, "", None)
    top_level = [n for n in tree.body if not isinstance(n, _DEFINITIONS)]
    if relevant is not None and not relevant(text):
        top_level = []
    if top_level:
        analysis = Analysis(_wrap(top_level, "<module>", tree), "<module>", None, scope, columns)
        facts.top = analysis.run()
        facts.globals = {
            name: value for name, value in analysis.state.env.items() if name in defined
        }
    return facts


_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
# Functions of at most this many statements are analysed whatever they mention: helpers
# (``_alloc_buffer``) are short, and a short function costs little. Statements, not rows:
# a comment or a blank line changes no file's facts but their positions. Seven statements
# choose 19,900 of SGLang 0.5.23's 32,000 functions (twelve rows chose 16,300): a
# six-statement reset of a runner's buffers that names no SWA word is one of them.
SHORT_FUNCTION = 7


def _short(node: ast.AST) -> bool:
    count = 0
    for inner in ast.walk(node):
        if isinstance(inner, ast.stmt):
            count += 1
            if count > SHORT_FUNCTION + 1:  # the definition itself is one
                return False
    return True


def _selected(
    tree: ast.Module, source_of: Callable[[ast.AST], str], relevant: Callable[[str], bool]
) -> set[ast.AST]:
    """The functions to execute: those whose text is ``relevant``, the short ones, and
    every function of the file they call (by name), transitively."""
    functions: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
    stack: list[ast.stmt] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            functions.append(node)
        elif isinstance(node, ast.ClassDef | ast.If | ast.Try | ast.With):
            for part in ("body", "orelse", "finalbody"):
                stack.extend(getattr(node, part, []) or [])
            for handler in getattr(node, "handlers", []):
                stack.extend(handler.body)
    by_name: dict[str, list[ast.AST]] = {}
    for node in functions:
        by_name.setdefault(node.name, []).append(node)
    chosen: set[ast.AST] = set()
    todo = [node for node in functions if _short(node) or relevant(source_of(node))]
    while todo:
        node = todo.pop()
        if node in chosen:
            continue
        chosen.add(node)
        for inner in ast.walk(node):
            if isinstance(inner, ast.Call):
                func = inner.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
                todo.extend(n for n in by_name.get(name or "", ()) if n not in chosen)
    return chosen


def _wrap(body: list[ast.stmt], name: str, where: ast.AST) -> ast.FunctionDef:
    """``body`` as the body of a function without parameters (a module's or a class's
    own statements, executed like a function's)."""
    return ast.FunctionDef(
        name=name,
        args=ast.arguments([], [], None, [], [], None, []),
        body=body,
        decorator_list=[],
        returns=None,
        type_comment=None,
        lineno=getattr(where, "lineno", 1),
        col_offset=getattr(where, "col_offset", 0),
        end_lineno=getattr(where, "end_lineno", 1),
        end_col_offset=getattr(where, "end_col_offset", 0),
    )


def _body(
    body: list[ast.stmt], key: str, cls: str, scope: Scope, columns: Columns, node: ast.ClassDef
) -> FunctionFacts:
    facts = Analysis(_wrap(body, "<body>", node), key, None, scope, columns).run()
    facts.cls = cls
    facts.decorators = ("staticmethod",)  # no receiver
    return facts


def _defines(node: ast.stmt) -> list[str]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [node.name]
    names: list[str] = []
    if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            for inner in ast.walk(target):
                if isinstance(inner, ast.Name):
                    names.append(inner.id)
    elif isinstance(node, ast.If | ast.Try | ast.With):
        for part in ("body", "orelse", "finalbody"):
            for inner in getattr(node, part, []) or []:
                names += _defines(inner)
        for handler in getattr(node, "handlers", []):
            for inner in handler.body:
                names += _defines(inner)
    return names


def _line_offsets(text: str) -> list[int]:
    offsets = [0]
    for match in LINE_BREAK.finditer(text):
        offsets.append(match.end())
    return offsets


def _class_facts(node: ast.ClassDef, key: str, scope: Scope, columns: Columns) -> ClassFacts:
    bases = []
    for base in node.bases:
        name = dotted(base.value if isinstance(base, ast.Subscript) else base)
        if name:
            head, _, rest = name.partition(".")
            qualified = scope.global_name(head)
            bases.append(f"{qualified}.{rest}" if rest else qualified)
    fields: list[tuple[str, str, Term | None]] = []
    constants: list[tuple[str, Term]] = []
    methods: list[str] = []
    for statement in node.body:
        if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
            default = _literal(statement.value, scope) if statement.value is not None else None
            fields.append((statement.target.id, ast.unparse(statement.annotation), default))
        elif isinstance(statement, ast.Assign):
            for target in statement.targets:
                if isinstance(target, ast.Name):
                    constants.append((target.id, _literal(statement.value, scope)))
        elif isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef):
            methods.append(statement.name)
    return ClassFacts(
        key=key,
        name=node.name,
        bases=tuple(bases),
        decorators=decorator_names(node),
        fields=tuple(fields),
        constants=tuple(constants),
        methods=tuple(methods),
        span=span_of(node, columns),
    )


def _literal(node: ast.expr, scope: Scope) -> Term:
    """A class-level value: constants, names and calls, without executing anything."""
    analysis = Analysis(_wrap([], "<class>", node), "<class>", None, scope, Columns([]))
    return analysis.ev(node)


__all__ = ["ClassFacts", "Global", "ModuleFacts", "module_facts", "module_name"]
