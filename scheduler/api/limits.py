"""The fleet's limits on what one request may ask for, checked at submit before anything is
written (each refusal a 422 naming the field, the limit and the setting that raises it).

The request models carry the hard ceilings (`workers.core.request`, `workers.core.records`),
so no path stores more than those; these limits come from `Settings` (`GOALFLEET_API_MAX_*`),
tighter by default and never above the ceilings. The body-size cap is the edge's
(`scheduler.api.edge`), enforced before the body is read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from scheduler.errors import InvalidRequestError
from scheduler.service.outbound import ALLOW_SETTING, Network, refusal
from scheduler.service.requests import BatchSubmit, FlowSubmit, RunSubmit, SuiteSubmit
from workers.core.records import Selector
from workers.settings import Settings


@dataclass(frozen=True)
class Limits:
    max_inputs: int
    """Inputs and secrets of one request, together."""
    max_input_chars: int
    max_labels: int
    max_label_chars: int
    max_batch_bytes: int
    """A batch's `count` x its request's size in bytes: the work it asks the fleet for."""
    webhook_allow: tuple[Network, ...] = ()
    """Networks a suite's webhook may reach besides public addresses (`outbound`)."""

    @classmethod
    def of(cls, settings: Settings) -> Limits:
        return cls(
            max_inputs=settings.api_max_inputs,
            max_input_chars=settings.api_max_input_chars,
            max_labels=settings.api_max_labels,
            max_label_chars=settings.api_max_label_chars,
            max_batch_bytes=settings.api_max_batch_bytes,
            webhook_allow=tuple(settings.webhook_allow),
        )

    def check_run(self, sub: RunSubmit) -> None:
        self._check_request(sub)
        self._check_selector(sub.selector)

    def check_batch(self, sub: BatchSubmit) -> None:
        """A batch (or a schedule's): its request, its selector, and `count` x its size."""
        self._check_request(sub)
        self._check_selector(sub.selector)
        if sub.count is None:
            return  # one run per matching device: bounded by the fleet
        size = len(sub.goal_request().model_dump_json().encode())
        if sub.count * size > self.max_batch_bytes:
            most = max(self.max_batch_bytes // size, 0)
            raise InvalidRequestError(
                "count",
                f"{sub.count} runs x {size} bytes per request is over the limit of "
                f"{self.max_batch_bytes} bytes per batch",
                f"ask for at most {most} runs of this request, shorten its inputs, or raise "
                "GOALFLEET_API_MAX_BATCH_BYTES on the API",
            )

    def check_suite(self, sub: SuiteSubmit, *, signed: bool) -> None:
        """Each flow's request and the selectors of its matrix; a webhook only where the
        fleet signs them (`signed`: `GOALFLEET_WEBHOOK_SECRET` is set), and not to an address
        it may not reach (`outbound.refusal`)."""
        if sub.webhook is not None and not signed:
            raise InvalidRequestError(
                "webhook",
                "this fleet signs no webhooks, so it calls none",
                "set GOALFLEET_WEBHOOK_SECRET on the API and the scheduler, or leave webhook out",
            )
        refused = refusal(sub.webhook, self.webhook_allow) if sub.webhook else None
        if refused is not None:
            raise InvalidRequestError(
                "webhook",
                refused,
                f"give a public receiver's URL, or allow its network with {ALLOW_SETTING} "
                "on the API and the scheduler",
            )
        for flow in sub.flows:
            self._check_request(flow)
            for cell in flow.matrix:
                self._check_selector(cell)

    def _check_request(self, sub: RunSubmit | BatchSubmit | FlowSubmit) -> None:
        n = len(sub.inputs) + len(sub.secrets)
        if n > self.max_inputs:
            raise InvalidRequestError(
                "inputs",
                f"{n} inputs and secrets are over the limit of {self.max_inputs} per request",
                f"give at most {self.max_inputs} (or raise GOALFLEET_API_MAX_INPUTS on the API)",
            )
        _check_lengths("inputs", sub.inputs, self.max_input_chars, "INPUT_CHARS")

    def _check_selector(self, selector: Selector | None) -> None:
        if selector is None:
            return
        if len(selector.labels) > self.max_labels:
            raise InvalidRequestError(
                "selector.labels",
                f"{len(selector.labels)} labels are over the limit of {self.max_labels}",
                f"select on at most {self.max_labels} labels (or raise "
                "GOALFLEET_API_MAX_LABELS on the API)",
            )
        _check_lengths("selector.labels", selector.labels, self.max_label_chars, "LABEL_CHARS")


def _check_lengths(field: str, values: Mapping[str, str], limit: int, setting: str) -> None:
    """Each value of `values` at most `limit` characters (`GOALFLEET_API_MAX_<setting>`)."""
    for name, value in values.items():
        if len(value) > limit:
            raise InvalidRequestError(
                f"{field}.{name}",
                f"is {len(value)} characters, over the limit of {limit}",
                f"shorten it to at most {limit} characters (or raise "
                f"GOALFLEET_API_MAX_{setting} on the API)",
            )
