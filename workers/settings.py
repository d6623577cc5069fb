"""The one `Settings` object: read from the environment (prefix `GOALFLEET_`) once, at a
composition root (the CLI, the worker start, the API app factory), and passed down.

`Settings()` takes each field from its keyword argument, else from its `GOALFLEET_<FIELD>`
variable (the name matched case-insensitively; any other variable is ignored), else its
default, and validates them all, defaults too. `_from_env` reads them as pydantic-settings
did for these fields (none is nested or JSON-decoded); pydantic-settings itself cost ~65 ms of
every command's start (its main module imports asyncio; bench/bench_cli_start.py).

Nothing else in goalfleet reads the environment, with one deliberate exception: secret values
(`GOALFLEET_SECRET_<NAME>`) are handed to `workers.core.secrets.EnvSecrets` by the same composition
root, so they never sit in a settings object that might be printed.
"""

from __future__ import annotations

import os
import tempfile
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    IPvAnyNetwork,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from workers.core.access import TOKEN_NAME, Principal, Role, parse_roles, token_names
from workers.core.bounds import MAX_INPUT_CHARS, MAX_INPUTS, MAX_LABEL_CHARS, MAX_LABELS
from workers.core.prices import PriceTable
from workers.core.shot_mode import ShotMode
from workers.core.words import DEFAULT_DANGEROUS
from workers.decide.options import DEFAULT_MAX_OUTPUT_TOKENS, ModelSettings, check_mode
from workers.urls import (
    HTTP_SCHEMES,
    REDIS_SCHEMES,
    checked_database_url,
    checked_url,
    sentinel_address,
)

ENV_PREFIX = "GOALFLEET_"

API_PROCESSES_MAX = 64
"""The most processes `goalfleet api --processes` (or `GOALFLEET_API_PROCESSES`) may ask for."""


def _from_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The `GOALFLEET_<FIELD>` variables of `environ`, by field name (`GOALFLEET_API_PORT`
    and `goalfleet_api_port` alike); a variable that names no field is ignored."""
    fields = Settings.model_fields
    out: dict[str, str] = {}
    for key, value in environ.items():
        name = key.lower()
        if name.startswith(ENV_PREFIX.lower()) and name[len(ENV_PREFIX) :] in fields:
            out[name[len(ENV_PREFIX) :]] = value
    return out


def state_dir() -> Path:
    """Where goalfleet keeps a user's state on this machine: `$XDG_STATE_HOME/goalfleet`, or
    `~/.local/state/goalfleet` (the XDG base directory default)."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "goalfleet"


