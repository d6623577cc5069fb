"""A flows file: a suite of named flows a team keeps in its repository (YAML), checked against
`flows.schema.json` (JSON Schema 2020-12) and then against what the API accepts, every problem
reported with its line; turned into the body of one `POST /v1/batches`.

    suite: signin-smoke
    defaults: {retries: 1, matrix: {platform: [ios, android]}}
    flows:
      - name: sign-in
        goal: Sign in
        inputs: {email: ada@example.com}
        secrets: {password: env:SIGNIN_PASSWORD}
        done_when: Welcome

The format is docs/suites.md; the schema is the one the CLI validates against.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, cast

import jsonschema
import yaml
from pydantic import ValidationError

from scheduler.service.requests import SuiteSubmit
from scheduler.suites import bounded_yaml
from workers.core.request import GOAL_ONLY, STEP_KINDS

SCHEMA_PATH = Path(__file__).with_name("flows.schema.json")
MAX_FILE_BYTES = 1_000_000
Path_ = tuple[str | int, ...]


@cache
def schema() -> dict[str, Any]:
    out: dict[str, Any] = json.loads(SCHEMA_PATH.read_text())
    return out


@dataclass(frozen=True)
class Problem:
    line: int
    """1-based; 0 when the file as a whole is wrong."""
    where: str
    """The field, as a path (`flows[1].secrets.password`)."""
    message: str

    def __str__(self) -> str:
        at = f"line {self.line}: " if self.line else ""
        return f"{at}{self.where or '(file)'}: {self.message}"


class FlowsFileError(ValueError):
    """A flows file that cannot be run; `problems` holds every one found."""

    def __init__(self, source: str, problems: list[Problem]) -> None:
        self.source = source
        self.problems = problems
        super().__init__(f"{source}: " + "; ".join(str(p) for p in problems))


@dataclass(frozen=True)
class Flows:
    suite: str
    body: dict[str, Any]
    """What `POST /v1/batches` takes (a `SuiteSubmit`)."""

    def only(self, names: list[str]) -> Flows:
        """The suite with just the flows `names` (`--only`); an unknown name is refused."""
        flows = self.body["flows"]
        known = [f["name"] for f in flows]
        unknown = [n for n in names if n not in known]
        if unknown:
            raise ValueError(
                f"--only {unknown[0]}: no such flow in suite {self.suite!r}; its flows: "
                + ", ".join(known)
            )
        return Flows(self.suite, {**self.body, "flows": [f for f in flows if f["name"] in names]})


def _where(path: Path_) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _lines(node: yaml.Node, path: Path_, out: dict[Path_, int]) -> None:
    """Each path's line in the composed YAML (a mapping key's line for its value)."""
    out[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            _lines(value, (*path, key.value), out)
            out[(*path, key.value)] = key.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _lines(item, (*path, i), out)


def _line(lines: dict[Path_, int], path: Path_) -> int:
    while path and path not in lines:
        path = path[:-1]
    return lines.get(path, 0)


def load(path: Path) -> Flows:
    """Read, validate and convert a flows file; `FlowsFileError` lists every problem."""
    source = str(path)
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)  # no more: it may be /dev/zero
    except OSError as exc:
        raise FlowsFileError(source, [Problem(0, "", f"cannot read it: {exc.strerror}")]) from None
    if len(raw) > MAX_FILE_BYTES:
        why = f"is over the limit of {MAX_FILE_BYTES} bytes; split the suite"
        raise FlowsFileError(source, [Problem(0, "", why)])
    return parse(raw.decode("utf-8", errors="replace"), source=source)


def parse(text: str, *, source: str = "<flows>") -> Flows:
    """Validate and convert a flows file's text (read within `bounded_yaml`'s bounds)."""
    try:
        node, data = bounded_yaml.read(text)
    except bounded_yaml.YamlRefused as exc:
        raise FlowsFileError(source, [Problem(exc.line, "", exc.message)]) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 0
        problem = getattr(exc, "problem", None) or str(exc)
        raise FlowsFileError(source, [Problem(line, "", f"not valid YAML: {problem}")]) from None
    lines: dict[Path_, int] = {}
    if node is not None:
        _lines(node, (), lines)
    validator = jsonschema.Draft202012Validator(schema())
    problems = []
    for e in validator.iter_errors(data):
        at = tuple(e.absolute_path)
        message = _say(e)
        if message:
            problems.append(Problem(_line(lines, at), _where(at), message))
    problems += _journeys(data, lines)  # what the schema cannot say, found beside it
    if not problems:  # each flow named once (the schema cannot say it)
        problems = _twice(cast("dict[str, Any]", data), lines)
    if problems:
        raise FlowsFileError(source, sorted(problems, key=lambda p: p.line))
    body = _body(cast("dict[str, Any]", data))
    try:
        SuiteSubmit.model_validate(body)
    except ValidationError as exc:
        found = []
        for err in exc.errors():
            at = _file_path(tuple(err["loc"]))
            message = str(err["msg"]).removeprefix("Value error, ")
            found.append(Problem(_line(lines, at), _where(at), message))
        raise FlowsFileError(source, sorted(found, key=lambda p: p.line)) from None
    return Flows(str(body["suite"]), body)


def _journeys(data: object, lines: dict[Path_, int]) -> list[Problem]:
    """Each flow a goal or a journey (not both, not neither), each journey step exactly one
    kind, and a goal step's own settings on goal steps only; read on whatever shape the file
    has, so these come with the schema's problems in one pass."""
    flows = data.get("flows") if isinstance(data, dict) else None
    out = []
    for i, flow in enumerate(flows if isinstance(flows, list) else []):
        if not isinstance(flow, dict):
            continue
        at: Path_ = ("flows", i)
        if ("goal" in flow) == ("steps" in flow):
            why = (
                "has both goal and steps; a journey's goals are its goal steps"
                if "goal" in flow
                else "has neither goal nor steps; give goal (one goal) or steps (a journey)"
            )
            out.append(Problem(_line(lines, at), _where(at), f"flow {why}"))
        steps = flow.get("steps")
        for j, step in enumerate(steps if isinstance(steps, list) else []):
            if not isinstance(step, dict):
                continue
            kinds = [k for k in STEP_KINDS if k in step]
            where: Path_ = (*at, "steps", j)
            unknown = set(step) - {*STEP_KINDS, *GOAL_ONLY, "name"}
            if len(kinds) > 1 or (not kinds and not unknown):  # unknown keys: the schema's
                said = ", ".join(kinds) or "none of them"
                why = f"a step is exactly one of {', '.join(STEP_KINDS)}; this one has {said}"
                out.append(Problem(_line(lines, where), _where(where), why))
            elif kinds != ["goal"]:
                for key in (k for k in GOAL_ONLY if k in step):
                    why = f"{key} belongs to a goal step, not to a {kinds[0]} step"
                    out.append(Problem(_line(lines, (*where, key)), _where((*where, key)), why))
    return out


