"""``swacheck`` command line: ``audit`` (or ``check``), ``rule``, ``rules``, ``server``, ``demo``,
``sanitize-recipe``.

Options of ``audit`` are spelled as ruff's, and mean what ruff's mean. Exit status: 0 no
findings, 1 findings, 2 usage, configuration or internal error.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, NoReturn, TextIO

from swacheck import __version__
from swacheck.catalogue import RuleSpec, catalogue
from swacheck.config import Config, ConfigError, parse_override, resolve_config, settings
from swacheck.engine.baseline import Baseline, BaselineError, write_baseline
from swacheck.engine.cache import result_cache
from swacheck.engine.codes import ENGINE_CODES
from swacheck.engine.cores import available_cores
from swacheck.engine.project import find_root
from swacheck.engine.result import AuditResult
from swacheck.engine.selection import Selection, select, with_fixable_flags
from swacheck.engine.texts import FileTexts
from swacheck.engine.workspace import Workspace
from swacheck.report import DEFAULT_FORMAT, FORMATS, HUMAN_FORMATS, renderer
from swacheck.report.context import ReportContext
from swacheck.report.progress import IndexingNote, ProgressLine
from swacheck.report.style import Style, wants_colour
from swacheck.report.summary import (
    closing,
    count,
    show_fixes,
    statistics_json,
    statistics_text,
    would_fix,
)

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
STDIN = "-"
DESCRIPTION = (
    "Static and runtime checks of the hybrid sliding-window-attention KV cache invariants. "
    "Run 'swacheck audit --help' for the linter's options."
)
FORMAT_ENV = "SWACHECK_OUTPUT_FORMAT"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse exits 2 too; keep its message format
        self.print_usage(sys.stderr)
        self.exit(EXIT_ERROR, f"{self.prog}: error: {message}\n")


def _codes(value: str) -> list[str]:
    return [code.strip().upper() for code in value.split(",") if code.strip()]


def _patterns(value: str) -> list[str]:
    return [pattern.strip() for pattern in value.split(",") if pattern.strip()]


def _pattern_codes(value: str) -> list[tuple[str, str]]:
    """``PATTERN:CODE[,PATTERN:CODE...]``, ruff's ``--per-file-ignores`` pairs."""
    pairs = []
    for item in _patterns(value):
        pattern, colon, code = item.rpartition(":")
        if not colon or not pattern.strip() or not code.strip():
            raise argparse.ArgumentTypeError(f"expected PATTERN:CODE, got {item!r}")
        pairs.append((pattern.strip(), code.strip().upper()))
    return pairs


