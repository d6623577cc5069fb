"""When a run may end `done`: on evidence, never on a decider's word alone.

The loop checks every done claim here, whoever made it (a decider of the chain, the decision
memory), before it ends a run:

1. **The caller's condition is authoritative.** With `done_when`, the run ends `done` only when
   that text is visible (the loop looks before it asks anyone). A done claim while it is not
   visible is refused.
2. **Without `done_when`, the screen must corroborate the claim.** It is refused when
   - a dialog is in the way, by the static texts of the app's content (`Snapshot.texts`,
     uncapped; never the chrome: the application's name, window titles): a consent / cookie
     / privacy notice, a permission prompt, a "rate this app" / "what's new" / update
     interstitial (`workers.core.words.interstitial`, which the rules decider asks about
     the same texts);
   - an input the caller supplied is not typed yet and an enabled text field is still empty;
   - it is the screen the run arrived on and it still offers a way forward: a text field, or a
     control named like the goal or a forward / accepting verb ("Sign in", "Continue",
     "Weiter", "Accept all": `workers.core.words.onward`). A run whose goal is met on
     arrival ends `done` there only on a screen with none of those (a signed-in home screen).

A refused claim is an escalation cause, as a low confidence is: the same step asks the next
decider of the chain, and after the last the run ends `escalated` (parked for a person where
the fleet asks people). It never ends `done`, and so its decisions are never remembered.
Going on instead would ask the same decider the same question about the same screen.
"""

from __future__ import annotations

from workers.core.model import DecideState, Snapshot
from workers.core.words import interstitial, norm, onward


def refusal(snap: Snapshot, state: DecideState, *, arrival: bool) -> str | None:
    """Why a done claim on this screen is not evidence of the goal reached, or None when the
    screen corroborates it. `arrival`: this is the screen the run started on."""
    if state.done_when:
        return f"done_when {state.done_when!r} is not visible"
    kind = interstitial(snap.texts)
    if kind is not None:
        return f"a {kind} dialog is in the way"
    untyped = [n for n in state.input_names if n not in state.used_inputs]
    empty = [c for c in snap.candidates if c.kind.fillable and c.enabled and not c.value.strip()]
    if untyped and empty:
        return f"input {untyped[0]!r} is not typed yet and {empty[0].name!r} is empty"
    if arrival:
        goal = norm(state.goal)
        ways = [
            c
            for c in snap.candidates
            if c.kind.fillable or (c.kind.pressable and c.enabled and onward(norm(c.name), goal))
        ]
        if ways:
            return f"it is the screen the run arrived on and it offers {ways[0].name!r}"
    return None
