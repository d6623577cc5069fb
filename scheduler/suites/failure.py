"""A failure report as people read it (`workers.core.failure` builds it): lines for
`goalfleet status` and `goalfleet run`, a section of the HTML report, and the command that
answers or re-runs the run — one wording for the CLI, the report and the console."""

from __future__ import annotations

import shlex
from html import escape

from workers.core.model import FailureReport, RunStatus
from workers.core.records import RunRecord


def next_command(run: RunRecord) -> str:
    """What answers the run (it waits for a person) or runs it again: the command line its
    host recorded (`goalfleet run`'s), else the fleet's."""
    if run.status is RunStatus.AWAITING_ANSWER:
        return f"goalfleet answer {run.id[:8]} --target NAME | --done | --blocked"
    failure = run.result.failure if run.result is not None else None
    if failure is not None and failure.command:
        return failure.command
    if run.flow:
        return f"goalfleet suite run FLOWS.yaml --only {shlex.quote(run.flow)}"
    where = f" --device {shlex.quote(run.device)}" if run.device else ""
    return f"goalfleet submit --goal {shlex.quote(run.request.goal)}{where}"


def _ranked(cands: tuple[tuple[str, str, float], ...]) -> str:
    return ", ".join(f"{ref} {name!r} {c:.2f}" for ref, name, c in cands) or "—"


def failure_lines(f: FailureReport, command: str) -> list[str]:
    """The report as plain lines (the CLI prints them; every value is the run's own text)."""
    fin = f.final
    if fin.error:
        screen = f"no fresh look: {fin.error}"
    else:
        names = ", ".join(repr(c.name) for c in fin.candidates) or "no candidates"
        shot = "picture kept" if fin.screenshot else f"no picture: {fin.screenshot_note}"
        screen = f"{fin.screen!r} ({names}; {shot})"
    lines = ["why it did not end done:", f"  ended on: {screen}"]
    for r in f.rankings:
        went = f" — went up: {r.escalated}" if r.escalated else ""
        lines.append(
            f"  step {r.step} {r.decider}: {r.answer}; ranked {_ranked(r.candidates)}{went}"
        )
    lines += [f"  refused at step {x.step} ({x.decider}: {x.claim}): {x.why}" for x in f.refusals]
    if f.escalation:
        lines.append("  escalation: " + " → ".join(p.split(":", 1)[0] for p in f.escalation))
    lines.append(f"  next: {command}")
    return lines


def failure_html(f: FailureReport, command: str, picture: str) -> str:
    """The report as a section of the HTML report; `picture` is the final screen's `<img>`
    (or a note) as the report embeds pictures."""
    fin = f.final
    if fin.error:
        ended = f"<p>no fresh look at the screen: {escape(fin.error)}</p>"
    else:
        names = ", ".join(escape(repr(c.name)) for c in fin.candidates) or "no candidates"
        ended = (
            f"<p>ended on <b>{escape(fin.screen)}</b>: {names}</p>"
            f'<div class="final">{picture}</div>'
        )
    ranks = "".join(
        f"<tr><td class='num'>{r.step}</td><td>{escape(r.decider)}</td><td>{escape(r.answer)}</td>"
        f"<td>{escape(_ranked(r.candidates))}</td><td>{escape(r.escalated)}</td></tr>"
        for r in f.rankings
    )
    refused = "".join(
        f"<tr><td class='num'>{x.step}</td><td>{escape(x.decider)}</td><td>{escape(x.claim)}</td>"
        f"<td>{escape(x.why)}</td></tr>"
        for x in f.refusals
    )
    path = " → ".join(escape(p) for p in f.escalation)
    return (
        '<div class="failure"><h4>Why it did not end done</h4>'
        f"{ended}"
        "<table><tr><th>step</th><th>decider</th><th>answer</th><th>ranked (confidence)</th>"
        f"<th>went up because</th></tr>{ranks}</table>"
        + (
            "<table><tr><th>step</th><th>decider</th><th>claim</th><th>refused because</th></tr>"
            f"{refused}</table>"
            if refused
            else ""
        )
        + (f"<p>escalation: {path}</p>" if path else "")
        + f"<p>next: <code>{escape(command)}</code></p></div>"
    )
