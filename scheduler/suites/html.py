"""A report as one self-contained HTML file (it opens offline: its style inline, its pictures
downscaled in `data:` URIs, no script, nothing fetched): the matrix of flows x devices
with each case's verdict, then each case's attempts, each with its step table (picture,
screen, decision, who decided, action, outcome, ms, tokens).

Its size is bounded: pictures are `THUMB_WIDTH` wide and embedded only while the report's
budget lasts (`scheduler.suites.outcome.THUMB_BUDGET`); each links to its original beside
the report when the pictures were written there.
"""

from __future__ import annotations

import base64
import time
from html import escape
from typing import get_args

from scheduler.suites.failure import failure_html, next_command
from scheduler.suites.outcome import (
    Attempt,
    Case,
    Picture,
    Report,
    Verdict,
    failure_kind,
    thumb_type,
)
from workers.core.model import StepRow
from workers.core.prices import shown_cost
from workers.core.rows import paid_decisions

STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#1b1f24;background:#fff}
h1{font-size:1.5em;margin:0 0 .2em}h2{font-size:1.2em;margin:1.6em 0 .4em}
h3{font-size:1em;margin:1em 0 .3em}
table{border-collapse:collapse;margin:.4em 0 1em}
th,td{border:1px solid #d0d7de;padding:.3em .6em;text-align:left;vertical-align:top}
th{background:#f6f8fa}td.num{text-align:right;font-variant-numeric:tabular-nums}
.v{display:inline-block;padding:.1em .5em;border-radius:.8em;font-weight:600;color:#fff}
.passed{background:#1a7f37}.flaky{background:#bf8700}.failed{background:#cf222e}
.errored{background:#8250df}.cancelled,.incomplete{background:#6e7781}
.summary span{margin-right:1em}img{max-width:200px;border:1px solid #d0d7de}
.muted{color:#57606a}.failure{border-left:4px solid #cf222e;padding:.2em 1em;margin:.5em 0 1.5em}
h4{margin:.4em 0}
"""


def _badge(verdict: str) -> str:
    return f'<span class="v {verdict}">{escape(verdict)}</span>'


def _anchor(case: Case) -> str:
    return escape(f"{case.flow}--{case.device}", quote=True)


def _picture(p: Picture | None, alt: str, attachments: str | None) -> str:
    if p is None:
        return '<span class="muted">—</span>'
    href = f"{attachments}/{p.name}" if attachments is not None else None
    if p.thumb is not None:
        data = base64.b64encode(p.thumb).decode()
        src = f"data:{thumb_type(p.thumb)};base64,{data}"
        img = f'<img alt="{escape(alt, quote=True)}" src="{src}">'
        return f'<a href="{escape(href, quote=True)}">{img}</a>' if href else img
    return f'<a href="{escape(href, quote=True)}">picture</a>' if href else "—"


def _step(a: Attempt, s: StepRow, attachments: str | None) -> str:
    d = s.decision
    decision, who, tokens = "—", "—", 0
    if d is not None:
        decision = "done" if d.done else "blocked" if d.blocked else d.target
        if d.input != "none":
            decision += f" ← {d.input}"
        decision += f" ({d.confidence:.2f})"
        who = d.decided_by or "—"  # a done_when match: no decider was asked
        tokens = d.usage.input_tokens + d.usage.output_tokens
    cost = shown_cost(sum(p.usage.cost for p in paid_decisions(s)))
    action = s.action.shown if s.action is not None else ""
    ms = s.snapshot_ms + s.decide_ms + s.action_ms
    cells = [
        f'<td class="num">{s.index}</td>',
        f"<td>{_picture(a.pictures.get(s.index), f'step {s.index}', attachments)}</td>",
        f"<td>{escape(s.screen)}</td>",
        f"<td>{escape(decision)}</td>",
        f"<td>{escape(who)}</td>",
        f"<td>{escape(action)}</td>",
        f"<td>{escape(s.outcome.value)}</td>",
        f'<td class="num">{ms:.1f}</td>',
        f'<td class="num">{tokens}</td>',
        f'<td class="num">{cost}</td>',
    ]
    return "<tr>" + "".join(cells) + "</tr>"


def _attempt(a: Attempt, attachments: str | None) -> str:
    r = a.run
    kind = failure_kind(r.status)
    why = f" — {escape(r.reason)}" if r.reason else ""
    head = (
        f"<h3>attempt {r.retry + 1}: {escape(r.status.value)}"
        f"{f' ({kind} failure)' if kind else ''}{why} "
        f'<span class="muted">run {escape(r.id)} on {escape(r.device or r.target or "-")}, '
        f"{a.seconds:.1f} s{_cost(a.cost)}</span></h3>"
    )
    cols = ("#", "picture", "screen", "decision", "decided by", "action", "outcome", "ms")
    header = "".join(f"<th>{c}</th>" for c in (*cols, "tokens", "cost"))
    rows = "".join(_grouped(a, attachments))
    failure = r.result.failure if r.result is not None else None
    why_not = ""
    if failure is not None:
        final = _picture(a.final, "the final screen", attachments)
        why_not = failure_html(failure, next_command(r), final)
    return f"{head}<table><tr>{header}</tr>{rows}</table>{_video(a, attachments)}{why_not}"


def _video(a: Attempt, attachments: str | None) -> str:
    """A link to the run's video beside the report (the report embeds none: it stays small),
    or why it has none."""
    r = a.run.result
    if a.video is not None and attachments is not None:
        href = escape(f"{attachments}/{a.video.name}", quote=True)
        return f'<p class="video"><a href="{href}">video of the run</a> (WebM)</p>'
    note = r.video_note if r is not None else ""
    return f'<p class="video muted">no video: {escape(note)}</p>' if note else ""


def _cost(cost: float) -> str:
    return f", cost {shown_cost(cost)}" if cost > 0 else ""


def _grouped(a: Attempt, attachments: str | None) -> list[str]:
    """The attempt's rows; a journey's grouped by step, each under its heading."""
    headings = a.headings()
    out = []
    for s in a.steps:
        if s.index in headings:
            out.append(f'<tr class="step"><th colspan="10">{escape(headings[s.index])}</th></tr>')
        out.append(_step(a, s, attachments))
    return out


def to_html(report: Report, *, attachments: str | None = None) -> str:
    flows = sorted({c.flow for c in report.cases})
    devices = sorted({c.device for c in report.cases})
    by = {(c.flow, c.device): c for c in report.cases}
    matrix = ["<table><tr><th>flow</th>"]
    matrix += [f"<th>{escape(d)}</th>" for d in devices]
    matrix.append("</tr>")
    for f in flows:
        matrix.append(f"<tr><th>{escape(f)}</th>")
        for d in devices:
            c = by.get((f, d))
            cell = '<span class="muted">—</span>'
            if c is not None:
                cell = f'<a href="#{_anchor(c)}">{_badge(c.verdict)}</a>'
                if len(c.attempts) > 1:
                    cell += f' <span class="muted">{len(c.attempts)} attempts</span>'
            matrix.append(f"<td>{cell}</td>")
        matrix.append("</tr>")
    matrix.append("</table>")
    verdicts: tuple[Verdict, ...] = get_args(Verdict)
    summary = "".join(
        f"<span>{_badge(v)} {report.count(v)}</span>" for v in verdicts if report.count(v)
    )
    sections = []
    for c in report.cases:
        body = "".join(_attempt(a, attachments) for a in c.attempts)
        sections.append(
            f'<section id="{_anchor(c)}"><h2>{escape(c.flow)} on {escape(c.device)} '
            f"{escape(c.platform)} {_badge(c.verdict)}</h2>{body}</section>"
        )
    made = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(report.made_at))
    title = escape(report.title)
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>goalfleet report: {title}</title><style>{STYLE}</style></head><body>"
        f"<h1>{title}</h1><p class='muted'>batch {escape(report.batch.id)}, "
        f"{len(report.cases)} cases{_cost(report.cost)}, made {made}</p>"
        f'<p class="summary">{summary}</p><h2>Matrix</h2>{"".join(matrix)}'
        f"<h2>Runs</h2>{''.join(sections)}</body></html>"
    )
