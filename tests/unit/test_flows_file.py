"""A flows file: its JSON Schema is a valid 2020-12 schema; a good file becomes one suite body
the API accepts (defaults merged, secrets as references, the matrix as selectors); a bad one
is refused with every problem and its line, a secret's value never accepted; `goalfleet suite
validate` says so with exit 0 or 2."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest

from scheduler.cli.main import main
from scheduler.service.requests import SuiteSubmit
from scheduler.suites.flows import FlowsFileError, parse, schema

GOOD = """\
suite: smoke
webhook: https://ci.example.com/hooks/goalfleet
defaults:
  retries: 1
  matrix: {platform: [ios, android], labels: {pool: ci}}
  params: {ask_person: false, max_steps: 10}
flows:
  - name: sign-in
    goal: Sign in
    inputs: {email: ada@example.com, age: 36}
    secrets:
      password: env:SIGNIN_PASSWORD
      code: {ref: env:OTP, plain_field: true}
    done_when: Welcome
  - name: browse
    goal: Open the catalogue
    retries: 0
    matrix: {platform: linux}
    params: {max_steps: 20, decider: openai/gpt-4o-mini}
"""

BAD = """\
suite: smoke
flows:
  - name: sign-in
    goal: Sign in
    inputs: {email: ada@example.com}
    secrets:
      password: hunter2-plain
    matrix: {platform: [ios, windows]}
    retries: 9
  - name: other
    goal: ""
    colour: blue
    params: {max_steps: 0}
"""


def test_the_schema_is_a_valid_json_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(schema())


def test_a_good_file_is_one_suite_body() -> None:
    flows = parse(GOOD)
    body = flows.body
    SuiteSubmit.model_validate(body)  # what the API takes
    one, two = body["flows"]
    assert one["matrix"] == [
        {"platform": "ios", "labels": {"pool": "ci"}},
        {"platform": "android", "labels": {"pool": "ci"}},
    ]
    assert one["secrets"] == {
        "password": {"ref": "env:SIGNIN_PASSWORD"},
        "code": {"ref": "env:OTP", "plain_field": True},
    }
    assert one["inputs"] == {"email": "ada@example.com", "age": "36"}
    assert (one["retries"], one["max_steps"], one["ask_person"]) == (1, 10, False)
    assert (two["retries"], two["max_steps"], two["ask_person"]) == (0, 20, False)
    assert two["matrix"] == [{"platform": "linux"}]
    assert body["webhook"] == "https://ci.example.com/hooks/goalfleet"
    assert [f["name"] for f in flows.only(["browse"]).body["flows"]] == ["browse"]
    with pytest.raises(ValueError, match="no such flow"):
        flows.only(["nope"])


def test_every_problem_is_reported_with_its_line() -> None:
    with pytest.raises(FlowsFileError) as err:
        parse(BAD, source="flows.yaml")
    got = [(p.line, p.where) for p in err.value.problems]
    assert got == [
        (7, "flows[0].secrets.password"),
        (8, "flows[0].matrix.platform"),
        (9, "flows[0].retries"),
        (10, "flows[1]"),
        (11, "flows[1].goal"),
        (13, "flows[1].params.max_steps"),
    ]
    text = str(err.value)
    assert "hunter2-plain" in text  # the author sees what they wrote ...
    assert "not a secret reference; write env:NAME" in text  # ... and how to fix it
    assert "windows" in text
    assert "unknown field colour" in text


def test_what_the_api_would_refuse_is_reported_with_its_line() -> None:
    text = GOOD.replace("age: 36", "api_key: x").replace("openai/gpt-4o-mini", "nonsense")
    with pytest.raises(FlowsFileError) as err:
        parse(text)
    got = {(p.line, p.where) for p in err.value.problems}
    assert got == {(10, "flows[0].inputs"), (19, "flows[1].params.decider")}
    assert "looks sensitive" in str(err.value)


@pytest.mark.parametrize(
    ("text", "line", "says"),
    [
        ("suite: a\nflows: [\n", 3, "not valid YAML"),
        ("suite: a\n", 1, "'flows' is a required property"),
        ("- a\n", 1, "is not of type 'object'"),
        ("suite: a\nflows:\n  - {name: x, goal: g}\n  - {name: x, goal: h}\n", 4, "named twice"),
    ],
)
def test_a_broken_file_says_where(text: str, line: int, says: str) -> None:
    with pytest.raises(FlowsFileError) as err:
        parse(text)
    assert err.value.problems[0].line == line
    assert says in err.value.problems[0].message


def test_suite_validate_exits_0_or_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text(GOOD)
    bad.write_text(BAD)
    assert main(["suite", "validate", str(good)]) == 0
    assert "suite smoke, 2 flows, 3 matrix cells: ok" in capsys.readouterr().out
    assert main(["suite", "validate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:line 7: flows[0].secrets.password:" in err
    assert "6 problems" in err
    assert main(["suite", "validate", str(tmp_path / "missing.yaml")]) == 2