class Settings(BaseModel):
    """Every knob of the fleet. See docs/fleet.md for the reference table."""

    model_config = ConfigDict(extra="ignore", frozen=True, validate_default=True)
    # Empty defaults are literals (pydantic copies them per instance), not
    # `default_factory=list`: pydantic reads a builtin factory's signature by tokenizing its
    # text signature, ~6 ms of every command's start (bench/bench_cli_start.py).

    def __init__(self, **given: Any) -> None:  # noqa: ANN401 - each field's own type
        """Each field from `given`, else its `GOALFLEET_<FIELD>` variable, else its default."""
        super().__init__(**(_from_env(os.environ) | given))

    redis_url: str = "redis://127.0.0.1:6379/0"
    """The store (runs, steps, devices, batches), the Celery broker and the result backend.
    With `redis_sentinels` set, only its password and DB number are used."""
    redis_sentinels: list[str] = []
    """Redis Sentinel addresses (`host:port`, comma-separated): set, every part of the fleet
    finds the master `redis_sentinel_master` through them and follows a promotion."""
    redis_sentinel_master: str = "goalfleet"
    redis_sentinel_password: SecretStr | None = None
    """The sentinels' own password (`requirepass` in sentinel.conf), when they have one."""
    redis_wait_replicas: Annotated[int | None, Field(ge=0, le=16)] = None
    """Replicas an acknowledged write (a submit, an answer, a step, a finish) must reach
    before the fleet answers for it (`WAIT`); unset: 1 with sentinels, 0 without."""
    redis_wait_timeout_ms: Annotated[int, Field(ge=1, le=60_000)] = 1000
    """How long a write waits for its replicas before it is reported unacknowledged."""
    key_prefix: Annotated[str, Field(min_length=1, max_length=32, pattern=r"^[A-Za-z0-9_.-]+$")] = (
        "gf"
    )
    """Prefix of every key goalfleet writes, so several fleets can share one Redis."""

    api_tokens: list[SecretStr] = []
    """Bearer tokens the API accepts (comma-separated in the environment). Empty: every
    request is refused except /health, so an API is never open by accident. `name:token`
    names a token (`alice:s3cret`): answers to questions are recorded as that name's."""
    api_roles: dict[str, frozenset[Role]] = {}
    """What each token may do (`workers.core.access`): `name:role+role,…`, e.g.
    `alice:submit,ops:admin,grafana:read` (an unnamed token is `token-N`). Empty: every token
    holds every role, as before roles existed; given: every token needs an entry."""
    api_host: str = "127.0.0.1"
    api_port: Annotated[int, Field(ge=0, le=65535)] = 8787
    api_processes: Annotated[int, Field(ge=1, le=API_PROCESSES_MAX)] = 1
    """API processes serving the one listening socket (`goalfleet api --processes`), each
    with its own Redis connections and device view: one is CPU-bound at a few hundred
    submits a second, so a host with spare cores serves more with more."""
    api_url: str = "http://127.0.0.1:8787"
    """Where the CLI's client finds the API: when you move the API (`GOALFLEET_API_PORT`,
    `--port`), point this at it too."""
    api_wait_s: Annotated[float, Field(ge=0, le=120)] = 5.0
    """How long the CLI's client retries, with backoff, while the API refuses connections
    (it is starting up) before it reports the API unreachable."""
    api_token: SecretStr | None = None
    """The token the CLI's client sends (one of the API's `api_tokens`)."""

    soft_time_limit_s: Annotated[float, Field(gt=0)] = 300.0
    """A run still going after this long ends `errored` (cooperatively, device released)."""
    time_limit_s: Annotated[float, Field(gt=0)] = 330.0
    """The pool child is killed after this long; its worker sends the run again (attempt + 1)."""
    attempt_cap: Annotated[int, Field(ge=1, le=20)] = 3
    """Deliveries of one run (first + redeliveries) before it ends `errored`."""

    heartbeat_interval_s: Annotated[float, Field(gt=0)] = 2.0
    lease_s: Annotated[float, Field(gt=0)] = 10.0
    """A device whose worker has not renewed its lease for this long is down."""
    quarantine_after: Annotated[int, Field(ge=1, le=100)] = 3
    """Consecutive infrastructure failures (`errored` runs) that quarantine a device."""
    probe_interval_s: Annotated[float, Field(gt=0)] = 15.0
    """How often a quarantined device's worker probes it (one snapshot) to recover."""

    retention_s: Annotated[int, Field(ge=0)] = 7 * 24 * 3600
    """How long a finished run, its steps and its batch stay in Redis (0: forever)."""
    result_ttl_s: Annotated[int, Field(ge=60)] = 24 * 3600
    """Celery's own result entries (used only for redelivery de-duplication)."""
    task_events: bool = False
    """Celery's task events (received, started, succeeded) for a Flower or `celery events`
    monitor: three Redis publishes a run and the worker's work to send them; nothing in
    goalfleet reads them (its runs, logs and metrics say more), so they are off."""

    screenshots: ShotMode = "on"
    """A picture of every step (`on`), none (`off`), or only of the steps that did not move
    the run forward (`failure-only`). Cheap on the sim (a few ms a step, docs/benchmarks.md)."""
    artifact_dir: Path = Path(tempfile.gettempdir()) / "goalfleet-artifacts"
    """Where step pictures are stored, one file per distinct picture (sha256-named): give the
    API and every worker host the same directory (a shared mount)."""
    screenshot_max_bytes: Annotated[int, Field(ge=1000)] = 150_000
    """The most bytes one stored picture may take (downscaled until it fits)."""
    screenshot_run_budget_bytes: Annotated[int, Field(ge=0)] = 1_500_000
    """The most bytes of pictures one run may store; later steps say the budget is spent."""
    video: ShotMode = "on"
    """A video of every run where the device records (`on`), none (`off`), or only of a run
    that did not end `done` (`failure-only`). On by default: on the Linux target ffmpeg films
    the app's window at 5 fps for ~8 % of one core and ~4 kB a second while a run lasts
    (docs/benchmarks.md); the sim records none (its step pictures are the sequence)."""
    video_max_bytes: Annotated[int, Field(ge=10_000)] = 8_000_000
    """The most bytes one run's video may take; a longer one is not stored (its note says)."""

    memory: bool = True
    """The fleet-wide switch of the decision memory (`GOALFLEET_MEMORY=false` turns it off;
    a run can opt out with `"memory": false`)."""
    memory_ttl_s: Annotated[int, Field(ge=60)] = 30 * 24 * 3600
    """An entry unused this long expires (each hit starts the clock again)."""

    escalate_to: list[str] = []
    """Deciders asked in turn when a run's own decider escalates (comma-separated in the
    environment, e.g. `openai/gpt-4o-mini,openai/gpt-4o`); a request's `escalate_to` wins."""
    questions: bool = True
    """Park a run whose last decider escalated as `awaiting_answer`, with its question for a
    person (`goalfleet questions` / `answer`); false ends it `escalated` at once."""
    question_timeout_s: Annotated[int, Field(ge=10)] = 3600
    """An unanswered question ends its run `escalated` after this long."""

    model_api_key: SecretStr | None = None
    """API key for `<provider>/<model>` deciders (else the provider SDK's own variable)."""
    model_base_url: str | None = None
    """An OpenAI-compatible model server (vLLM, Ollama, a proxy) for any provider name."""
    model_timeout_s: Annotated[float, Field(gt=0, le=300)] = 20.0
    """Per-request model timeout; a timeout ends the run `errored` (infrastructure)."""
    model_mode: str = "tools"
    """How the decision schema is forced: `tools` (a named tool call) or `json` (instructor's
    JSON mode); anything else is refused at start."""
    model_max_output_tokens: Annotated[int, Field(gt=0, le=4096)] = DEFAULT_MAX_OUTPUT_TOKENS
    """Cap on each model answer's tokens (an answer needs ~10)."""
    price_file: Path | None = None
    """The operator's price table, a TOML file: `currency = "USD"` and, per decider name,
    `[models."openai/gpt-4o-mini"]` with `input = 0.15` and `output = 0.60` (per million
    tokens). Each step's, run's and suite's model cost comes from it (docs/goal-loop.md,
    "What a run cost"); a model not in it costs 0, and a cost budget refuses it."""
    prices: PriceTable = PriceTable()
    """`price_file` as read (set only through it)."""

    @model_validator(mode="before")
    @classmethod
    def _read_prices(cls, data: Any) -> Any:  # noqa: ANN401 - pydantic's raw input
        if not isinstance(data, dict) or not data.get("price_file"):
            return data
        path = Path(str(data["price_file"]))
        try:
            table = tomllib.loads(path.read_text())
        except OSError as exc:
            raise ValueError(f"price_file {path}: cannot read it ({exc.strerror})") from None
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(f"price_file {path}: not TOML: {exc}") from None
        try:
            prices = PriceTable.model_validate(table)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise ValueError(
                f"price_file {path}: {where}: {first['msg']} (give currency and, per model, "
                '[models."provider/model"] input = … and output = …, per million tokens)'
            ) from None
        return {**data, "prices": prices}

    model_logprobs: bool = True
    """Take confidence from token logprobs; the decider falls back to the model's self-report
    by itself where a server returns none. False skips that first try."""

    dangerous_controls: list[str] = Field(default_factory=lambda: list(DEFAULT_DANGEROUS))
    """Words that make a control dangerous (comma-separated in the environment): a decision
    to press one escalates instead. Empty turns the guard off."""

    log_format: Literal["auto", "json", "console"] = "auto"
    """Logs as JSON lines, as readable console lines, or auto (console on a terminal)."""

    dispatch_interval_s: Annotated[float, Field(gt=0)] = 1.0
    """The scheduler's loop wakes at least this often (and at once when a device frees)."""
    orphan_after_s: Annotated[float, Field(gt=0)] = 120.0
    """A reservation never claimed this long is sent again while its device is alive (its
    message never left, or was lost with its worker); a selector run's is routed again when
    its device is down."""
    unplaceable_after_s: Annotated[float, Field(gt=0)] = 600.0
    """A pending run whose device (or selector) matches no registered device ends
    `unplaceable` after waiting this long, instead of waiting for ever."""
    max_pending: Annotated[int, Field(ge=1)] = 100_000
    """Submits beyond this many pending runs are refused with 429."""
    device_view_max_age_s: Annotated[float, Field(ge=0, le=300)] = 10.0
    """The scheduler's and the API's cached view of the devices is re-read in full when it is
    older than this (the scheduler re-reads ended runs' and recovered devices' records at once;
    a run for an exact device re-reads that device; a lookup that misses re-reads all; a
    reservation is always checked in Redis). 0 re-reads on every dispatch: O(devices) each."""
    api_max_body_bytes: Annotated[int, Field(ge=1024, le=64 * 1024 * 1024)] = 1024 * 1024
    """A request body over this many bytes is refused (413) before it is read."""
    api_max_header_bytes: Annotated[int, Field(ge=1024, le=1024 * 1024)] = 32 * 1024
    """A request line and headers over this many bytes: 400 and the connection closed
    (uvicorn's `h11_max_incomplete_event_size`, `scheduler.api.served`)."""
    api_max_connections: Annotated[int, Field(ge=1)] = 1024
    """Connections (or requests in flight) per API process; past it a request gets a 503
    (uvicorn's `limit_concurrency`)."""
    api_max_inputs: Annotated[int, Field(ge=1, le=MAX_INPUTS)] = 100
    """Inputs and secrets one request may name, together."""
    api_max_input_chars: Annotated[int, Field(ge=1, le=MAX_INPUT_CHARS)] = 1000
    """Characters of one input's value."""
    api_max_labels: Annotated[int, Field(ge=1, le=MAX_LABELS)] = 20
    """Labels one selector may name."""
    api_max_label_chars: Annotated[int, Field(ge=1, le=MAX_LABEL_CHARS)] = 100
    """Characters of one label's value in a selector."""
    api_max_batch_bytes: Annotated[int, Field(ge=1024)] = 10 * 1024 * 1024
    """A batch's `count` x its request's size in bytes (the work one submit asks for)."""
    api_auth_failures: Annotated[int, Field(ge=1, le=10_000)] = 10
    """Wrong tokens one client (an IPv4 address, an IPv6 /64) may give in
    `api_auth_window_s`, as bearer tokens or on the console's sign-in together; past them
    every request of that client with a token is 429 (`Retry-After`) until the window ends."""
    api_auth_failures_fleet: Annotated[int, Field(ge=0)] = 200
    """Wrong tokens from all clients together in `api_auth_window_s`; past them a client
    that gave one wrong token is refused as if it had reached `api_auth_failures` (many
    addresses guessing get one guess each). 0: no fleet-wide count."""
    api_auth_window_s: Annotated[int, Field(ge=1, le=86_400)] = 60
    """The window the failures above are counted in (it starts at a client's first one)."""
    api_forwarded_allow_ips: str = "127.0.0.1"
    """Proxies whose `X-Forwarded-For` and `X-Forwarded-Proto` `goalfleet api` believes
    (uvicorn's `forwarded_allow_ips`: comma-separated addresses or networks, `*` for any):
    the client a failed token is counted against, and whether it came over TLS."""
    console_cookie_secure: bool = False
    """Mark the console's cookies `Secure` always; without it they are `Secure` when the
    request came over TLS (directly or from a proxy of `api_forwarded_allow_ips`)."""

    webhook_url: str | None = None
    """Fleet-wide webhook: called on every batch finished, run failed and question waiting
    (besides a suite's own `webhook`); served by the scheduler (docs/suites.md)."""
    webhook_secret: SecretStr | None = None
    """The HMAC-SHA256 key webhooks are signed with (`X-Goalfleet-Signature`); without it no
    webhook is called."""
    webhook_attempts: Annotated[int, Field(ge=1, le=20)] = 6
    """Tries per webhook call (a 5xx, 408, 429 or no connection is tried again, with backoff)."""
    webhook_timeout_s: Annotated[float, Field(gt=0, le=60)] = 5.0
    webhook_allow: list[IPvAnyNetwork] = []
    """Networks a suite's own webhook may reach besides public addresses (comma-separated,
    e.g. `10.20.0.0/16,192.168.7.5`): a webhook any `submit` token names never reaches a
    private, loopback or link-local address otherwise (`scheduler.service.outbound`). The
    fleet-wide `webhook_url` is the operator's and is not checked. Set on the API and the
    scheduler."""

    @field_validator("webhook_url")
    @classmethod
    def _webhook_url(cls, v: str | None) -> str | None:
        return None if v is None else checked_url(v, HTTP_SCHEMES)

    database_url: SecretStr | None = None
    """The run history's database (`postgresql://…`, or `sqlite:///path`): set, the scheduler
    drains ended runs into it (`goalfleet db upgrade` makes its tables) and `goalfleet
    history` and `/v1/history/…` read it. Unset, a fleet keeps no history; `goalfleet run` and
    the demo write `history_path`."""
    history_path: Path = Field(default_factory=lambda: state_dir() / "history.db")
    """The embedded history (SQLite) of `goalfleet run` and `goalfleet demo`, and what
    `goalfleet history` reads when no `database_url` is set: the user's own, kept across
    reboots (`state_dir`), its folder made private (0700) when the history makes it."""
    history_retention_days: Annotated[int, Field(ge=0)] = 90
    """Runs and steps that ended longer ago are deleted from the history (0: never)."""

    @field_validator("database_url")
    @classmethod
    def _database_url(cls, v: SecretStr | None) -> SecretStr | None:
        return None if v is None else SecretStr(checked_database_url(v.get_secret_value()))

    def history_url(self) -> str:
        """The history database: `database_url`, else the embedded one at `history_path`."""
        if self.database_url is not None:
            return self.database_url.get_secret_value()
        return f"sqlite:///{self.history_path}"

    @field_validator("redis_url")
    @classmethod
    def _redis_url(cls, v: str) -> str:
        return checked_url(v, REDIS_SCHEMES)

    @field_validator("redis_sentinels", mode="before")
    @classmethod
    def _sentinels(cls, v: object) -> object:
        entries = [e.strip() for e in v.split(",") if e.strip()] if isinstance(v, str) else v
        for entry in entries if isinstance(entries, list) else []:
            sentinel_address(str(entry))
        return entries

    def wait_replicas(self) -> int:
        """Replicas an acknowledged write waits for (`redis_wait_replicas`, resolved)."""
        if self.redis_wait_replicas is not None:
            return self.redis_wait_replicas
        return 1 if self.redis_sentinels else 0

    @field_validator("api_url")
    @classmethod
    def _api_url(cls, v: str) -> str:
        return checked_url(v, HTTP_SCHEMES)

    @field_validator("model_base_url")
    @classmethod
    def _model_base_url(cls, v: str | None) -> str | None:
        return None if v is None else checked_url(v, HTTP_SCHEMES)

    @field_validator("model_mode")
    @classmethod
    def _model_mode(cls, v: str) -> object:
        return check_mode(v)

    def named_tokens(self) -> list[tuple[str, str]]:
        """(name, token) for every API token: `name:token`, or `token-N` for an unnamed one."""
        return token_names(self.api_tokens)

    def principals(self) -> list[tuple[Principal, str]]:
        """(who, token) for every API token: its name and roles (`admin` for each when
        `api_roles` is empty)."""
        every = frozenset({Role.ADMIN})  # no roles given: every right, as before roles were
        return [
            (Principal(name, self.api_roles.get(name, every)), token)
            for name, token in self.named_tokens()
        ]

    @field_validator("api_roles", mode="before")
    @classmethod
    def _parse_roles(cls, v: object) -> object:
        if not isinstance(v, str):
            return v
        out: dict[str, frozenset[Role]] = {}
        for entry in (e.strip() for e in v.split(",") if e.strip()):
            name, sep, roles = entry.partition(":")
            if not sep or not TOKEN_NAME.fullmatch(name.strip()):
                raise ValueError(
                    f"{entry!r} is not name:roles; give e.g. alice:submit+answer,ops:admin"
                )
            out[name.strip()] = parse_roles(roles)
        return out

    @field_validator("api_roles", mode="after")
    @classmethod
    def _roles_cover_tokens(
        cls, v: dict[str, frozenset[Role]], info: ValidationInfo
    ) -> dict[str, frozenset[Role]]:
        names = [name for name, _ in token_names(info.data.get("api_tokens") or [])]
        if not v or not names:
            return v
        missing = [n for n in names if n not in v]
        if missing:
            raise ValueError(
                f"token {missing[0]!r} has no roles; add {missing[0]}:<roles> (read, submit, "
                "answer, admin; join several with +)"
            )
        stray = sorted(set(v) - set(names))
        if stray:
            raise ValueError(
                f"{stray[0]!r} names no token of GOALFLEET_API_TOKENS; name the token "
                f"({stray[0]}:<token>) or drop the entry"
            )
        return v

    @field_validator(
        "api_tokens", "dangerous_controls", "escalate_to", "webhook_allow", mode="before"
    )
    @classmethod
    def _split_tokens(cls, v: object) -> object:
        if isinstance(v, str):
            return [t.strip() for t in v.split(",") if t.strip()]
        return v

    @model_validator(mode="after")
    def _limits_in_order(self) -> Self:
        if not self.soft_time_limit_s < self.time_limit_s:
            raise ValueError(
                "time limits must satisfy soft_time_limit_s < time_limit_s (got "
                f"{self.soft_time_limit_s} / {self.time_limit_s}); lower "
                "GOALFLEET_SOFT_TIME_LIMIT_S or raise GOALFLEET_TIME_LIMIT_S"
            )
        if self.heartbeat_interval_s * 2 > self.lease_s:
            raise ValueError(
                "lease_s must be at least twice heartbeat_interval_s so one late beat does "
                "not mark a device down"
            )
        return self

    def model_settings(self) -> ModelSettings:
        """What `workers.decide.factory.make_decider` needs to reach a model."""
        return ModelSettings(
            api_key=self.model_api_key,
            base_url=self.model_base_url,
            timeout_s=self.model_timeout_s,
            mode=self.model_mode,
            max_output_tokens=self.model_max_output_tokens,
            logprobs=self.model_logprobs,
        )

    def to_env(self) -> dict[str, str]:
        """These settings as `GOALFLEET_*` variables, for child processes (demo, tests)."""
        out: dict[str, str] = {}
        for name, value in self:
            key = f"{ENV_PREFIX}{name.upper()}"
            if value is None or name == "prices":  # carried by price_file
                continue
            if isinstance(value, SecretStr):
                out[key] = value.get_secret_value()
            elif isinstance(value, dict):
                out[key] = ",".join(f"{k}:{'+'.join(sorted(v))}" for k, v in value.items())
            elif isinstance(value, list):
                out[key] = ",".join(
                    v.get_secret_value() if isinstance(v, SecretStr) else str(v) for v in value
                )
            else:
                out[key] = str(value)
        return out