def _audit_parser(commands: Any) -> None:
    audit = commands.add_parser(
        "audit", aliases=["check"], help="lint files and folders (default: .); alias: check"
    )
    audit.add_argument(
        "paths", nargs="*", type=Path, default=[Path(".")], help="files, folders, or - for stdin"
    )
    rules = audit.add_argument_group("rule selection")
    rules.add_argument("--select", type=_codes, help="comma-separated codes or prefixes to run")
    rules.add_argument(
        "--extend-select", type=_codes, help="like --select, but adds to the selection"
    )
    rules.add_argument("--ignore", type=_codes, help="comma-separated codes or prefixes to skip")
    rules.add_argument(
        "--per-file-ignores",
        type=_pattern_codes,
        action="extend",
        metavar="PATTERN:CODE",
        help="codes to skip in files matching PATTERN (comma-separated pairs; replaces the "
        "configured per-file-ignores)",
    )
    rules.add_argument(
        "--extend-per-file-ignores",
        type=_pattern_codes,
        action="extend",
        default=[],
        metavar="PATTERN:CODE",
        help="like --per-file-ignores, but adds to the configured ones",
    )
    rules.add_argument(
        "--fixable",
        type=_codes,
        action="extend",
        metavar="CODES",
        help="codes or prefixes whose fixes are offered (replaces the configured fixable)",
    )
    rules.add_argument(
        "--unfixable",
        type=_codes,
        action="extend",
        default=[],
        metavar="CODES",
        help="codes or prefixes whose fixes are not offered; wins over --fixable",
    )
    rules.add_argument(
        "--extend-fixable",
        type=_codes,
        action="extend",
        default=[],
        metavar="CODES",
        help="like --fixable, but adds to the configured fixable codes",
    )
    rules.add_argument("--ignore-noqa", action="store_true", help="ignore every `# noqa` comment")
    fixing = audit.add_argument_group("fixes")
    fixing.add_argument("--fix", action="store_true", help="apply safe fixes in place")
    fixing.add_argument("--unsafe-fixes", action="store_true", help="also apply unsafe fixes")
    fixing.add_argument(
        "--show-fixes", action="store_true", help="list what --fix fixed, per file and code"
    )
    fixing.add_argument(
        "--diff", action="store_true", help="print fixes as a diff and write nothing"
    )
    adopting = audit.add_argument_group("gradual adoption")
    adopting.add_argument(
        "--add-noqa",
        action="store_true",
        help="add a '# noqa: CODE' for each finding on its line, or to the '# noqa' there; "
        "--add-noqa=REASON puts REASON after the codes",
    )
    adopting.add_argument("--add-noqa-reason", default="", help=argparse.SUPPRESS)
    adopting.add_argument(
        "--baseline",
        type=Path,
        metavar="FILE",
        help="report only findings this baseline does not record; warn of entries found no more",
    )
    adopting.add_argument(
        "--write-baseline",
        action="store_true",
        help="record the findings in the --baseline FILE (entries of files not audited stay)",
    )
    out = audit.add_argument_group("output")
    out.add_argument(
        "--output-format",
        choices=sorted(FORMATS),
        default=None,
        help=f"the report's format (default: {DEFAULT_FORMAT}) [env: {FORMAT_ENV}]",
    )
    out.add_argument("-o", "--output-file", type=Path, help="write the report to this file")
    out.add_argument("--statistics", action="store_true", help="print counts per code only")
    out.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default="auto",
        help="colour full and concise output (auto: on a terminal, unless NO_COLOR is set)",
    )
    out.add_argument(
        "--no-color", dest="color", action="store_const", const="never", help="--color never"
    )
    out.add_argument("-q", "--quiet", action="store_true", help="print findings, nothing else")
    out.add_argument(
        "-s", "--silent", action="store_true", help="print nothing (the exit status stays)"
    )
    out.add_argument(
        "--show-settings", action="store_true", help="print the resolved settings and exit"
    )
    out.add_argument(
        "--show-files", action="store_true", help="print the files an audit would report on"
    )
    status = audit.add_argument_group("exit status")
    status.add_argument("-e", "--exit-zero", action="store_true", help="exit 0 despite findings")
    status.add_argument(
        "--exit-non-zero-on-fix",
        action="store_true",
        help="exit 1 when --fix changed a file, even if no finding is left",
    )
    files = audit.add_argument_group("files")
    files.add_argument(
        "--exclude",
        type=_patterns,
        action="extend",
        metavar="FILE_PATTERN",
        help="paths to leave out (comma-separated globs; replaces exclude and its defaults)",
    )
    files.add_argument(
        "--extend-exclude",
        type=_patterns,
        action="extend",
        default=[],
        metavar="FILE_PATTERN",
        help="like --exclude, but adds to the configured extend-exclude",
    )
    files.add_argument(
        "--force-exclude",
        action="store_true",
        help="apply exclude/extend-exclude and .gitignore to paths given explicitly too",
    )
    files.add_argument("--stdin-filename", type=Path, help="the name of the file read from stdin")
    config = audit.add_argument_group("configuration")
    config.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="CONFIG_OPTION",
        help="a TOML file, or a TOML `KEY = VALUE` pair overriding one option (repeatable)",
    )
    config.add_argument(
        "--isolated",
        action="store_true",
        help="ignore every configuration file (--config KEY=VALUE overrides still apply)",
    )
    config.add_argument("-n", "--no-cache", action="store_true", help="neither read nor write it")
    config.add_argument(
        "--cache-dir",
        type=Path,
        default=os.environ.get("SWACHECK_CACHE_DIR") or None,
        help="the cache folder (default: cache-dir, .swacheck_cache) [env: SWACHECK_CACHE_DIR]",
    )
    config.add_argument(
        "--no-prefilter", action="store_true", help="parse every file (same findings, slower)"
    )
    config.add_argument(
        "--jobs", type=int, default=0, help="worker processes (0: one per core available)"
    )


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="swacheck", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"swacheck {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    _audit_parser(commands)
    rule = commands.add_parser("rule", help="explain a rule (or every rule: --all)")
    rule.add_argument("code", nargs="?", help="a code, such as SWA001")
    rule.add_argument("--all", action="store_true", help="explain every rule")
    rule.add_argument("--output-format", choices=("text", "json"), default="text")
    rules = commands.add_parser("rules", help="list the rules")
    rules.add_argument("--output-format", choices=("text", "json"), default="text")
    commands.add_parser("server", help="run the language server (LSP over stdio) for editors")
    commands.add_parser(
        "demo",
        help="run the reference implementation against its oracle; --inject-bug NAME "
        "re-creates a historical bug (needs the reference extra)",
        add_help=False,
    )
    commands.add_parser(
        "sanitize-recipe",
        help="print the sanitizer's pytest configuration for the installed SGLang",
        add_help=False,
    )
    return parser


