"""Questions for people: list the open ones, answer one (`answer` or `admin`: an answer
teaches the whole fleet, so it is no `submit` right).

    GET  /v1/questions               open questions, the one expiring first first
    POST /v1/runs/{run_id}/answer    {"target": "Continue as ada"} | {"ref": "e7"} |
                                     {"done": true} | {"blocked": true}

An answer is recorded as the answering token's name. A run parked for a person is cancelled
with the usual `POST /v1/runs/{id}/cancel`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from fastapi import APIRouter
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from scheduler.api.bodies import BoundedRoute
from scheduler.api.views import Who, need, shown_questions, shown_run
from scheduler.errors import ConflictError, InvalidRequestError
from scheduler.service.fleet import Fleet
from workers.core.access import Action, Principal
from workers.core.errors import ConfigError
from workers.core.records import Answer, Question, RunRecord
from workers.fleet.state.questions import NotAwaitingError, QuestionStore

ANSWER_BUCKETS = (10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400)


class QuestionsCollector(Collector):
    """Open questions and the age of the oldest, read at scrape time."""

    def __init__(self, store: QuestionStore, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clock = clock

    def describe(self) -> Iterator[GaugeMetricFamily]:
        """The names only: registering asks nothing of Redis (with no `describe`, the
        registry would `collect` at registration, and an API started with Redis down failed
        with a traceback there)."""
        yield GaugeMetricFamily("goalfleet_questions_open", "")
        yield GaugeMetricFamily("goalfleet_question_oldest_age_seconds", "")

    def collect(self) -> Iterator[GaugeMetricFamily]:
        open_ = self.store.open()
        now = self.clock()
        yield GaugeMetricFamily(
            "goalfleet_questions_open", "Runs parked for a person's answer.", value=len(open_)
        )
        yield GaugeMetricFamily(
            "goalfleet_question_oldest_age_seconds",
            "How long the oldest open question has waited (0 with none).",
            value=max((now - q.asked_at for q in open_), default=0.0),
        )


class Answers:
    """A person's answer to a run's question, as the route and the console give it: the roles
    checked, the answer recorded (`QuestionStore.answer`: one script), counted and timed."""

    def __init__(
        self,
        questions: QuestionStore,
        fleet: Fleet,
        *,
        registry: CollectorRegistry,
        resolve: Callable[[str], str] = str,
    ) -> None:
        """`resolve` turns a run id as given (a unique prefix of 6+ will do) into the whole
        id."""
        self.questions, self.fleet, self.resolve = questions, fleet, resolve
        self.answers = Counter(
            "goalfleet_answers",
            "Questions answered by a person, by answer kind (target, done, blocked).",
            ["answer"],
            registry=registry,
        )
        self.time_to_answer = Histogram(
            "goalfleet_time_to_answer_seconds",
            "From a run being parked to a person's answer.",
            buckets=ANSWER_BUCKETS,
            registry=registry,
        )
        registry.register(QuestionsCollector(questions))

    def answer(self, run_id: str, body: Answer, who: Principal) -> RunRecord:
        """Answer the question of `run_id` (a unique prefix will do) as `who`, if its roles
        grant it: the route's code, and the console's (`scheduler.console.pages`)."""
        need(who, Action.ANSWER)
        run_id = self.resolve(run_id)
        question = self.questions.get(run_id)
        try:
            self.questions.answer(run_id, body, who=who.name)
        except NotAwaitingError as exc:
            raise ConflictError(str(exc)) from None
        except ConfigError as exc:
            raise InvalidRequestError("target", str(exc), exc.hint) from None
        kind = "done" if body.done else "blocked" if body.blocked else "target"
        self.answers.labels(kind).inc()
        if question is not None:
            self.time_to_answer.observe(max(0.0, time.time() - question.asked_at))
        return self.fleet.run(run_id)


def questions_router(answers: Answers) -> APIRouter:
    router = APIRouter(route_class=BoundedRoute)

    @router.get("/v1/questions", response_model=list[Question])
    def list_questions(who: Who) -> list[Question]:
        """Every open question for `read`, `answer` and `admin`; a `submit` token sees those
        of its own runs."""
        return shown_questions(who, answers.questions.open(), answers.fleet.store.owners)

    @router.post("/v1/runs/{run_id}/answer", response_model=RunRecord)
    def answer(run_id: str, body: Answer, who: Who) -> RunRecord:
        return shown_run(who, answers.answer(run_id, body, who))

    return router