def _twice(data: dict[str, Any], lines: dict[Path_, int]) -> list[Problem]:
    seen: set[str] = set()
    out = []
    for i, flow in enumerate(data["flows"]):
        if flow["name"] in seen:
            at = ("flows", i, "name")
            why = f"flow {flow['name']!r} is named twice; give each flow its own name"
            out.append(Problem(_line(lines, at), _where(at), why))
        seen.add(flow["name"])
    return out


def _say(error: jsonschema.ValidationError) -> str:
    """The schema's complaint in words a flows file's author can act on."""
    secret_pattern = error.validator == "pattern" and "env:" in str(error.validator_value)
    if secret_pattern or (error.validator == "oneOf" and isinstance(error.instance, str)):
        return (
            f"{error.instance!r} is not a secret reference; write env:NAME and set "
            "GOALFLEET_SECRET_NAME on the workers (a flows file never holds a secret's value)"
        )
    message = _message(error)
    if error.validator == "oneOf" and error.context:
        deepest = max(error.context, key=lambda e: len(e.path))
        return f"{'.'.join(map(str, deepest.path)) or 'it'}: {deepest.message}"
    if error.validator == "unevaluatedProperties":
        # a flow's keys are its own and the settings' (`allOf`); a key the settings' part
        # rejected for its value counts as unevaluated too: name only the unknown ones
        own = cast("dict[str, Any]", error.schema).get("properties", {})
        known = set(schema()["$defs"]["settings"]["properties"]) | set(own)
        unknown = sorted(set(cast("dict[str, Any]", error.instance)) - known)
        if not unknown:
            return ""
        return (
            f"unknown field{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; a flow takes "
            f"{', '.join(sorted(known))} (docs/suites.md)"
        )
    if error.validator == "additionalProperties":
        return f"{message}; see docs/suites.md for the fields this takes"
    return message