def _split_add_noqa(argv: list[str]) -> list[str]:
    """``--add-noqa=REASON`` (ruff's spelling) as ``--add-noqa --add-noqa-reason REASON``:
    argparse would take the path after a bare ``--add-noqa`` for its optional value."""
    out = []
    for arg in argv:
        if arg.startswith("--add-noqa="):
            out += ["--add-noqa", f"--add-noqa-reason={arg.partition('=')[2]}"]
        else:
            out.append(arg)
    return out


def _output_format(args: argparse.Namespace) -> str:
    """``--output-format``, else ``SWACHECK_OUTPUT_FORMAT``, else ``full``."""
    if args.output_format is not None:
        return str(args.output_format)
    chosen = os.environ.get(FORMAT_ENV) or DEFAULT_FORMAT
    if chosen not in FORMATS:
        raise ConfigError(
            f"{FORMAT_ENV}={chosen!r} is not an output format ({', '.join(sorted(FORMATS))})"
        )
    return chosen


def _configuration(args: argparse.Namespace, paths: Sequence[Path]) -> Config:
    """``--config`` files and ``KEY = VALUE`` overrides, as ruff reads them."""
    files: list[Path] = []
    overrides: dict[str, Any] = {}
    for value in args.config:
        if value.endswith(".toml") or os.path.isfile(value):
            files.append(Path(value))
        else:
            overrides.update(parse_override(value))
    if len(files) > 1:
        raise ConfigError(f"--config: one configuration file at most, got {len(files)}")
    if files and args.isolated:
        raise ConfigError(
            f"--config {files[0]} cannot be used with --isolated, which ignores every "
            "configuration file"
        )
    args.overridden = frozenset(overrides)
    if "cache-dir" in overrides and args.cache_dir is None:
        # The user's own say, as --cache-dir: it may lie outside the project.
        args.cache_dir = Path(overrides["cache-dir"])
    found = resolve_config(files[0] if files else None, [] if args.isolated else paths, overrides)
    return _with_flags(found, args)


def _with_flags(config: Config, args: argparse.Namespace) -> Config:
    """``config`` with ruff's flags that override its keys: ``--exclude`` and
    ``--per-file-ignores`` replace them, their ``--extend-*`` add to them; and
    ``--ignore-noqa``, which no key has."""
    changes: dict[str, Any] = {"ignore_noqa": True} if args.ignore_noqa else {}
    if args.exclude is not None:
        changes["exclude"] = tuple(args.exclude)
    if args.extend_exclude:
        changes["extend_exclude"] = (*config.extend_exclude, *args.extend_exclude)
    ignores = {} if args.per_file_ignores is not None else config.per_file_ignores
    pairs = [*(args.per_file_ignores or ()), *args.extend_per_file_ignores]
    if args.per_file_ignores is not None or pairs:
        merged = {glob: list(codes) for glob, codes in ignores.items()}
        for pattern, code in pairs:
            merged.setdefault(pattern, []).append(code)
        changes["per_file_ignores"] = {glob: tuple(codes) for glob, codes in merged.items()}
    return replace(config, **changes) if changes else config


@contextlib.contextmanager
def _report_stream(target: Path | None) -> Iterator[TextIO]:
    if target is None:
        yield sys.stdout
        return
    try:
        handle = open(target, "w", encoding="utf-8")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise ConfigError(f"--output-file {target}: cannot write: {exc.strerror}") from None
    with handle:
        yield handle


