"""What a run's model calls cost, and the budget that stops a run before the call that would
cross it.

    prices = PriceTable(models={"openai/gpt-4o-mini": Price(input=0.15, output=0.60)})
    meter = Meter(prices, Budget(cost=0.01))     # built by `run_goal` from its params
    tier = meter.wrap(Tier("openai/gpt-4o-mini", decider))

The prices are the operator's (a settings file, `workers.settings.Settings.prices`): no price is
written in code. A call is priced by the decider's name (`provider/model`): the provider's
billed input tokens (our own count where it reports none) and output tokens, each per million.
A decider with no price (the rules, a script, a model not in the table) costs 0.

The budget is checked before each call: a call is made only while what the run has spent, plus
the largest call that decider has made in this run (its estimate of the next one), stays within
it. So no call is made past a spent budget; a call bigger than any before it may still carry
the run over by that difference (the estimate is the run's own history, not a guess).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from workers.core.chain import Tier
from workers.core.errors import BudgetExceededError, ConfigError
from workers.core.model import PROVIDER_SPEC, DecideState, Decision, TokenUsage
from workers.core.params import RunParams
from workers.core.prices import Budget, PriceTable, shown_cost

__all__ = ["Budget", "Ledger", "Meter", "PriceTable", "metered", "shown_cost"]


class Ledger(Protocol):
    """A suite's spending across its runs (`workers.fleet.spend.RedisLedger` in the fleet)."""

    def spent(self) -> tuple[int, float]: ...

    def add(self, tokens: int, cost: float) -> None: ...


def _tokens(usage: TokenUsage) -> int:
    return (usage.input_tokens or usage.counted_input_tokens) + usage.output_tokens


@dataclass
class Meter:
    """One run's spending across its decider chain: prices each decision (`usage.cost`) and
    refuses the call that would cross the budget."""

    prices: PriceTable
    budget: Budget = field(default_factory=Budget)
    suite: Budget = field(default_factory=Budget)
    """What the run's whole suite may spend, kept in `ledger`."""
    ledger: Ledger | None = None
    tokens: int = 0
    cost: float = 0.0
    largest: dict[str, tuple[int, float]] = field(default_factory=dict)
    """Each decider's largest call so far (tokens, cost): its estimate of the next one."""

    def wrap(self, tier: Tier) -> Tier:
        unpriced = PROVIDER_SPEC.match(tier.name) and self.prices.price(tier.name) is None
        if (self.budget.cost is not None or self.suite.cost is not None) and unpriced:
            raise ConfigError(
                f"budget_cost: {tier.name} has no price in the price table; add it "
                "(GOALFLEET_PRICE_FILE) or budget tokens instead"
            )
        return Tier(tier.name, _Metered(self, tier))

    def check(self, name: str) -> None:
        """Raise `BudgetExceededError` when `name`'s next call would cross the run's budget,
        or its suite's."""
        estimate = self.largest.get(name, (0, 0.0))
        self._within(self.budget, (self.tokens, self.cost), estimate, name, "")
        if self.ledger is not None and self.suite != Budget():
            self._within(self.suite, self.ledger.spent(), estimate, name, "suite ")

    def _within(
        self, b: Budget, spent: tuple[int, float], est: tuple[int, float], name: str, whose: str
    ) -> None:
        tokens, cost = spent
        if b.tokens is not None and (tokens >= b.tokens or tokens + est[0] > b.tokens):
            raise BudgetExceededError(
                f"{whose}token budget {b.tokens}: {tokens} spent, and {name}'s next call "
                f"(~{est[0]} tokens) would cross it"
            )
        if b.cost is not None and (cost >= b.cost or cost + est[1] > b.cost):
            raise BudgetExceededError(
                f"{whose}cost budget {b.cost:g} {self.prices.currency}: {cost:.6f} spent, and "
                f"{name}'s next call (~{est[1]:.6f}) would cross it"
            )

    def spend(self, name: str, d: Decision) -> Decision:
        cost = self.prices.cost(name, d.usage)
        tokens = _tokens(d.usage)
        self.tokens += tokens
        self.cost += cost
        was = self.largest.get(name, (0, 0.0))
        self.largest[name] = (max(was[0], tokens), max(was[1], cost))
        if self.ledger is not None and (tokens or cost):
            self.ledger.add(tokens, cost)
        if cost == 0.0:
            return d
        return d.model_copy(update={"usage": d.usage.model_copy(update={"cost": cost})})


@dataclass(frozen=True)
class _Metered:
    """A decider whose calls the meter checks before and prices after."""

    meter: Meter
    tier: Tier

    def decide(self, state: DecideState) -> Decision:
        self.meter.check(self.tier.name)
        return self.meter.spend(self.tier.name, self.tier.decider.decide(state))


def metered(
    tiers: tuple[Tier, ...],
    params: RunParams,
    prices: PriceTable | None,
    suite_budget: Budget | None = None,
    ledger: Ledger | None = None,
) -> tuple[Tier, ...]:
    """`tiers` under one `Meter`: each call priced (`prices`), refused past the run's budget
    (`params.budget_tokens` / `budget_cost`) or its suite's (`suite_budget`, kept in `ledger`);
    as given when nothing is priced or budgeted. One run, one meter: a journey's goal steps
    and checks spend from the same."""
    budget = Budget(tokens=params.budget_tokens, cost=params.budget_cost)
    suite = suite_budget if ledger is not None and suite_budget is not None else Budget()
    if prices is None and budget == Budget() and suite == Budget():
        return tiers
    meter = Meter(prices or PriceTable(), budget, suite, ledger)
    return tuple(meter.wrap(t) for t in tiers)
