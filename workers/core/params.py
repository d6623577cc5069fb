"""Run parameters: one definition (default, bounds, description) for the API request, the CLI
flags and `run_goal`.

    class GoalRunRequest(RunParams): ...        # the API body carries them flat
    add_run_param_flags(parser)                 # --max-steps etc., defaults and help from here
    run_goal(device, goal, decider=d, params=RunParams(max_steps=6))
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

MAX_STEPS_LIMIT = 100
HISTORY_LINES = 4
"""How many short lines about earlier steps a decider is shown (newest last)."""


class RunParams(BaseModel):
    """How far a run may go and how sure its decider must be."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_steps: Annotated[
        int,
        Field(
            ge=1,
            le=MAX_STEPS_LIMIT,
            description="steps before the run ends max-steps; a sign-in is 4-6 actions, 12 "
            "leaves room for a stale-ref re-snapshot or two and a code screen",
        ),
    ] = 12
    min_confidence: Annotated[
        float,
        Field(
            ge=0.0,
            le=1.0,
            description="a decision below this confidence escalates (below an even bet the "
            "decider is guessing)",
        ),
    ] = 0.5
    max_unproductive: Annotated[
        int,
        Field(
            ge=0,
            le=20,
            description="actions in a row that may change nothing; one more ends the run blocked",
        ),
    ] = 2
    done_when: Annotated[
        str | None,
        Field(max_length=200, description="text whose appearance on screen means done"),
    ] = None
    moves: Annotated[
        bool,
        Field(
            description="offer the decider the device's moves (scroll down, scroll up, go "
            "back) beside the screen's elements, to reach a target off screen; false: the "
            "elements only",
        ),
    ] = True
    budget_tokens: Annotated[
        int | None,
        Field(
            gt=0,
            description="model tokens (input + output) the run may spend; the call that would "
            "cross it is not made and the run ends over-budget",
        ),
    ] = None
    budget_cost: Annotated[
        float | None,
        Field(
            gt=0,
            description="what the run's model calls may cost, by the operator's price table "
            "(GOALFLEET_PRICE_FILE); the call that would cross it is not made",
        ),
    ] = None


DEFAULT_PARAMS = RunParams()