def _names(specs: Sequence[RuleSpec]) -> dict[str, str]:
    return {**{c.code: c.name for c in ENGINE_CODES}, **{s.code: s.name for s in specs}}


def _audit(args: argparse.Namespace) -> int:
    if args.jobs < 0:
        raise ConfigError("--jobs must be 0 (one per core) or a positive number")
    args.output_format = _output_format(args)
    stdin = args.paths == [Path(STDIN)] or (args.stdin_filename and args.paths == [Path(".")])
    if not stdin and Path(STDIN) in args.paths:
        raise ConfigError("- (stdin) cannot be audited together with other paths")
    _check_adoption_options(args, stdin)
    document = args.stdin_filename or Path(STDIN)
    paths = [document] if stdin else args.paths
    config = _configuration(args, paths)
    root = find_root(paths[0] if paths else Path("."))
    cache = None if args.no_cache else result_cache(config, args.cache_dir, root)
    specs = catalogue(config, cache)
    selection = select(
        specs, config, args.select, args.ignore, args.extend_select, overridden=args.overridden
    )
    codes = [spec.code for spec in specs] + [c.code for c in ENGINE_CODES]
    config = with_fixable_flags(config, codes, args.fixable, args.extend_fixable, args.unfixable)
    if args.show_settings:
        return _show_settings(config, paths, selection, args.cache_dir)
    baseline = Baseline.load(args.baseline) if args.baseline and not args.write_baseline else None
    jobs = args.jobs or available_cores()
    workspace = Workspace(
        config,
        selection.rules,
        root=root,
        engine_codes=selection.engine_codes,
        known_codes=[spec.code for spec in specs],
        cache=not args.no_cache,
        cache_dir=args.cache_dir,
        jobs=jobs,
        prefilter=not args.no_prefilter,
    )
    if args.show_files:
        return _show_files(workspace, paths, args)
    fix = args.fix and not args.diff
    options = {
        "fix": fix,
        "unsafe_fixes": args.unsafe_fixes,
        "diff": args.diff,
        "force_exclude": args.force_exclude,
    }
    documents: dict[str, bytes] = {}
    progress = _progress_line(args)
    options["progress"] = progress
    options["indexing"] = _indexing_note(args, stdin, jobs)
    with progress if progress is not None else contextlib.nullcontext():  # erased however it ends
        if stdin:
            text = sys.stdin.buffer.read()
            try:
                with _terminate_on_sigterm():
                    result = workspace.audit(documents={document: text}, **options)
            except BaseException:
                if fix and not args.silent:  # an editor replaces its buffer with stdout
                    _write_fixed_source(AuditResult(), document, text)
                raise
            documents = {shown: result.fixed_documents.get(shown, text) for shown in result.files}
        else:
            add_noqa = args.add_noqa_reason if args.add_noqa else None
            with _terminate_on_sigterm():
                result = workspace.audit(args.paths, add_noqa=add_noqa, **options)
    texts = FileTexts(result.files, documents)
    enabled = [spec.code for spec in selection.rules] + sorted(selection.engine_codes)
    if args.add_noqa:
        return _added_noqa(args, result)
    if args.write_baseline:
        return _wrote_baseline(args, result, texts, enabled)
    notes = _apply_baseline(baseline, result, texts, enabled) if baseline else []
    style = Style(unsafe_fixes=args.unsafe_fixes)
    with _report_stream(args.output_file) as out:
        if not args.silent:
            if stdin and fix:
                _write_fixed_source(result, document, text)
                out = sys.stderr
            human = args.output_format in HUMAN_FORMATS
            colour = human and wants_colour(args.color, out)
            style = Style(colour=colour, unsafe_fixes=args.unsafe_fixes)
            _report(args, result, ReportContext(style, texts, _names(specs)), out)
    for warning in [*result.warnings, *notes]:
        if not (args.quiet or args.silent):
            print(f"warning: {warning}", file=sys.stderr)
    for error in result.errors:
        print(f"error: {error}", file=sys.stderr)
    return _exit_status(args, result)


