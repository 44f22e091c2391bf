"""The layering, as rules on the import statements of every module (read with `ast`, nothing imported).

Why static: importing every module to watch `sys.modules` would pull in vLLM, DeepSpeed and Faust and take
minutes; and a runtime check sees transitive imports, while these rules are about what a file itself asks
for. `tests/core/test_purity.py` checks the other side at runtime (the core pulls in no I/O library).

The rules:
- the core imports nothing of ours outside `seamlessflow.core`;
- nothing outside `seamlessflow/cli` imports the CLI, but the two entry points that are the CLI;
- nothing in `seamlessflow/`, `services/` or `benchmarks/` imports `tests` (shared fakes live in
  `seamlessflow/testing`), nor names one of its modules to run (`python -m tests...`, `tests.x:fn`);
- the running system (`seamlessflow/` and `services/`) never imports those fakes nor names them to run
  (`python -m seamlessflow.testing...`): a stand-in a shipped command starts lives in `seamlessflow/loadtest`;
- only `seamlessflow/kafka/` imports the Kafka client libraries;
- the trainer and the rollout workers (their packages and services) import nothing of each other: they meet in
  `seamlessflow/model` (which model) and `seamlessflow/weights` (its versions, the engine's HTTP client);
- nothing in `tests/` imports another module of `tests/` (shared helpers live in `seamlessflow/testing`, shared
  fixtures in a conftest.py that pytest finds by itself);
- no two parts of `seamlessflow` (a package or a top-level module) import each other, however indirectly.
"""

from __future__ import annotations

import ast
import functools
import graphlib
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ("seamlessflow", "services", "benchmarks")  # what runs outside the test suite
KAFKA_CLIENTS = ("confluent_kafka", "aiokafka")
CLI_ENTRY_POINTS = {
    "seamlessflow/__main__.py": "`python -m seamlessflow` is the CLI",
    "services/agents/__main__.py": "the agent service is `seamlessflow agent run` with the service options",
}
# a module named as a string: `-m NAME` in an argv list, or `NAME:FUNCTION` as a loadable reference
MODULE_STRING = r"(\.\w+)+(:\w+)?$"
TEST_MODULE_NAME = re.compile(r"^tests" + MODULE_STRING)
FAKE_MODULE_NAME = re.compile(r"^seamlessflow\.testing" + MODULE_STRING)


