"""The rule API: a rule is one file holding one :class:`Rule` subclass.

Modelled on Fixit: the class docstring is the rule's documentation (ruff's page
sections: What it does / Why is this bad? / Fix safety / Options), and the
``VALID``/``INVALID`` examples are both its documented examples and its tests.

A rule is a *query* (``semantic = True``): its :meth:`Rule.check` reads one file's
facts in the project's analysis (:class:`~swacheck.semantics.unit.FileUnit`, on
CPython's ``ast``) and reports with :meth:`Rule.report_span`. Rules not yet moved onto
the semantic core are libcst batchable visitors that walk a file together and share
one :class:`~swacheck.context.FileContext`.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import libcst as cst

from swacheck.finding import Finding, Fix, Position
from swacheck.fix_safety import FixCase

if TYPE_CHECKING:
    from swacheck.analysis.index import ProjectIndex
    from swacheck.config import Config
    from swacheck.context import FileContext
    from swacheck.semantics.function import Span
    from swacheck.semantics.unit import FileUnit
    from swacheck.triggers import Trigger


@dataclass(frozen=True)
class Example:
    """A documented example; ``files`` adds sibling files for cross-file rules."""

    code: str
    config: Mapping[str, Any] = field(default_factory=dict)
    files: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Valid(Example):
    """Code the rule must stay silent on."""


@dataclass(frozen=True)
class Invalid(Example):
    """Code the rule must flag at ``line`` (1-based, within ``code``).

    ``fixed`` is the file after ``--fix`` (with unsafe fixes applied), when the rule fixes it.
    """

    line: int = 0
    fixed: str | None = None


class UndeclaredFix(Exception):
    """A rule offered a fix of an applicability its ``fixes`` does not declare."""


class Rule(cst.BatchableCSTVisitor):
    """Base class of every rule (see the module docstring)."""

    code: ClassVar[str]
    name: ClassVar[str]
    summary: ClassVar[str]
    # Each case of the rule's fix (``swacheck.fix_safety``): the only applicabilities its
    # findings' fixes may have, and what its page says of them. Empty: no autofix.
    fixes: ClassVar[tuple[FixCase, ...]] = ()
    # Configuration keys (``[tool.swacheck]``) the rule reads.
    config_keys: ClassVar[tuple[str, ...]] = ()
    # The invariant (DESIGN.md) and the seed PR(s) the rule comes from.
    invariant: ClassVar[str] = ""
    origin: ClassVar[str] = ""
    # Whether ``triggers`` holds per top-level definition, not just per file: a finding
    # and every fact it reads lie in top-level ``def``/``class`` blocks (or module-level
    # code) holding a trigger. The engine blanks the other definitions before parsing,
    # in files holding no trigger of a rule that is not (``swacheck.engine.regions``).
    region_safe: ClassVar[bool] = False
    VALID: ClassVar[list[Valid]] = []
    INVALID: ClassVar[list[Invalid]] = []
    # A query over the semantic core (``check``), not a libcst visitor.
    semantic: ClassVar[bool] = False

    # No libcst metadata is resolved eagerly: parents and positions come from the shared
    # ``FileContext`` (computed once per file, positions only when first asked for).
    METADATA_DEPENDENCIES = ()

    def __init__(self, context: FileContext | FileUnit) -> None:
        super().__init__()
        self.context = context  # type: ignore[assignment]
        self.findings: list[Finding] = []

    def check(self, unit: FileUnit) -> None:
        """A rule's query over one file's semantic facts: the whole of a
        :attr:`semantic` rule; a visitor rule overrides it for the part of its idea
        already moved onto the semantic core (run after its walk)."""

    @classmethod
    def queries(cls) -> bool:
        """Whether the rule reads the semantic core (is semantic, or adds a query)."""
        return cls.semantic or cls.check is not Rule.check

    # -- what the engine asks of a rule class ------------------------------------------

    @classmethod
    def triggers(cls, config: Config) -> frozenset[Trigger] | None:
        """Text without which the rule can neither fire in a file nor need its facts.

        Case-insensitive substrings, :func:`swacheck.triggers.word` for whole words,
        :func:`swacheck.triggers.all_of` for text that must hold several of them.
        The engine parses only files matching some enabled rule's triggers, and runs a
        rule (``collect_facts`` and its check) only on files matching its own, so this
        must be sound, including for the files whose facts (``collect_facts``, the
        class index) the rule reads across files. Return ``None`` when no such set can
        be given (e.g. a configured pattern with no fixed substring).
        """
        return None

    @classmethod
    def needs_skeletons(cls, context: FileContext) -> bool:
        """Whether the first pass must build this file's function skeletons (CFGs and
        events, the costly part of an audit) for the rule's method summaries. Decided on
        the file alone, so that the prefilter cannot change it."""
        return False

    @classmethod
    def inactive_reason(cls, project: ProjectIndex, config: Config) -> str | None:
        """Why the rule does not apply to this audit at all (DESIGN.md's scope rules), or
        ``None`` when it does; decided on the first pass's facts."""
        return None

    @classmethod
    def activation(cls, config: Config) -> tuple[frozenset[str], re.Pattern[bytes]] | None:
        """What some audited file must contain for the rule to apply at all, or ``None``.

        ``(literals, pattern)``: a file counts when it holds one of the literals and
        matches the pattern. Checked on raw bytes before anything is parsed, so a rule
        that cannot apply (DESIGN.md's scope rules) costs nothing. It must be a necessary
        condition of :meth:`inactive_reason` returning ``None`` (which decides on the
        parsed facts), so that ``--no-prefilter`` gives the same findings.
        """
        return None

    @classmethod
    def collect_facts(cls, context: FileContext) -> Any:
        """Facts this rule needs from every file of the audit (first pass), or ``None``.

        Runs on each candidate file before any rule checks; the results are in
        ``self.context.project.rule_facts(cls.code)`` during the check. Must be picklable.
        """
        return None

    @classmethod
    def documentation(cls) -> str:
        return inspect.cleandoc(cls.__doc__ or "")

    # -- what a rule calls ---------------------------------------------------------------

    def report(
        self,
        node: cst.CSTNode,
        message: str,
        *,
        fix: Fix | None = None,
        notes: tuple[str, ...] = (),
        noqa_node: cst.CSTNode | None = None,
    ) -> None:
        """Record a finding at ``node``; ``# noqa`` is looked for on ``noqa_node``'s first line.

        Raises :class:`UndeclaredFix` for a fix none of the rule's ``fixes`` cases declares.
        """
        if fix is not None and all(c.applicability is not fix.applicability for c in self.fixes):
            raise UndeclaredFix(
                f"{self.code} offers a {fix.applicability.value} fix but declares "
                f"{[c.applicability.value for c in self.fixes]} in `fixes`"
            )
        ctx = self.context
        start = ctx.start(node)
        noqa_row = ctx.start(noqa_node).row if noqa_node is not None else start.row
        self.findings.append(
            Finding(
                code=self.code,
                message=message,
                path=ctx.path,
                start=start,
                end=ctx.end(node),
                fix=fix,
                noqa_row=noqa_row,
                notes=notes,
            )
        )

    def report_span(
        self,
        span: Span,
        message: str,
        *,
        fix: Fix | None = None,
        notes: tuple[str, ...] = (),
        noqa_row: int | None = None,
    ) -> None:
        """Record a finding over ``span`` (a semantic rule's); ``# noqa`` is looked for
        on ``noqa_row`` (default: the span's first row)."""
        if fix is not None and all(c.applicability is not fix.applicability for c in self.fixes):
            raise UndeclaredFix(
                f"{self.code} offers a {fix.applicability.value} fix but declares "
                f"{[c.applicability.value for c in self.fixes]} in `fixes`"
            )
        self.findings.append(
            Finding(
                code=self.code,
                message=message,
                path=self.context.path,
                start=Position(span.line, span.col),
                end=Position(span.end_line, span.end_col),
                fix=fix,
                noqa_row=noqa_row if noqa_row is not None else span.line,
                notes=notes,
            )
        )