def _progress_line(args: argparse.Namespace) -> ProgressLine | None:
    """The progress line on stderr, where a person reads the report in a terminal."""
    human = args.output_format in HUMAN_FORMATS
    if args.quiet or args.silent or not human or not sys.stderr.isatty():
        return None
    return ProgressLine(sys.stderr)


def _indexing_note(args: argparse.Namespace, stdin: bool, jobs: int) -> IndexingNote | None:
    """The one line saying a long indexing is under way, for whoever reads stderr later
    (pre-commit and CI logs capture it); not with ``-q``/``-s``, nor for an editor's
    stdin."""
    if args.quiet or args.silent or stdin:
        return None
    return IndexingNote(sys.stderr, jobs, cached=not args.no_cache)


def _check_adoption_options(args: argparse.Namespace, stdin: bool) -> None:
    """``--add-noqa`` and ``--write-baseline`` write files: not with stdin, fixes, each other."""
    if args.add_noqa_reason and not args.add_noqa:
        raise ConfigError("--add-noqa-reason needs --add-noqa")
    if args.write_baseline and args.baseline is None:
        raise ConfigError("--write-baseline needs --baseline FILE (where to write it)")
    for flag, on in (("--add-noqa", args.add_noqa), ("--write-baseline", args.write_baseline)):
        if not on:
            continue
        if stdin:
            raise ConfigError(f"{flag} writes files: it cannot be used with stdin")
        for other in ("fix", "diff"):
            if getattr(args, other):
                raise ConfigError(f"{flag} cannot be used with --{other}")
    if args.add_noqa and args.write_baseline:
        raise ConfigError("--add-noqa cannot be used with --write-baseline")
    if "\n" in args.add_noqa_reason or "\r" in args.add_noqa_reason:
        raise ConfigError("--add-noqa=REASON must be one line")


def _added_noqa(args: argparse.Namespace, result: AuditResult) -> int:
    """``--add-noqa``'s report: how many comments were written (ruff's words)."""
    for error in result.errors:
        print(f"error: {error}", file=sys.stderr)
    if result.noqa_added and not args.silent:
        print(
            f"Added {count(result.noqa_added, 'noqa directive')}.",
            file=sys.stderr,
        )
    return EXIT_ERROR if result.errors else EXIT_CLEAN


def _wrote_baseline(
    args: argparse.Namespace, result: AuditResult, texts: FileTexts, enabled: list[str]
) -> int:
    for error in result.errors:
        print(f"error: {error}", file=sys.stderr)
    written = write_baseline(args.baseline, result.findings, texts, result.files, enabled)
    if not args.silent:
        print(
            f"Wrote {count(written, 'finding')} to the baseline {args.baseline} "
            f"({len(result.findings)} found now).",
            file=sys.stderr,
        )
    return EXIT_ERROR if any("internal error" in e for e in result.errors) else EXIT_CLEAN


def _apply_baseline(
    baseline: Baseline, result: AuditResult, texts: FileTexts, enabled: list[str]
) -> list[str]:
    """Drop the findings ``baseline`` records from ``result``; the warnings to print.

    Only news is said: entries whose finding is gone. The recorded findings themselves
    are what the baseline is for, so a run where nothing changed prints nothing (every
    pre-commit call shows it).
    """
    stale = baseline.stale(result.findings, texts, result.files, enabled)
    result.findings, _ = baseline.split(result.findings, texts)
    if not stale:
        return []
    listed = "".join(
        f"\n  {e.file}: {e.code} on `{e.line}`"
        + (f" (occurrence {e.occurrence + 1})" if e.occurrence else "")
        for e in stale
    )
    return [
        f"{count(len(stale), 'baseline entry', 'baseline entries')} of {baseline.path} "
        f"found no finding (fixed, or the line changed; --write-baseline drops them):"
        f"{listed}"
    ]


class _Terminated(BaseException):
    """SIGTERM arrived: the audit unwinds (its worker processes are stopped) and exits."""