def _message(error: jsonschema.ValidationError) -> str:
    """The schema's own message, cut short: it starts with the whole value, which may be
    most of the file (a size limit is said without it)."""
    if too_many := _TOO_MANY.get(str(error.validator)):
        n = len(cast("str | list[Any] | dict[str, Any]", error.instance))
        return f"{n} {too_many}, over the limit of {error.validator_value}"
    message: str = error.message
    return message if len(message) <= MAX_MESSAGE_CHARS else f"{message[:60]} … {message[-60:]}"


_TOO_MANY = {"maxItems": "items", "maxLength": "characters", "maxProperties": "fields"}
"""The schema's size limits, said without the value (it may be the whole file)."""
MAX_MESSAGE_CHARS = 200

_PARAMS = ("max_steps", "min_confidence", "max_unproductive", "decider", "escalate_to")
_FLAGS = ("memory", "ask_person", "moves")


def _file_path(loc: tuple[int | str, ...]) -> Path_:
    """A `SuiteSubmit` error's location as the flows file's path (a run parameter lives
    under `params`; a matrix cell's field under the flow's `matrix`)."""
    if len(loc) >= 3 and loc[0] == "flows":  # noqa: PLR2004 - flows, index, field
        field = loc[2]
        if field in _PARAMS or field in _FLAGS:
            return ("flows", loc[1], "params", field)
        if field == "matrix":
            return ("flows", loc[1], "matrix")
    return tuple(loc)


def _cells(matrix: dict[str, Any]) -> list[dict[str, Any]]:
    """A matrix as selectors: one per platform (or one, with no platform given)."""
    platforms = matrix.get("platform")
    if isinstance(platforms, str):
        platforms = [platforms]
    base = {k: v for k, v in matrix.items() if k != "platform"}
    return [{**base, "platform": p} for p in platforms] if platforms else [base]


def _secret(ref: str | dict[str, Any]) -> dict[str, Any]:
    return {"ref": ref} if isinstance(ref, str) else dict(ref)


def _flow(flow: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    merged = {**defaults, **flow}
    out: dict[str, Any] = {
        "name": merged["name"],
        "inputs": {k: str(v) for k, v in merged.get("inputs", {}).items()},
        "secrets": {k: _secret(v) for k, v in merged.get("secrets", {}).items()},
        "retries": merged.get("retries", 0),
        "matrix": _cells(merged.get("matrix", {})),
        **defaults.get("params", {}),
        **flow.get("params", {}),
    }
    for key in ("goal", "done_when", "priority"):
        if key in merged:
            out[key] = merged[key]
    if "steps" in flow:
        out["steps"] = [_step(s) for s in flow["steps"]]
    return out


def _step(step: str | dict[str, Any]) -> str | dict[str, Any]:
    """A journey step as the API takes it: its inputs as text, its secrets as references."""
    if isinstance(step, str):
        return step
    out = dict(step)
    if "inputs" in out:
        out["inputs"] = {k: str(v) for k, v in out["inputs"].items()}
    if "secrets" in out:
        out["secrets"] = {k: _secret(v) for k, v in out["secrets"].items()}
    return out


def _body(data: dict[str, Any]) -> dict[str, Any]:
    defaults = data.get("defaults", {})
    body: dict[str, Any] = {
        "suite": data["suite"],
        "flows": [_flow(f, defaults) for f in data["flows"]],
    }
    if data.get("webhook"):
        body["webhook"] = data["webhook"]
    if data.get("budget"):
        body["budget"] = data["budget"]
    return body
