"""The operator's price table and a run's budget, as settings read them (this module imports
no run model, so reading settings stays cheap: tests/unit/test_settings_env.py). What they
price and stop is `workers.core.cost`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from workers.core.model import TokenUsage

PER = 1_000_000
"""Prices are per this many tokens."""


class Price(BaseModel):
    """One model's price, in the operator's currency per million tokens."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input: Annotated[float, Field(ge=0)]
    output: Annotated[float, Field(ge=0)]


class PriceTable(BaseModel):
    """Prices by decider name (`provider/model`, as `--decider` and `escalate_to` name it)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    currency: Annotated[str, Field(min_length=1, max_length=8)] = "USD"
    models: dict[str, Price] = {}

    def price(self, decider: str) -> Price | None:
        return self.models.get(decider)

    def cost(self, decider: str, usage: TokenUsage) -> float:
        """What `usage` cost on `decider` (0 with no price for it)."""
        price = self.price(decider)
        if price is None:
            return 0.0
        billed_in = usage.input_tokens or usage.counted_input_tokens
        return (billed_in * price.input + usage.output_tokens * price.output) / PER


class Budget(BaseModel):
    """The most a run may spend on model calls: tokens (input + output), cost, or both."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tokens: Annotated[int | None, Field(gt=0)] = None
    cost: Annotated[float | None, Field(gt=0)] = None


def shown_cost(cost: float) -> str:
    """A cost as tables show it: "" for none, else to a millionth (`0.0028`)."""
    return f"{cost:.6f}".rstrip("0").rstrip(".") if cost > 0 else ""
