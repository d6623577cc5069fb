"""When a run may end `done`: on evidence, never on a decider's word alone.

The loop checks every done claim here, whoever made it (a decider of the chain, the decision
memory), before it ends a run:

1. **The caller's condition is authoritative.** With `done_when`, the run ends `done` only when
   that text is visible (the loop looks before it asks anyone). A done claim while it is not
   visible is refused.
2. **Without `done_when`, the screen must corroborate the claim.** It is refused when
   - a dialog is in the way: a consent / cookie / privacy notice, a permission prompt, a
     "rate this app" / "what's new" / update interstitial (`interstitial`);
   - an input the caller supplied is not typed yet and an enabled text field is still empty;
   - it is the screen the run arrived on and it still offers a way forward: a text field, or a
     control named like the goal or a forward / accepting verb ("Sign in", "Continue",
     "Accept all"). A run whose goal is met on arrival ends `done` there only on a screen
     with none of those (a signed-in home screen).

A refused claim is an escalation cause, as a low confidence is: the same step asks the next
decider of the chain, and after the last the run ends `escalated` (parked for a person where
the fleet asks people). It never ends `done`, and so its decisions are never remembered.
Going on instead would ask the same decider the same question about the same screen.
"""

from __future__ import annotations

import functools
import re

from workers.core.model import Candidate, DecideState, Kind, Snapshot

_PRESSABLE = {Kind.BUTTON, Kind.LINK, Kind.MENU_ITEM, Kind.CELL, Kind.TAB}

INTERSTITIALS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "consent",
        (
            "cookie",
            "cookies",
            "we use cookies",
            "your privacy",
            "privacy choices",
            "privacy settings",
            "consent",
            "tracking",
            "personalised ads",
            "personalized ads",
            "data protection",
        ),
    ),
    (
        "permission",
        (
            "would like to send you notifications",
            "send you notifications",
            "allow notifications",
            "turn on notifications",
            "access your location",
            "use your location",
            "allow location",
            "would like to access",
            "allow access",
        ),
    ),
    (
        "rating",
        ("rate this app", "rate us", "enjoying", "leave a review", "how would you rate"),
    ),
    (
        "update",
        (
            "what's new",
            "whats new",
            "update available",
            "new version",
            "update required",
            "update now",
        ),
    ),
)
"""Screens apps put in the way of a flow, by kind, and the phrases that tell them (matched as
whole words in the screen's texts, case-insensitively)."""

FORWARD = (
    "continue",
    "next",
    "submit",
    "verify",
    "confirm",
    "send code",
    "sign in",
    "log in",
    "login",
    "sign on",
    "accept",
    "allow",
    "agree",
    "ok",
    "okay",
    "got it",
    "start",
    "get started",
)
"""Names of controls that move a flow on: a screen that offers one is not where it ends."""


def norm(text: str) -> str:
    """Casefolded, punctuation to spaces (apostrophes kept), whitespace collapsed."""
    folded = text.casefold().replace("\u2019", "'")
    return " ".join(re.sub(r"[^\w'@ -]", " ", folded).split())


def has(text: str, phrase: str) -> bool:
    """`phrase` in `text` as whole words, an underscore a word break as a space is (both
    normalised by the caller: `norm`)."""
    return _whole_words(phrase).search(text) is not None


@functools.lru_cache(maxsize=4096)
def _whole_words(phrase: str) -> re.Pattern[str]:
    """The pattern of `has`, compiled once per phrase: the vocabularies above hold more
    phrases than `re`'s own cache (512 patterns), which then compiled ~3 of them every run."""
    return re.compile(rf"(?<![^\W_]){re.escape(phrase)}(?![^\W_])")


def interstitial(texts: tuple[str, ...] | list[str]) -> str | None:
    """The kind of dialog these screen texts show ('consent', 'permission', 'rating',
    'update'), or None."""
    normed = [norm(t) for t in texts]
    for kind, phrases in INTERSTITIALS:
        if any(has(t, p) for t in normed for p in phrases):
            return kind
    return None


def forward(c: Candidate, goal: str) -> bool:
    """Whether `c` moves a flow on: a pressable control named like the goal or a forward verb."""
    if c.kind not in _PRESSABLE or not c.enabled:
        return False
    name = norm(c.name)
    return bool(name) and (has(name, goal) or any(has(name, w) for w in FORWARD))


def refusal(snap: Snapshot, state: DecideState, *, arrival: bool) -> str | None:
    """Why a done claim on this screen is not evidence of the goal reached, or None when the
    screen corroborates it. `arrival`: this is the screen the run started on."""
    if state.done_when:
        return f"done_when {state.done_when!r} is not visible"
    kind = interstitial([*snap.context, *(n.label for n in snap.nodes)])
    if kind is not None:
        return f"a {kind} dialog is in the way"
    untyped = [n for n in state.input_names if n not in state.used_inputs]
    empty = [c for c in snap.candidates if c.kind.fillable and c.enabled and not c.value.strip()]
    if untyped and empty:
        return f"input {untyped[0]!r} is not typed yet and {empty[0].name!r} is empty"
    if arrival:
        goal = norm(state.goal)
        onward = [c for c in snap.candidates if c.kind.fillable or forward(c, goal)]
        if onward:
            return f"it is the screen the run arrived on and it offers {onward[0].name!r}"
    return None
