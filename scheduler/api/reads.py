"""Which run or batch an id names for a principal, and whether it may see that run's pictures:
the rule every run route, the console and the answer route share (`scheduler.api.views` says
what of it is shown)."""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.api.views import need, readable_batch, readable_run
from scheduler.errors import ForbiddenError
from scheduler.service.fleet import Fleet
from scheduler.service.run_ids import RunIds
from workers.core.access import Action, Principal
from workers.core.model import RunStatus
from workers.core.records import BatchRecord, RunRecord


@dataclass(frozen=True)
class Reads:
    """A run or batch id in a path may be a unique prefix (6+ characters) of one."""

    fleet: Fleet
    run_ids: RunIds
    batch_ids: RunIds

    @staticmethod
    def scope(who: Principal) -> str | None:
        """The owner a prefix is matched among (None: everyone's)."""
        return None if who.sees_all else who.name

    def run(self, who: Principal, run_id: str) -> RunRecord:
        """The run `run_id` names, as `who` may see it (404 when it may not)."""
        need(who, Action.READ_OWN, Action.READ_ANY)
        return readable_run(
            who, self.fleet.run(self.run_ids.resolve(run_id, owner=self.scope(who)))
        )

    def batch(self, who: Principal, batch_id: str) -> BatchRecord:
        need(who, Action.READ_OWN, Action.READ_ANY)
        found = self.fleet.batch(self.batch_ids.resolve(batch_id, owner=self.scope(who)))
        return readable_batch(who, found)

    def pictured(self, who: Principal, run_id: str) -> RunRecord:
        """The run `run_id` names, when `who` may see its step pictures (the screenshot routes'
        question, and the console's): for the run's owner and `admin` (a picture shows the
        plain inputs the run typed), and, while the run waits for an answer, for whoever may
        answer it (`Principal.may_see_pictures`). 404 where `who` may not read the run (as
        an unknown one); 403 where it may, but not its pictures."""
        if who.may(Action.READ_OWN) or who.may(Action.READ_ANY):
            run = self.run(who, run_id)
        else:  # an answerer, who reads no runs: the run its question is about
            need(who, Action.ANSWER)
            run = self.fleet.run(self.run_ids.resolve(run_id))
        if not who.may_see_pictures(run.owner, waiting=run.status is RunStatus.AWAITING_ANSWER):
            raise ForbiddenError(
                who.describe(),
                "see another token's screenshots (they show its inputs), or those of a run "
                "that waits for no answer",
                "admin",
            )
        return run