@contextlib.contextmanager
def _terminate_on_sigterm() -> Iterator[None]:
    """SIGTERM stops the audit as SIGINT does: by an exception in the main thread, so the
    worker processes are stopped on the way out (exit status 143)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminate(signum: int, frame: object) -> None:
        raise _Terminated

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _write_fixed_source(result: AuditResult, document: Path, text: bytes) -> None:
    """``--fix`` on stdin: the fixed source (or the source unchanged) goes to stdout."""
    fixed = next(iter(result.fixed_documents.values()), text)
    sys.stdout.buffer.write(fixed)
    sys.stdout.flush()


def _report(
    args: argparse.Namespace, result: AuditResult, context: ReportContext, out: TextIO
) -> None:
    human = args.output_format in HUMAN_FORMATS
    summary = human and not args.quiet
    style = context.style
    if args.diff:
        out.write("".join(result.diffs))
        if summary:
            out.write("".join(f"{line}\n" for line in would_fix(result, style)))
        return
    if args.statistics:
        if human:
            out.write(statistics_text(result, style, context.names, args.fix))
        else:
            out.write(statistics_json(result, style, context.names))
        return
    out.write(renderer(args.output_format)(result.findings, context))
    if not human:
        return
    if args.fix and args.show_fixes and not args.quiet:
        out.write("".join(f"{line}\n" for line in show_fixes(result.fixed, context.names)))
    if summary:
        if result.files_seen == 0 and not result.findings:
            print("warning: No Python files found under the given path(s)", file=sys.stderr)
        out.write("".join(f"{line}\n" for line in closing(result, style, args.fix)))


def _exit_status(args: argparse.Namespace, result: AuditResult) -> int:
    if any("internal error" in e for e in result.errors):
        return EXIT_ERROR
    if args.exit_non_zero_on_fix and result.fixed and not args.diff:
        return EXIT_FINDINGS
    if args.exit_zero:
        return EXIT_CLEAN
    if args.diff:
        return EXIT_FINDINGS if result.diffs else EXIT_CLEAN
    return EXIT_FINDINGS if result.findings else EXIT_CLEAN


def _show_settings(
    config: Config, paths: Sequence[Path], selection: Selection[RuleSpec], cache_dir: Path | None
) -> int:
    """``--show-settings``: where the configuration came from and what it resolved to."""
    root = find_root(paths[0] if paths else Path("."))
    print(f"Settings path: {config.source or 'none (defaults)'}")
    print(f"Project root: {root or 'none (only the given files are the context)'}")
    cache = result_cache(config, cache_dir, root)
    print(f"Cache folder: {cache.folder if cache.usable() else f'none ({cache.problem})'}")
    print()
    print("[tool.swacheck]")
    for key, value in settings(config).items():
        if isinstance(value, tuple):
            value = list(value)
        elif not isinstance(value, str | bool | int | float) and key != "model":
            value = {k: v if isinstance(v, str) else list(v) for k, v in value.items()}
        print(f"{key} = {json.dumps(value)}")
    print()
    enabled = [spec.code for spec in selection.rules] + sorted(selection.engine_codes)
    print(f"# enabled codes: {', '.join(sorted(enabled))}")
    return EXIT_CLEAN


def _show_files(workspace: Workspace, paths: Sequence[Path], args: argparse.Namespace) -> int:
    """``--show-files``: the files an audit of ``paths`` reports on, absolute and sorted."""
    found, warnings = workspace.files(paths, force_exclude=args.force_exclude)
    for path in found:
        print(path)
    if not (args.quiet or args.silent):
        if not found:
            warnings.append("No Python files found under the given path(s)")
        for warning in warnings:
            print(f"warning: {warning}", file=sys.stderr)
    return EXIT_CLEAN


def _rule(args: argparse.Namespace) -> int:
    """A rule's page, or every page (``--all``); JSON as ``rules --output-format json``."""
    if args.all == bool(args.code):
        print("swacheck rule: give a code or --all", file=sys.stderr)
        return EXIT_ERROR
    described = _described()
    if not args.all:
        code = args.code.upper()
        described = [d for d in described if d["code"] == code]
        if not described:
            print(f"swacheck: unknown rule {args.code!r} (see `swacheck rules`)", file=sys.stderr)
            return EXIT_ERROR
    if args.output_format == "json":
        print(json.dumps(described if args.all else described[0], indent=2))
    else:
        print("\n".join(d["explanation"] for d in described), end="")
    return EXIT_CLEAN