@functools.cache
def syntax_tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(path: Path, root: Path = ROOT) -> Iterator[tuple[int, str]]:
    """(line, dotted module) for every import in the file, relative ones resolved, nested ones included;
    `from a import b` yields `a.b` (b may be a module or a name in `a`)."""
    here = module_name(path, root).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    for node in ast.walk(syntax_tree(path)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package[: len(package) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                yield node.lineno, f"{base}.{alias.name}"


def named_modules(path: Path, pattern: re.Pattern[str] = TEST_MODULE_NAME,
                  root: Path = ROOT) -> Iterator[tuple[int, str]]:
    """String constants that name a module matching `pattern`, as in `[sys.executable, "-m", "tests.proxy.stub"]`
    or `"tests.agents.fns:solve"`: what a file runs rather than imports."""
    for node in ast.walk(syntax_tree(path)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and pattern.match(node.value):
            yield node.lineno, node.value


def python_files(*folders: str, root: Path = ROOT) -> list[Path]:
    return sorted(p for folder in folders for p in (root / folder).rglob("*.py") if ".venv" not in p.parts)


def violations(files: Iterable[Path], forbidden: Callable[[str], bool], root: Path = ROOT,
               allowed: Iterable[str] = ()) -> list[str]:
    skip = set(allowed)
    return [f"{path.relative_to(root)}:{line} imports {name}"
            for path in files if str(path.relative_to(root)) not in skip
            for line, name in imported_names(path, root) if forbidden(name)]


def within(name: str, *packages: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


def test_the_core_imports_nothing_of_ours_outside_the_core():
    bad = violations(python_files("seamlessflow/core"),
                     lambda name: within(name, "seamlessflow") and not within(name, "seamlessflow.core"))
    assert bad == []


def test_only_the_cli_and_its_entry_points_import_the_cli():
    outside = [p for p in python_files(*SHIPPED) if not within(module_name(p), "seamlessflow.cli")]
    assert violations(outside, lambda name: within(name, "seamlessflow.cli"), allowed=CLI_ENTRY_POINTS) == []


def test_nothing_shipped_imports_or_runs_the_tests():
    files = python_files(*SHIPPED)
    bad = violations(files, lambda name: within(name, "tests"))
    bad += [f"{p.relative_to(ROOT)}:{line} names {name}" for p in files for line, name in named_modules(p)]
    assert bad == []


def test_a_test_module_imports_no_other_test_module():
    """Shared helpers live in `seamlessflow/testing` (or are conftest fixtures), so a test file can be read,
    moved or deleted without breaking another."""
    assert violations(python_files("tests"), lambda name: within(name, "tests")) == []


def test_the_running_system_neither_imports_nor_runs_a_test_fake():
    files = [p for p in python_files("seamlessflow", "services") if not within(module_name(p), "seamlessflow.testing")]
    bad = violations(files, lambda name: within(name, "seamlessflow.testing"))
    bad += [f"{p.relative_to(ROOT)}:{line} names {name}"
            for p in files for line, name in named_modules(p, FAKE_MODULE_NAME)]
    assert bad == []


def test_only_the_kafka_layer_imports_a_kafka_client():
    """Shipped code reaches Kafka through seamlessflow/kafka/ alone; the tests of that layer and of the
    broker itself, tests that look at the cluster's own state (group descriptions, a Schema Registry
    mock), and two test helpers that must share no code with the project's clients (a plain reader for the
    durability tests, an external evaluator's producer) may use the client directly."""
    allowed = ("seamlessflow.kafka", "tests.kafka", "tests.broker", "tests.avro.test_codec",
               "tests.services.test_trainer_ranks", "tests.rewards.test_worker_death",
               "seamlessflow.testing.independent_reader", "seamlessflow.testing.tracking_records",
               "tests.test_layering", "tests.core.test_purity")
    files = [p for p in python_files(*SHIPPED, "tests") if not within(module_name(p), *allowed)]
    assert violations(files, lambda name: within(name, *KAFKA_CLIENTS)) == []


def test_the_trainer_and_the_rollout_workers_import_nothing_of_each_other():
    """Which model both use is `seamlessflow.model.choice`'s, the engine's HTTP client is `seamlessflow.weights`':
    so either side can be read, changed and tested without the other."""
    trainer = python_files("seamlessflow/trainer", "services/trainer")
    rollout = python_files("seamlessflow/rollout", "services/rollout")
    bad = violations(trainer, lambda name: within(name, "seamlessflow.rollout"))
    bad += violations(rollout, lambda name: within(name, "seamlessflow.trainer"))
    assert bad == []


def part_of_seamlessflow(name: str) -> str | None:
    """`seamlessflow.weights.files` -> `weights`; the top-level package itself -> None."""
    parts = name.split(".")
    return parts[1] if parts[0] == "seamlessflow" and len(parts) > 1 else None


def import_cycle(files: Iterable[Path], root: Path = ROOT) -> list[str]:
    """One cycle between the parts of `seamlessflow` (empty: none), as the parts in import order."""
    graph: dict[str, set[str]] = {}
    for path in files:
        here = part_of_seamlessflow(module_name(path, root))
        if here is None:
            continue
        graph.setdefault(here, set())
        for _, name in imported_names(path, root):
            there = part_of_seamlessflow(name)
            if there is not None and there != here:
                graph[here].add(there)
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as error:
        return list(error.args[1])
    return []


def test_no_part_of_seamlessflow_depends_on_itself_through_another():
    """A cycle (say `rollout` <-> `weights`) means neither side can be read, tested or moved alone."""
    assert import_cycle(python_files("seamlessflow")) == []


def test_the_rules_see_every_form_of_import(tmp_path):
    """The checker itself: plain, from, relative, nested and `-m` forms are all found."""
    pkg = tmp_path / "seamlessflow" / "core"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    bad = pkg / "bad.py"
    bad.write_text("import os\nfrom .. import cli\nfrom . import prefix_tree\n"
                   "def f():\n    import tests.samples\n    from confluent_kafka import Consumer\n"
                   "    return ['-m', 'tests.proxy.helpers', 'tests are fine as words', 'tests.agents.fns:solve',\n"
                   "            '-m', 'seamlessflow.testing.fake', 'seamlessflow.testing is a word too']\n")
    names = {name for _, name in imported_names(bad, tmp_path)}
    assert {"os", "seamlessflow.cli", "seamlessflow.core.prefix_tree", "tests.samples",
            "confluent_kafka.Consumer"} <= names
    assert violations([bad], lambda n: within(n, "seamlessflow") and not within(n, "seamlessflow.core"),
                      tmp_path) == ["seamlessflow/core/bad.py:2 imports seamlessflow.cli"]
    assert [name for _, name in named_modules(bad, root=tmp_path)] == ["tests.proxy.helpers", "tests.agents.fns:solve"]
    assert [name for _, name in named_modules(bad, FAKE_MODULE_NAME, tmp_path)] == ["seamlessflow.testing.fake"]


def test_a_cycle_through_a_third_part_is_found(tmp_path):
    def parts(root: Path, imports: dict[str, str]) -> list[Path]:
        for part, imported in imports.items():
            (root / "seamlessflow" / part).mkdir(parents=True)
            (root / "seamlessflow" / part / "__init__.py").write_text(f"from seamlessflow.{imported} import x\n")
        return python_files("seamlessflow", root=root)

    found = import_cycle(parts(tmp_path / "loop", {"a": "b", "b": "c", "c": "a"}), tmp_path / "loop")
    assert set(found) == {"a", "b", "c"}
    assert import_cycle(parts(tmp_path / "line", {"a": "b", "b": "c", "c": "core"}), tmp_path / "line") == []
