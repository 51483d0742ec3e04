"""JUnit XML, as ruff's ``junit`` format writes it: a test suite per file, a failing test
case per finding; one passing case when there is none (CI systems read an empty report
as a failure to run)."""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence

from swacheck.finding import Finding
from swacheck.report.context import PLAIN_CONTEXT, ReportContext

PACKAGE = "org.swacheck"
# Characters XML 1.0 cannot hold at all (control characters, lone surrogates): escaped.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml(text: str) -> str:
    return _NOT_XML.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def _counts(element: ET.Element, tests: int, failures: int) -> None:
    for key, value in (("tests", tests), ("skipped", 0), ("failures", failures), ("errors", 0)):
        element.set(key, str(value))


def render(findings: Sequence[Finding], context: ReportContext = PLAIN_CONTEXT) -> str:
    root = ET.Element("testsuites", name="swacheck")
    _counts(root, max(len(findings), 1), len(findings))
    by_file: dict[str, list[Finding]] = {}
    for finding in findings:
        by_file.setdefault(_xml(context.texts.absolute(finding.path)), []).append(finding)
    if not by_file:
        suite = ET.SubElement(root, "testsuite", name="swacheck")
        _counts(suite, 1, 0)
        suite.set("package", PACKAGE)
        ET.SubElement(suite, "testcase", name="No errors found", classname="swacheck")
    for path, in_file in by_file.items():
        suite = ET.SubElement(root, "testsuite", name=path)
        _counts(suite, len(in_file), len(in_file))
        suite.set("package", PACKAGE)
        classname = os.path.splitext(path)[0]
        for f in in_file:
            case = ET.SubElement(
                suite,
                "testcase",
                name=f"{PACKAGE}.{f.code}",
                classname=classname,
                line=str(f.start.row),
                column=str(f.start.column + 1),
            )
            properties = ET.SubElement(case, "properties")
            ET.SubElement(properties, "property", name="severity", value="error")
            message = _xml(f.message)
            failure = ET.SubElement(case, "failure", message=message)
            failure.text = f"line {f.start.row}, col {f.start.column + 1}, {message}"
    ET.indent(root, space="    ")
    body = ET.tostring(root, encoding="unicode")
    return f'<?xml version="1.0" encoding="UTF-8"?>\n{body}\n'
