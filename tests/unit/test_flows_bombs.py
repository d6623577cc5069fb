"""A flows file cannot exhaust the machine (issue 44, finding 4): a "billion laughs" file, a
merge-key chain, nesting thousands deep, a number Python will not convert, a date with
month 13 are each refused by `goalfleet suite validate` (a real process) with exit 2 and one
line naming the line, within 1 s of CPU and 50 MB of memory more than a good file costs
(measured by `wait4` on that process); `goalfleet suite run` and `goalfleet schedule add`,
which submit the file to the API and the scheduler, read it through the same parser and
refuse it before they connect."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
import tracemalloc
from dataclasses import dataclass
from pathlib import Path

import pytest

from scheduler.cli.main import main
from scheduler.suites.flows import FlowsFileError, parse

pytestmark = pytest.mark.timeout(60)  # a regression must not hold the suite for minutes

GOOD = "suite: smoke\nflows:\n  - name: sign-in\n    goal: Sign in\n"


def laughs() -> str:
    """The classic: nine lists of nine aliases of the list before (10^9 strings), 553 bytes."""
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]")
    return "\n".join([*lines, "suite: x", "flows: [{name: n, goal: *i}]", ""])


def merge_chain() -> str:
    """Each mapping merges the one before twice: its keys double at every level (70 KB)."""
    lines = ["k0: &k0 {a0: 1, b0: 2}"]
    lines += [f"k{i}: &k{i} {{<<: [*k{i - 1}, *k{i - 1}], x{i}: {i}}}" for i in range(1, 1500)]
    return "\n".join([*lines, "suite: x", "flows: [{name: n, goal: g}]", ""])


BOMBS = {
    "billion laughs": (laughs(), 1, "anchors and aliases"),
    "merge-key chain": (merge_chain(), 1, "anchors and aliases"),
    "deep nesting": ("suite: x\nflows: " + "[" * 3000 + "]" * 3000 + "\n", 2, "nested over 32"),
    "inline merge key": ("suite: x\nflows:\n  - <<: {name: n}\n    goal: g\n", 3, "merge keys"),
    "5,000-digit number": (
        f"suite: x\nflows:\n  - {{name: n, goal: g, retries: {'1' * 5000}}}\n",
        3,
        "cannot be read: Exceeds the limit",
    ),
    "month 13": ("suite: x\nflows:\n  - {name: n, goal: g, on: 2024-13-45}\n", 3, "month must"),
}


@dataclass(frozen=True)
class Ran:
    code: int
    stdout: str
    stderr: str
    cpu_s: float
    max_rss_mb: float


def validate(path: Path, into: Path) -> Ran:
    """`goalfleet suite validate PATH` in a process of its own, capped at 1.5 GB of address
    space and 30 s (so the unchanged code fails this test without taking the machine down),
    its CPU time and peak memory read with `wait4`; its output kept in `into`."""

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1500 * 2**20, 1500 * 2**20))

    out, err = into / "validate.out", into / "validate.err"
    with out.open("w") as o, err.open("w") as e:
        proc = subprocess.Popen(  # this interpreter, our own command
            [sys.executable, "-m", "scheduler", "suite", "validate", str(path)],
            stdout=o,
            stderr=e,
            preexec_fn=cap,  # noqa: PLW1509 - setrlimit only, before exec
        )
        deadline = time.monotonic() + 30
        while (done := os.wait4(proc.pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        if done[0] == 0:
            proc.kill()
            done = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(done[1])
    usage = done[2]
    return Ran(
        code=proc.returncode,
        stdout=out.read_text(),
        stderr=err.read_text(),
        cpu_s=usage.ru_utime + usage.ru_stime,
        max_rss_mb=usage.ru_maxrss / 1024,
    )


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Ran:
    """What `suite validate` costs on a good file (the interpreter and its imports)."""
    path = tmp_path_factory.mktemp("good") / "good.yaml"
    path.write_text(GOOD)
    ran = validate(path, path.parent)
    assert ran.code == 0, ran.stderr
    return ran


@pytest.mark.parametrize("name", ["billion laughs", "merge-key chain", "deep nesting"])
def test_a_bomb_is_refused_fast_and_small(name: str, baseline: Ran, tmp_path: Path) -> None:
    """Exit 2, one line naming the file and the line, under 1 s of CPU and 50 MB of memory
    beyond a good file's."""
    text, line, says = BOMBS[name]
    path = tmp_path / "bomb.yaml"
    path.write_text(text)
    ran = validate(path, tmp_path)
    assert ran.code == 2, ran.stderr[-500:]
    assert ran.stderr.count("\n") == 1, ran.stderr[-500:]
    assert f"{path}:line {line}: " in ran.stderr
    assert says in ran.stderr
    assert ran.cpu_s - baseline.cpu_s < 1.0, (ran.cpu_s, baseline.cpu_s)
    assert ran.max_rss_mb - baseline.max_rss_mb < 50, (ran.max_rss_mb, baseline.max_rss_mb)


@pytest.mark.parametrize("name", list(BOMBS))
def test_the_parser_refuses_it_within_bounds(name: str) -> None:
    """`parse` itself: one problem naming the line, in under 1 s and 50 MB of allocations."""
    text, line, says = BOMBS[name]
    started = time.perf_counter()
    with pytest.raises(FlowsFileError) as err:
        parse(text)
    assert time.perf_counter() - started < 1.0
    [problem] = err.value.problems
    assert (problem.line, says in problem.message) == (line, True), problem
    tracemalloc.start()
    try:
        with pytest.raises(FlowsFileError):
            parse(text)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 50 * 2**20


@pytest.mark.parametrize(
    "argv", [["suite", "validate"], ["suite", "run"], ["schedule", "add", "--every", "1h"]]
)
def test_every_command_that_reads_a_flows_file_refuses_a_bomb(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`suite run` (the API's batch) and `schedule add` (the scheduler's) read the file with
    the same parser: exit 2 (bad input, not 3: no API was asked), one line."""
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMBS["billion laughs"][0])
    api = ["--api", "http://127.0.0.1:9"] if argv[0] == "schedule" or argv[1] == "run" else []
    started = time.perf_counter()
    assert main([*argv, str(path), *api]) == 2
    assert time.perf_counter() - started < 1.0
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert f"{path}:line 1: " in err
    assert "anchors and aliases" in err


def test_an_endless_file_is_read_no_further_than_the_cap(baseline: Ran, tmp_path: Path) -> None:
    """`/dev/zero` (or a 54 MB file) is refused after the first MB, not read whole."""
    ran = validate(Path("/dev/zero"), tmp_path)
    assert ran.code == 2, ran.stderr[-500:]
    assert "over the limit of 1000000 bytes" in ran.stderr
    assert ran.max_rss_mb - baseline.max_rss_mb < 50, (ran.max_rss_mb, baseline.max_rss_mb)


def test_a_good_file_still_reads(tmp_path: Path) -> None:
    """Quoted `&`, `*` and `<<` in values are text, not YAML's: read as written."""
    flows = parse(
        'suite: s\nflows:\n  - name: a-b\n    goal: "Press *OK* & <<next>>"\n'
        "    inputs: {note: '&a *b << [[[x]]]'}\n    matrix: {labels: {pool: '<<'}}\n"
    )
    [flow] = flows.body["flows"]
    assert flow["goal"] == "Press *OK* & <<next>>"
    assert flow["inputs"] == {"note": "&a *b << [[[x]]]"}
    assert flow["matrix"] == [{"labels": {"pool": "<<"}}]