def _described() -> list[dict[str, Any]]:
    """Every code as ruff's ``rule --output-format json`` describes one."""
    from swacheck.docs import render_engine_code, render_rule
    from swacheck.fix_safety import availability, safety
    from swacheck.report.urls import rule_url
    from swacheck.rules import all_rules

    described = [
        {
            "code": rule.code,
            "name": rule.name,
            "summary": rule.summary,
            "fix": availability(rule.fixes),
            "fix_safety": safety(rule.fixes),
            "explanation": render_rule(rule),
            "url": rule_url(rule.code),
        }
        for rule in all_rules()
    ]
    described += [
        {
            "code": c.code,
            "name": c.name,
            "summary": c.summary,
            "fix": c.fix,
            "fix_safety": safety(c.fixes),
            "explanation": render_engine_code(c),
            "url": rule_url(c.code),
        }
        for c in ENGINE_CODES
    ]
    return sorted(described, key=lambda d: d["code"])


def _rules(output_format: str) -> int:
    described = _described()
    if output_format == "json":
        print(json.dumps(described, indent=2))
        return EXIT_CLEAN
    default = {c.code: c.default for c in ENGINE_CODES}
    for d in described:
        fix = "" if d["fix_safety"] == "none" else f" [fix: {d['fix_safety']}]"
        note = "" if default.get(d["code"], True) else " [off unless selected]"
        print(f"{d['code']}  {d['name']:<42} {d['summary']}{fix}{note}")
    return EXIT_CLEAN


# What the reference implementation imports: the `reference` extra of pyproject.toml.
DEMO_MODULES = ("torch", "triton", "numpy", "typeguard", "jaxtyping")
DEMO_NEEDS = (
    "swacheck demo runs the reference implementation, which needs the `reference` extra "
    "(torch, triton). From a clone: python -m pip install '.[reference]'; from the "
    "repository: python -m pip install "
    "'swacheck[reference] @ git+https://github.com/swacheck/swacheck'"
)


def _demo(argv: Sequence[str]) -> int:
    """``swacheck demo``: checked for its extra before anything is imported (``--help`` too)."""
    import importlib.util

    missing = [name for name in DEMO_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        print(f"swacheck: {DEMO_NEEDS} (not installed: {', '.join(missing)})", file=sys.stderr)
        return EXIT_ERROR
    from swacheck.reference_impl.demo import main as demo_main

    return demo_main(list(argv))


SERVER_MODULES = ("pygls", "lsprotocol")
SERVER_NEEDS = (
    "swacheck server needs the `lsp` extra (pygls, lsprotocol). From a clone: python -m pip "
    "install '.[lsp]'; from the repository: python -m pip install "
    "'swacheck[lsp] @ git+https://github.com/swacheck/swacheck'"
)


def _server() -> int:
    """``swacheck server``: checked for its extra before anything of it is imported."""
    import importlib.util

    missing = [name for name in SERVER_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        print(f"swacheck: {SERVER_NEEDS} (not installed: {', '.join(missing)})", file=sys.stderr)
        return EXIT_ERROR
    from swacheck.server.app import serve

    return serve()


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["demo"]:
        return _demo(argv[1:])
    if argv[:1] == ["sanitize-recipe"]:
        from swacheck.runtime.recipe import main as recipe_main  # imports torch: not before

        return recipe_main(argv[1:])
    args = _build_parser().parse_args(_split_add_noqa(argv))
    try:
        if args.command in ("audit", "check"):
            return _audit(args)
        if args.command == "rule":
            return _rule(args)
        if args.command == "server":
            return _server()
        return _rules(args.output_format)
    except ConfigError as exc:
        print(f"swacheck: configuration error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except BaselineError as exc:
        print(f"swacheck: baseline: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except _Terminated:
        return 128 + signal.SIGTERM
    except BrokenPipeError:
        return EXIT_CLEAN


def run() -> NoReturn:
    """The ``swacheck`` command (the console script and ``python -m swacheck``).

    An audit is a short-lived process whose data (the project's facts, the trees) is
    acyclic and freed on exit: the cyclic garbage collector is off for it, and the
    process ends without tearing down its objects (as mypy does). On SGLang's tree the
    two cost a pre-commit call 0.07 s and 0.05 s.
    """
    argv = sys.argv[1:]
    if argv[:1] not in (["audit"], ["check"]):
        sys.exit(main(argv))
    gc.disable()
    code = main(argv)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        pass
    os._exit(code)


if __name__ == "__main__":
    run()
