"""A report as JUnit XML, the way CI systems read it (Maven Surefire's schema, which Jenkins,
GitLab, GitHub's test reporters and junitparser's `xunit2` read):

- one `<testsuite>` per flow, one `<testcase>` per flow x device (`classname` the suite and
  flow, `name` the device);
- a decision failure (blocked, escalated, max-steps) is `<failure>`, an infrastructure one
  (errored) `<error>`, each with its `type` the status;
- a case that passed only on retry keeps no `<failure>` (it passed) and a `<flakyFailure>` /
  `<flakyError>` per failed attempt; a case that failed on every attempt has one
  `<rerunFailure>` / `<rerunError>` per attempt before the last;
- each attempt's step table in its `<system-out>`, and each step's picture as an attachment
  (`[[ATTACHMENT|path]]`, the line Jenkins' and GitLab's JUnit readers link) to the file
  written beside the XML.
"""

from __future__ import annotations

import datetime as dt
import xml.etree.ElementTree as ET
from pathlib import Path

from scheduler.suites.outcome import INFRA_FAILURES, Attempt, Case, Report
from workers.core.model import RunStatus, StepRow

MAX_OUT_CHARS = 64_000
"""A system-out's most characters (a 100-step table is ~10 kB)."""


def step_line(s: StepRow) -> str:
    d = s.decision
    decision = "-"
    if d is not None:
        decision = "done" if d.done else "blocked" if d.blocked else d.target
        if d.input != "none":
            decision += f" <- {d.input}"
        decision += f" ({d.confidence:.2f}" + (f", {d.decided_by})" if d.decided_by else ")")
    action = s.action.shown if s.action is not None else "-"
    ms = s.snapshot_ms + s.decide_ms + s.action_ms
    tokens = d.usage.input_tokens + d.usage.output_tokens if d is not None else 0
    return (
        f"{s.index:>3}  {s.screen[:40]:<40}  {decision[:40]:<40}  {action[:48]:<48}  "
        f"{s.outcome.value:<10} {ms:7.1f} ms  {tokens:>5} tok"
    )


def attempt_text(a: Attempt, attachments: str | None) -> str:
    r = a.run
    head = (
        f"run {r.id} attempt {r.retry + 1} on {r.device or r.target or '-'}: {r.status.value}"
        + (f" — {r.reason}" if r.reason else "")
    )
    headings = a.headings()  # a journey's rows under their steps
    lines = [head]
    for s in a.steps:
        if s.index in headings:
            lines.append(f"  — {headings[s.index]}")
        lines.append(step_line(s))
    if attachments is not None:
        shown = [*a.pictures.values(), *([a.video] if a.video is not None else [])]
        lines += [f"[[ATTACHMENT|{attachments}/{p.name}]]" for p in shown]
    return "\n".join(lines)[:MAX_OUT_CHARS]


def _result(tag: str, a: Attempt, attachments: str | None) -> ET.Element:
    el = ET.Element(tag, message=(a.run.reason or a.run.status.value)[:500], type=a.status.value)
    if tag.startswith(("flaky", "rerun")):
        out = ET.SubElement(el, "system-out")
        out.text = attempt_text(a, attachments)
    else:
        el.text = a.run.reason
    return el


def testcase(case: Case, suite: str, attachments: str | None) -> ET.Element:
    tc = ET.Element(
        "testcase",
        classname=f"{suite}.{case.flow}",
        name=f"{case.flow} on {case.device}" + (f" ({case.platform})" if case.platform else ""),
        time=f"{sum(a.seconds for a in case.attempts):.3f}",
    )
    props = ET.SubElement(tc, "properties")
    for k, v in (
        ("device", case.device),
        ("platform", case.platform),
        ("verdict", case.verdict),
        ("attempts", str(len(case.attempts))),
    ):
        ET.SubElement(props, "property", name=k, value=v)
    for a in case.attempts:
        shown = [*a.pictures.values(), *([a.video] if a.video is not None else [])]
        for p in shown if attachments is not None else []:
            ET.SubElement(props, "property", name="attachment", value=f"{attachments}/{p.name}")
    earlier, last = case.attempts[:-1], case.last
    verdict = case.verdict
    if verdict == "cancelled":
        ET.SubElement(tc, "skipped", message=last.run.reason or "cancelled")
    elif verdict == "incomplete":
        ET.SubElement(tc, "skipped", message=f"still {last.status.value} when the report was made")
    elif verdict in {"failed", "errored"}:
        tc.append(_result("error" if verdict == "errored" else "failure", last, attachments))
        for a in earlier:
            tag = "rerunError" if a.status in INFRA_FAILURES else "rerunFailure"
            tc.append(_result(tag, a, attachments))
    else:  # passed, or flaky: passed on a retry, each failed attempt before it recorded
        for a in earlier:
            if a.status is not RunStatus.DONE:
                tag = "flakyError" if a.status in INFRA_FAILURES else "flakyFailure"
                tc.append(_result(tag, a, attachments))
    out = ET.SubElement(tc, "system-out")
    out.text = attempt_text(last, attachments)
    return tc


def to_xml(report: Report, *, attachments: str | None = None) -> bytes:
    """The report's JUnit XML; `attachments` is the pictures' directory relative to the XML
    (None: no attachment lines)."""
    suite = report.title
    root = ET.Element("testsuites", name=suite)
    flows: dict[str, list[Case]] = {}
    for case in report.cases:
        flows.setdefault(case.flow, []).append(case)
    total = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for flow, cases in flows.items():
        counts = {
            "tests": len(cases),
            "failures": sum(c.verdict == "failed" for c in cases),
            "errors": sum(c.verdict == "errored" for c in cases),
            "skipped": sum(c.verdict in {"cancelled", "incomplete"} for c in cases),
        }
        ts = ET.SubElement(
            root,
            "testsuite",
            name=f"{suite}.{flow}",
            timestamp=_iso(report.batch.created_at),
            attrib={k: str(v) for k, v in counts.items()},
            time=f"{sum(a.seconds for c in cases for a in c.attempts):.3f}",
        )
        for case in cases:
            ts.append(testcase(case, suite, attachments))
        for k, v in counts.items():
            total[k] += v
    for k, v in total.items():
        root.set(k, str(v))
    ET.indent(root)
    out: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return out


def _iso(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")


def write_pictures(report: Report, directory: Path) -> int:
    """Every step's picture and run's video (secrets already masked and painted over by the
    worker) into `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    n = 0
    for case in report.cases:
        for a in case.attempts:
            for p in a.files:
                (directory / p.name).write_bytes(p.original)
                n += 1
    return n
