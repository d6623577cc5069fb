"""Measure a decider on recorded decide states: the eval corpus and its scoring.

A case is one `DecideState` exactly as a decider would be asked it (input *names* only, no
values, no secrets) and the expected answer in ref-independent form:

    {"id": "sim-signin-ios-email-1", "source": "sim:signin-ios", "tags": ["sim", "ios"],
     "state": {...DecideState...},
     "expect": {"target": {"kind": "text-field", "name": "Email", "ordinal": 0},
                "input": "email"},
     "distractors": ["Forgot password?", "Create account"]}

`expect` is one of: a candidate (by kind + name + ordinal among identical ones) with the input
to type into it (text fields) — or `{"done": true}` — or `{"blocked": true}`.

`evaluate(decider, cases)` asks the decider every case once and scores it: exact target and
input, false `done` (the worst answer: a run that reports success it did not reach), presses of
a listed distractor, latency, tokens (ours and provider-billed), calls and re-asks.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from workers import stats
from workers.core.errors import DecideError, DecisionInvalidError
from workers.core.memory import Target
from workers.core.model import NONE, DecideState, Decision
from workers.core.ports import Decider

LOW_CONFIDENCE = 0.5
"""Answers below the loop's default `min_confidence` escalate in a run; counted apart."""
DEFAULT_CASES = Path(__file__).parent / "corpus" / "cases.jsonl"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


CandidateKey = Target
"""A candidate without its ref (kind + name + ordinal): the memory's `Target`."""


class Expect(_Frozen):
    """The right answer: a target (with an input for text fields), or done, or blocked."""

    target: CandidateKey | None = None
    input: str | None = None
    done: bool = False
    blocked: bool = False

    @model_validator(mode="after")
    def _one_answer(self) -> Self:
        if (self.target is not None) + self.done + self.blocked != 1:
            raise ValueError("expect exactly one of target, done or blocked")
        if self.input is not None and self.target is None:
            raise ValueError("input goes with a target")
        return self

    def describe(self) -> str:
        if self.done:
            return "done"
        if self.blocked:
            return "blocked"
        if self.target is None:  # pragma: no cover - the validator rules it out
            return "?"
        text = f"{self.target.kind.value} {self.target.name!r}"
        if self.target.ordinal:
            text += f" #{self.target.ordinal}"
        return text + (f" ← {self.input}" if self.input else "")


class EvalCase(_Frozen):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_.-]{0,80}$")
    source: str
    """Where the state came from: `sim:<app>-<platform>`, `agent-device:linux <app>`, `hand`,
    or `run:<id>` (captured from a run's step rows)."""
    tags: tuple[str, ...] = ()
    state: DecideState
    expect: Expect
    distractors: tuple[str, ...] = ()
    """Candidate names that are wrong in a tempting way; pressing one is counted apart."""
    note: str = ""

    @model_validator(mode="after")
    def _expect_fits_state(self) -> Self:
        if self.expect.target is not None:
            target = self.expect.target.find(self.state.candidates)
            if target is None:
                raise ValueError(f"expected target {self.expect.describe()} is not on screen")
            if target.kind.fillable != (self.expect.input is not None):
                raise ValueError("a text field needs an input, and only a text field takes one")
            if self.expect.input is not None and self.expect.input not in self.state.input_names:
                raise ValueError(f"expected input {self.expect.input!r} is not an input name")
        if any(c.value and not c.kind.stateful for c in self.state.candidates):
            raise ValueError("a case holds no field values (they may be typed inputs)")
        return self


def load_cases(path: Path = DEFAULT_CASES) -> list[EvalCase]:
    """Read a JSON-lines corpus; a bad line is a ValueError naming the line and the problem."""
    cases: list[EvalCase] = []
    seen: set[str] = set()
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("//"):
            continue
        try:
            case = EvalCase.model_validate_json(line)
        except ValueError as exc:
            first = str(exc).splitlines()
            raise ValueError(f"{path}:{number}: {' '.join(first[:3])}") from None
        if case.id in seen:
            raise ValueError(f"{path}:{number}: case id {case.id!r} appears twice")
        seen.add(case.id)
        cases.append(case)
    return cases


def dump_case(case: EvalCase) -> str:
    return json.dumps(case.model_dump(mode="json", exclude_defaults=True), ensure_ascii=False)


# -- scoring --------------------------------------------------------------------------------


@dataclass(frozen=True)
class CaseResult:
    case_id: str
    expected: str
    answer: str
    correct: bool
    false_done: bool
    distractor: bool
    error: str = ""
    ms: float = 0.0
    counted_tokens: int = 0
    billed_tokens: int = 0
    calls: int = 0
    """Model requests (0 for a decider that calls no model)."""
    reasks: int = 0
    """Requests beyond the first: re-asks, and a self-report fallback where logprobs fail."""
    confidence: float = 0.0
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class TagScore:
    """One tag's share of a report: its cases, how many were right, its false dones."""

    tag: str
    cases: int
    correct: int
    false_done: int

    @property
    def accuracy(self) -> float:
        return self.correct / self.cases if self.cases else 0.0


