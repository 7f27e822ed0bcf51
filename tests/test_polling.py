"""Tests wait one way: tests/polling.py's eventually(). No module under tests/ sleeps in a
loop of its own (a polling loop, whatever its shape), and none sleeps more than MAX_SLEEP_S
at once: a longer wait is a wait for something, which eventually() polls for.

The scan reads each module's syntax tree, so code a test runs in a child process (a string
handed to `python -c`) is not judged. A loop that paces a load (rows every 50 ms for a few
seconds, not a wait for a condition) says so on its sleep's line with a `# pacing:` comment.
"""

from __future__ import annotations

import ast
import itertools
import operator
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.polling import eventually

TESTS = Path(__file__).resolve().parent
POLLING = TESTS / "polling.py"  # the one loop that sleeps
MAX_SLEEP_S = 0.5
PACING = "# pacing:"
SLEEP_MODULES = {"time", "asyncio", "anyio", "trio"}
LOOPS = (
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
)
SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
ARITHMETIC: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}


def seconds(node: ast.expr, known: dict[str, float]) -> float | None:
    """The value of a number literal, or arithmetic over literals and the module's numeric
    constants; None when it is anything else (a variable, a call)."""
    if isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        return float(value)
    if isinstance(node, ast.Name):
        return known.get(node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        inner = seconds(node.operand, known)
        return None if inner is None else (-inner if isinstance(node.op, ast.USub) else inner)
    if isinstance(node, ast.BinOp) and type(node.op) in ARITHMETIC:
        left, right = seconds(node.left, known), seconds(node.right, known)
        if left is None or right is None or (isinstance(node.op, ast.Div) and right == 0):
            return None
        return ARITHMETIC[type(node.op)](left, right)
    return None


def module_constants(tree: ast.Module) -> dict[str, float]:
    """NAME = <number arithmetic> at the module's top level, in order."""
    known: dict[str, float] = {}
    for statement in tree.body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            target, value = statement.targets[0], statement.value
        elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
            target, value = statement.target, statement.value
        else:
            continue
        if isinstance(target, ast.Name) and (number := seconds(value, known)) is not None:
            known[target.id] = number
    return known


def sleep_argument(call: ast.Call) -> tuple[ast.expr | None, float]:
    """(the argument, its unit in seconds) when `call` is a sleep, else (None, 0)."""
    func = call.func
    argument = call.args[0] if call.args else None
    if isinstance(func, ast.Name) and func.id == "sleep":  # from time import sleep
        return argument, 1.0
    if isinstance(func, ast.Attribute):
        module = func.value.id if isinstance(func.value, ast.Name) else None
        if func.attr == "sleep" and module in SLEEP_MODULES:
            return argument, 1.0
        if func.attr == "wait_for_timeout":  # Playwright's page sleep, in milliseconds
            return argument, 0.001
    return None, 0.0


def is_sleep(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and sleep_argument(node)[1] > 0


def own_nodes(loop: ast.AST) -> Iterator[ast.AST]:
    """The nodes a loop runs itself: not the bodies of functions or classes it defines."""
    for child in ast.iter_child_nodes(loop):
        yield child
        if not isinstance(child, SCOPES):
            yield from own_nodes(child)


def offenders(source: str, name: str) -> list[str]:
    """`name:line: why` for each sleep longer than MAX_SLEEP_S and each loop that sleeps."""
    tree = ast.parse(source, name)
    lines = source.splitlines()
    known = module_constants(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and (argument := sleep_argument(node))[1] > 0:
            value = None if argument[0] is None else seconds(argument[0], known)
            if value is not None and value * argument[1] > MAX_SLEEP_S + 1e-9:
                found.append(
                    f"{name}:{node.lineno}: sleeps {value * argument[1]:g} s at once "
                    f"(over {MAX_SLEEP_S} s): poll for what it waits for with eventually()"
                )
        if isinstance(node, LOOPS):
            for sleep in filter(is_sleep, own_nodes(node)):
                assert isinstance(sleep, ast.Call)
                if PACING not in lines[sleep.lineno - 1]:
                    found.append(
                        f"{name}:{sleep.lineno}: sleeps in a loop (line {node.lineno}): "
                        "wait with tests.polling.eventually(), or mark a load's pace "
                        f"with '{PACING} ...'"
                    )
    return sorted(set(found))


def test_no_test_sleeps_in_a_loop_of_its_own_or_long_at_once() -> None:
    found = [
        problem
        for path in sorted(TESTS.rglob("*.py"))
        if path != POLLING
        for problem in offenders(path.read_text(), str(path.relative_to(TESTS.parent)))
    ]
    assert not found, "\n".join(found)


SAMPLE = """
import asyncio
import time
from time import sleep

TICK = 0.3
CHILD = "import time\\nwhile True:\\n    time.sleep(60)\\n"  # a child's code: not judged


def wait_ready(ready):
    deadline = time.monotonic() + 10
    while not ready() and time.monotonic() < deadline:
        time.sleep(0.1)


def settle():
    time.sleep(3.0)


async def later():
    await asyncio.sleep(2 * TICK)


def tries(probe):
    for _ in range(20):
        if probe():
            return
        sleep(0.01)


def short():
    time.sleep(TICK + 0.2)


async def feed(client):
    while client.open:
        client.send()
        await asyncio.sleep(0.05)  # pacing: rows every 50 ms


def defines_in_a_loop():
    for n in range(3):
        def helper():
            return n
    return [helper() for _ in range(2)]


def comprehension():
    return [time.sleep(0.01) for _ in range(3)]


def browser(page):
    page.wait_for_timeout(800)
"""


def test_the_scan_catches_each_kind_of_offender() -> None:
    found = offenders(SAMPLE, "sample.py")
    lines = {int(problem.split(":")[1]) for problem in found}
    assert lines == {13, 17, 21, 28, 49, 53}, "\n".join(found)
    assert sum("in a loop" in p for p in found) == 3  # wait_ready, tries, comprehension
    assert sum("at once" in p for p in found) == 3  # settle, later (2 x TICK), browser
    assert offenders("import time\ntime.sleep(0.5)\n", "ok.py") == []


# eventually() itself ---------------------------------------------------------------------
def test_eventually_returns_the_first_truthy_answer() -> None:
    answers: Iterator[object] = itertools.chain([None, 0, [], "ready"], itertools.repeat("x"))
    assert eventually(lambda: next(answers), 5, "an answer", interval=0.001) == "ready"


def test_eventually_names_what_it_waited_for_and_the_last_answer() -> None:
    with pytest.raises(AssertionError, match=r"not within 0.05 s: the flag \(last answer: 0\)"):
        eventually(lambda: 0, 0.05, "the flag", interval=0.01, detail=lambda: "log tail")
    with pytest.raises(AssertionError, match="log tail"):
        eventually(lambda: None, 0.01, "x", detail=lambda: "log tail")


def test_eventually_retries_only_the_named_exceptions() -> None:
    calls = itertools.count()

    def flaky() -> bool:
        if next(calls) < 3:
            raise ConnectionError("not up yet")
        return True

    assert eventually(flaky, 5, "up", interval=0.001, retrying=(ConnectionError,))

    def down() -> bool:
        raise ConnectionError("refused")

    with pytest.raises(AssertionError, match="last error: ConnectionError") as failed:
        eventually(down, 0.02, "up", interval=0.005, retrying=(ConnectionError,))
    assert isinstance(failed.value.__cause__, ConnectionError)

    def broken() -> bool:
        raise KeyError("model_version")

    with pytest.raises(KeyError):  # not retried: a broken probe fails at once
        eventually(broken, 60, "never", retrying=(ConnectionError,))
