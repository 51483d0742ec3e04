"""The entry points the engine calls: a file's facts, the project's analysis, one file's
view of it for the rules.

* :func:`file_facts` — the first pass over one file: CPython's parse of its bytes and
  the :class:`~swacheck.semantics.module.ModuleFacts` of it;
* :class:`Analysis` — the project (every file's facts), the engine's model and the value
  queries, built once per audit and shared by every file's check;
* :class:`FileUnit` — what a rule's query reads of one file: its functions in the
  project, and the analysis.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from swacheck.engine.decoding import decode_source
from swacheck.semantics.model import DEFAULT_ENGINE, Model, engine_of, model_for
from swacheck.semantics.module import ModuleFacts, module_facts
from swacheck.semantics.project import Function, Project
from swacheck.semantics.values import Values


def file_facts(path: str, data: bytes, model: Model | None = None) -> ModuleFacts:
    """The facts of one file (``path`` relative to the project root); raises
    ``SyntaxError``/``ValueError`` for a file CPython does not read. With ``model``, only
    the functions worth it are executed (``Model.relevance``, the short ones and what
    they call); the others are declared."""
    tree = ast.parse(data, filename=path)
    relevant = model.relevance.search if model is not None else None
    return module_facts(tree, decode_source(data).text, path, relevant)


class Analysis:
    """The project's facts, the engine model and the memoised value queries."""

    def __init__(self, modules: Iterable[ModuleFacts], config: object) -> None:
        self.config = config
        modules = list(modules)
        engine = next(
            (e for m in modules if (e := engine_of(m.path)) != DEFAULT_ENGINE), DEFAULT_ENGINE
        )
        self.model: Model = model_for(config, engine)
        self.project = Project(modules)
        self.values = Values(self.project, self.model)


@dataclass
class FileUnit:
    """One file as the rules see it: its module's facts within the project's analysis."""

    path: str  # as findings name it
    module: ModuleFacts
    analysis: Analysis
    # The file's text, for the fixes (``None`` where the check does not have it whole).
    text: str | None = None

    @property
    def model(self) -> Model:
        return self.analysis.model

    @property
    def values(self) -> Values:
        return self.analysis.values

    @property
    def project(self) -> Project:
        return self.analysis.project

    def functions(self) -> Iterator[Function]:
        """The file's analysed functions (and its top level), as project functions."""
        prefix = self.module.module
        for key, facts in self.module.functions.items():
            if facts.analysed:
                found = self.project.functions.get(f"{prefix}.{key}")
                if found is not None and found.module is self.module:
                    yield found
        top = self.project.functions.get(f"{prefix}.<module>")
        if top is not None and top.module is self.module:
            yield top