def describe(decision: Decision, state: DecideState) -> str:
    if decision.done:
        return "done"
    if decision.blocked:
        return "blocked"
    key = CandidateKey.of(state.candidates, decision.target)
    if key is None:
        return f"{decision.target}?"
    text = f"{key.kind.value} {key.name!r}" + (f" #{key.ordinal}" if key.ordinal else "")
    return text + (f" ← {decision.input}" if decision.input != NONE else "")


def score(case: EvalCase, decision: Decision) -> tuple[bool, bool, bool]:
    """(correct, false_done, distractor) for one answer."""
    e = case.expect
    false_done = decision.done and not e.done
    if decision.done or decision.blocked:
        correct = (decision.done and e.done) or (
            decision.blocked and e.blocked and not decision.done
        )
        return correct, false_done, False
    key = CandidateKey.of(case.state.candidates, decision.target)
    distractor = key is not None and key.name in case.distractors
    if e.target is None or key is None:
        return False, false_done, distractor
    typed = None if decision.input == NONE else decision.input
    return key == e.target and typed == e.input, false_done, distractor


def _failed(case_id: str, expected: str, answer: str, exc: Exception, ms: float) -> CaseResult:
    return CaseResult(
        case_id=case_id,
        expected=expected,
        answer=answer,
        correct=False,
        false_done=False,
        distractor=False,
        error=str(exc)[:200],
        ms=ms,
    )


def run_case(decider: Decider, case: EvalCase, clock: Callable[[], float]) -> CaseResult:
    expected = case.expect.describe()
    t0 = clock()
    try:
        decision = decider.decide(case.state)
    except DecisionInvalidError as exc:
        ms = (clock() - t0) * 1000
        return replace(_failed(case.id, expected, "invalid", exc, ms), tags=case.tags)
    except DecideError as exc:
        ms = (clock() - t0) * 1000
        return replace(_failed(case.id, expected, "error", exc, ms), tags=case.tags)
    ms = (clock() - t0) * 1000
    correct, false_done, distractor = score(case, decision)
    calls = decision.usage.requests
    return CaseResult(
        case_id=case.id,
        expected=expected,
        answer=describe(decision, case.state),
        correct=correct,
        false_done=false_done,
        distractor=distractor,
        ms=ms,
        counted_tokens=decision.usage.counted_input_tokens,
        billed_tokens=decision.usage.input_tokens,
        calls=calls,
        reasks=max(0, calls - 1),
        confidence=decision.confidence,
        tags=case.tags,
    )


def percentile(values: Sequence[float], q: float) -> float:
    """`workers.stats.percentile` (nearest-rank, q in 0..100); 0.0 for no values."""
    return stats.percentile(values, q) if values else 0.0


@dataclass
class Report:
    decider: str
    results: list[CaseResult] = field(default_factory=list)

    @property
    def cases(self) -> int:
        return len(self.results)

    @property
    def correct(self) -> int:
        return sum(r.correct for r in self.results)

    @property
    def accuracy(self) -> float:
        return self.correct / self.cases if self.cases else 0.0

    @property
    def false_done(self) -> int:
        return sum(r.false_done for r in self.results)

    @property
    def distractor_presses(self) -> int:
        return sum(r.distractor for r in self.results)

    def by_tag(self) -> list[TagScore]:
        """Accuracy and false dones per tag (a case counts under each of its tags), by tag."""
        tags = sorted({tag for r in self.results for tag in r.tags})
        return [
            TagScore(
                tag=tag,
                cases=len(rs := [r for r in self.results if tag in r.tags]),
                correct=sum(r.correct for r in rs),
                false_done=sum(r.false_done for r in rs),
            )
            for tag in tags
        ]

    def ms(self, q: float) -> float:
        return percentile([r.ms for r in self.results], q)

    def tokens(self, which: str, q: float) -> float:
        values = [getattr(r, f"{which}_tokens") for r in self.results]
        return percentile([v for v in values if v], q)

    def summary(self) -> dict[str, object]:
        return {
            "decider": self.decider,
            "cases": self.cases,
            "correct": self.correct,
            "accuracy": round(self.accuracy, 4),
            "false_done": self.false_done,
            "distractor_presses": self.distractor_presses,
            "errors": sum(bool(r.error) for r in self.results),
            "latency_ms_p50": round(self.ms(50), 3),
            "latency_ms_p95": round(self.ms(95), 3),
            "tokens_ours_p50": self.tokens("counted", 50),
            "tokens_ours_max": max((r.counted_tokens for r in self.results), default=0),
            "tokens_billed_p50": self.tokens("billed", 50),
            "low_confidence": sum(
                1 for r in self.results if not r.error and r.confidence < LOW_CONFIDENCE
            ),
            "calls": sum(r.calls for r in self.results),
            "reasks": sum(r.reasks for r in self.results),
            "tags": {
                s.tag: {
                    "cases": s.cases,
                    "accuracy": round(s.accuracy, 4),
                    "false_done": s.false_done,
                }
                for s in self.by_tag()
            },
        }


def evaluate(
    decider: Decider,
    cases: Iterable[EvalCase],
    *,
    name: str = "",
    clock: Callable[[], float] = time.perf_counter,
    progress: Callable[[CaseResult], None] | None = None,
) -> Report:
    report = Report(decider=name)
    for case in cases:
        result = run_case(decider, case, clock)
        report.results.append(result)
        if progress is not None:
            progress(result)
    return report
