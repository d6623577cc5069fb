"""`RulesDecider`: an offline, deterministic baseline with no model.

It exists so the demo and the tests run without keys, and as the floor a model must beat.
Each step, in order:

1. **Done** when the `done_when` marker is visible, or when a success word ("Welcome",
   "signed in", ...) is visible on a screen with no text field left to fill and no control
   matching the goal (so a sign-in screen titled "Welcome back" is not mistaken for success).
2. **Fill** the first text field whose name matches an input not typed yet: by the input's
   own name ("Email" ← `email`), by synonyms (`username` ← "Email or username", `code`/`otp`
   ← "Verification code", `phone` ← "Mobile number"), and a secure field takes the
   password-like input.
3. **Switch on** an off "I agree"/"Accept terms" checkbox or switch, once.
4. **Press** the control that best matches the goal: the goal's own words ("Sign in" ≈
   "Log in"), then generic forward verbs (continue, next, submit, verify, done), then accepting
   verbs on alerts (allow, accept, agree, ok). Never a distractor — "Forgot password?",
   "Create account", "Sign up", "Sign in with Apple", "Don't Allow", "Cancel", "Back",
   "Resend code" — unless the goal names it.
5. **Scroll down** when nothing applies and the loop offers the move (`workers.core.moves`);
   **blocked** when nothing applies and it does not, or the scroll moved nothing.

It first checks that it understands the goal: the sign-in family only ("Sign in", "Log in",
"Continue as ada", "Sign in with email", ...). Any other goal ("Delete account", "xyzzy") is
answered `blocked` at once, with a reason saying what it understands — it never acts on, or
reports success for, a goal it cannot read. And after every input is typed, a visible error
text ("Wrong password", "Too many attempts") is `blocked` with that text, instead of
pressing the submit button again (a lockout risk).

Confidence reflects the match: an exact name or goal phrase ~0.95, a synonym ~0.85-0.9, a
generic forward verb 0.8, an accepting alert button 0.75 — and 0.4 when two controls match
equally well ("Continue as ada" / "Continue as guest"): a guess, which escalates.

Limits (honest): it reads English labels only; it knows a fixed vocabulary of field names and
verbs, so an app that says "Proceed" or "Let's go", an icon-only button, or a field named
"Your handle" defeats it; it types each input once (a field re-shown after a wrong password is
not retyped, so the run goes unproductive and ends blocked); it cannot solve a code split over
six one-digit boxes, a captcha, a picker, or any screen that needs reading comprehension (a
button below the fold it reaches by scrolling down, where the loop offers the move, when
nothing on screen applies); "success" is a word list, not an understanding of the screen.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from workers.core.fields import takes
from workers.core.model import (
    MAX_RANKED,
    Candidate,
    DecideState,
    Decision,
    Kind,
    RankedCandidate,
)
from workers.core.moves import SCROLL_DOWN, scrolled_down_last
from workers.core.words import (
    ACCEPTING,
    ACCESS_SUBJECTS,
    ALTERNATE,
    CONSENT_TOGGLE,
    DECLINES,
    DISMISS,
    DISTRACTORS,
    ERROR_WORDS,
    FORWARD,
    FULL_CONSENT,
    GOAL_PHRASES,
    GRANTS,
    LIMITED_GRANTS,
    MINIMAL_CONSENT,
    NEVER_ON_DIALOGS,
    SIGN_IN_GOALS,
    SUCCESS_WORDS,
    has,
    has_any,
    interstitial,
    norm,
    permission_subject,
    shown,
)

AMBIGUOUS = 0.4
"""The confidence of a guess (a press between equally matching controls, a grant no narrower
choice replaces): below the default `min_confidence`, so the step escalates (to the next
decider, then a person)."""
SCROLL_ON = 0.7
"""The confidence of a scroll down when nothing on screen applies (`workers.core.moves`): the
loop offers it only where the device scrolls, and not again on a screen it did not move."""
UNDERSTOOD = '"Sign in", "Log in", "Continue as <name>", "Sign in with <method>"'


@dataclass(frozen=True)
class _Scored:
    candidate: Candidate
    score: float
    why: str


class RulesDecider:
    """Deterministic rules over names and verbs; see the module docstring for what it does and
    what it cannot do."""

    def decide(self, state: DecideState) -> Decision:
        goal = norm(state.goal)
        if not has_any(goal, SIGN_IN_GOALS):
            return Decision(
                blocked=True,
                confidence=1.0,
                reason=f"the rules decider understands sign-in goals only ({UNDERSTOOD}); "
                "use a model decider for this goal",
                decided_by="rules",
                confidence_source="rules",
            )
        return self._sign_in(state, goal).model_copy(
            update={"decided_by": "rules", "confidence_source": "rules"}
        )

    def _sign_in(self, state: DecideState, goal: str) -> Decision:
        fill = self._fill(state)
        presses = self._presses(state, goal)
        first = next(
            (
                d
                for d in (
                    self._refused(state, can_fill=fill is not None),
                    self._dialog(state),
                    self._done(state, can_fill=fill is not None, presses=presses),
                    fill,
                    self._toggle(state),
                )
                if d is not None
            ),
            None,
        )
        if first is not None:
            return first
        fresh = [p for p in presses if p.candidate.ref not in state.futile]
        if fresh:
            return self._press(fresh, state)
        down = next(
            (c for c in state.candidates if c.kind is Kind.MOVE and c.ref == SCROLL_DOWN.ref), None
        )
        # the rest of the form may be below the fold; a screen with no usable control at all
        # is blocked with its counts at once (its toolkit may not report its controls' state),
        # unless the last step scrolled down into it (a stretch of text between the fields
        # and the button)
        if down is not None and (
            scrolled_down_last(state.history)
            or any(c.kind is not Kind.MOVE for c in state.candidates)
        ):
            return Decision(
                target=down.ref,
                confidence=SCROLL_ON,
                reason="nothing on screen advances the goal: the rest may be below",
            )
        names = ", ".join(repr(c.name) for c in state.candidates[:6]) or "no candidates"
        return Decision(
            blocked=True,
            confidence=0.9,
            reason=f"no field matches an untyped input and no control matches the goal ({names})",
        )

    @staticmethod
    def _press(presses: list[_Scored], state: DecideState) -> Decision:
        best = presses[0]
        ranked = tuple(
            RankedCandidate(ref=p.candidate.ref, confidence=p.score) for p in presses[:MAX_RANKED]
        )
        tied = [p.candidate.name for p in presses if p.score == best.score]
        if len(tied) > 1:  # two equally good controls: a guess, so say so
            return Decision(
                target=best.candidate.ref,
                confidence=AMBIGUOUS,
                reason=f"ambiguous: {', '.join(repr(n) for n in tied[:3])} match equally"[:200],
                ranked=ranked,
            )
        return Decision(
            target=best.candidate.ref,
            confidence=best.score,
            reason=f"press {best.candidate.name!r}: {best.why}{_tried(state)}"[:200],
            ranked=ranked,
        )

    @staticmethod
    def _dialog(state: DecideState) -> Decision | None:
        """A dialog in the way (`workers.core.words.interstitial`): press what closes it
        with the least given away (a consent: reject or necessary-only before accept; a
        rating or update: not now; a permission prompt: `_permission`). Never "Manage
        choices" or a settings link."""
        kind = interstitial(state.context)
        if kind is None:
            return None
        pressable = [
            c
            for c in state.candidates
            if c.kind.pressable
            and c.enabled
            and c.ref not in state.futile  # pressed here already: it changed nothing
            and not has_any(norm(c.name), NEVER_ON_DIALOGS)
        ]
        if kind == "permission":
            # a form saying "Sign in to allow access to your files" asks no question
            if any(c.kind.fillable for c in state.candidates):
                return None
            return _permission(pressable, permission_subject(state.context) or "access")
        order = (MINIMAL_CONSENT, FULL_CONSENT) if kind == "consent" else (DISMISS,)
        for score, words in zip((0.9, 0.8), order, strict=False):
            if (c := _first(pressable, words)) is not None:
                return Decision(
                    target=c.ref,
                    confidence=score,
                    reason=f"a {kind} dialog is in the way: press {c.name!r}{_tried(state)}"[:200],
                )
        return None

    @staticmethod
    def _refused(state: DecideState, *, can_fill: bool) -> Decision | None:
        """An input typed, nothing left to type here, and an error text on screen: the app
        refused what was submitted (blocked with its text; never submitted again)."""
        if not state.used_inputs or can_fill:
            return None
        for text in state.context:
            if has_any(norm(text), ERROR_WORDS):
                return Decision(
                    blocked=True,
                    confidence=0.9,
                    reason=f"the app shows {text[:80]!r} after every input was typed",
                )
        return None

    # -- done ---------------------------------------------------------------------------

    def _done(
        self, state: DecideState, *, can_fill: bool, presses: list[_Scored]
    ) -> Decision | None:
        texts = [*state.context, *(c.name for c in state.candidates)]  # as `Snapshot.shows`
        if state.done_when and shown(state.done_when, texts):
            return Decision(done=True, confidence=1.0, reason=f"{state.done_when!r} is visible")
        if can_fill or presses:
            return None  # "Welcome back" above a form, "Welcome to Acme" above a chooser
        for word in SUCCESS_WORDS:
            if any(has(norm(t), word) for t in state.context):
                return Decision(done=True, confidence=0.8, reason=f"success text {word!r} visible")
        return None

    # -- fill ---------------------------------------------------------------------------

    def _fill(self, state: DecideState) -> Decision | None:
        untyped = [n for n in state.input_names if n not in state.used_inputs]
        best: tuple[float, Candidate, str, str] | None = None
        for c in state.candidates:
            if not c.kind.fillable:
                continue
            for input_name in untyped:
                score, why = takes(c, input_name)
                if score and (best is None or score > best[0]):
                    best = (score, c, input_name, why)
            if best is not None:
                break  # top to bottom: the first fillable field with a match
        if best is None:
            return None
        score, c, input_name, why = best
        return Decision(
            target=c.ref, input=input_name, confidence=score, reason=f"fill {c.name!r}: {why}"
        )

    # -- toggles ------------------------------------------------------------------------

    @staticmethod
    def _toggle(state: DecideState) -> Decision | None:
        for c in state.candidates:
            if not c.kind.stateful:
                continue
            name = norm(c.name)
            off = c.value.strip().casefold() in {"", "0", "false", "off", "unchecked"}
            pressed_before = any(f"pressed {c.name}" in h for h in state.history)
            if off and not pressed_before and has_any(name, CONSENT_TOGGLE):
                return Decision(target=c.ref, confidence=0.7, reason=f"switch on {c.name!r}")
        return None

    # -- presses ------------------------------------------------------------------------

    @staticmethod
    def _goal_phrases(goal: str) -> list[str]:
        phrases = [goal] if goal else []
        for group in GOAL_PHRASES:
            if has_any(goal, group):
                phrases.extend(group)
        return phrases

    def _presses(self, state: DecideState, goal: str) -> list[_Scored]:
        phrases = self._goal_phrases(goal)
        scored: list[_Scored] = []
        for c in state.candidates:
            if not c.kind.pressable:
                continue
            s = self._press_score(norm(c.name), goal, phrases, state.input_names)
            if s is not None:
                scored.append(_Scored(c, *s))
        scored.sort(key=lambda s: -s.score)  # stable: ties keep screen order
        return scored

    @staticmethod
    def _press_score(
        name: str, goal: str, phrases: list[str], inputs: tuple[str, ...]
    ) -> tuple[float, str] | None:
        if not name or _excluded(name, goal, inputs):
            return None
        if name == goal:
            return 0.97, "goal: the goal's own words"
        tiers: tuple[tuple[float, Iterable[str], bool, str], ...] = (
            (0.95, phrases, True, "goal: {} means the goal"),
            (0.85, phrases, False, "goal: contains {}"),
            (0.8, FORWARD, False, "forward verb {}"),
            (0.75, ACCEPTING, False, "accepting verb {}"),
        )
        for score, words, exact, why in tiers:
            for w in words:
                if (name == w) if exact else has(name, w):
                    return score, why.format(repr(w))
        return None


def _first(candidates: list[Candidate], words: tuple[str, ...]) -> Candidate | None:
    """The first candidate named by the first of `words` that names one."""
    for w in words:
        for c in candidates:
            if has(norm(c.name), w):
                return c
    return None


def _permission(pressable: list[Candidate], subject: str) -> Decision | None:
    """The narrowest answer to a permission prompt asking for `subject`
    (`workers.core.words.permission_subject`) that keeps a sign-in going: what no sign-in
    needs (notifications, tracking) is declined; access (location, camera, …) gets a grant
    that ends by itself ("Allow once", then "While using the app"), else it is declined.
    With neither on offer, the full grant is a person's call: pressed at `AMBIGUOUS`. None
    when no control answers it (the other rules read the screen)."""
    order = (DECLINES,) if subject not in ACCESS_SUBJECTS else (LIMITED_GRANTS, DECLINES)
    for words in order:
        if (c := _first(pressable, words)) is not None:
            return Decision(
                target=c.ref,
                confidence=0.9,
                reason=f"a permission dialog ({subject}) is in the way: press {c.name!r}",
            )
    if (c := _first(pressable, GRANTS)) is not None:
        return Decision(
            target=c.ref,
            confidence=AMBIGUOUS,
            reason=f"a permission dialog ({subject}) offers nothing narrower than {c.name!r}",
        )
    return None


def _tried(state: DecideState) -> str:
    """What was pressed here before and changed nothing, for the reason: "; 'Reject all'
    changed nothing"."""
    names = [c.name for c in state.candidates if c.ref in state.futile]
    return f"; {', '.join(repr(n) for n in names)} changed nothing" if names else ""


def _excluded(name: str, goal: str, inputs: tuple[str, ...] = ()) -> bool:
    """A distractor ("Forgot password?", "Don't Allow", "Sign in with Apple") the goal does
    not name."""
    if has_any(name, DECLINES) and not has_any(goal, DECLINES):
        return True
    alternate = ALTERNATE.search(name)
    method = alternate.group(0).split()[-1] if alternate else ""
    if alternate and not has(goal, alternate.group(0)) and method not in inputs:
        return True  # "Continue with email" is the way when the caller gave an email
    return any(has(name, d) and not has(goal, d) for d in DISTRACTORS)
