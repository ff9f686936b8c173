"""The workspace's import structure, read from the source (never imported): no import cycles,
no product package importing the test support, ``shared`` importing no service, no service
importing another service, and no test putting folders on ``sys.path``.

The graph has one node per module of ``shared/src``, ``services/*/src``, ``testing/src`` and
``scripts``, and an edge for every import a module makes, wherever it stands (at the top, in a
function, under ``TYPE_CHECKING``): a deferred import is still a dependency.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# .run holds the private services' state and the Ray tier's environment: nothing of the project.
SKIPPED_DIRS = {
    ".venv",
    ".git",
    "__pycache__",
    "node_modules",
    ".mypy_cache",
    ".ruff_cache",
    ".run",
}

# Service imports another service's code on purpose; each with its reason. Anything else
# between two services goes through ax3l.shared (or over the wire).
ALLOWED_SERVICE_IMPORTS = {
    ("orchestrator", "mcp-snakelab"): "the orchestrator forks its MCP sessions from the stdio"
    " server's code (mcp_fork.py) and its seats endpoint registers the same submit tools",
    ("compare", "snakelab"): "ax3l-compare runs the reference SnakeLab for its repeats and waits"
    " on its health ping",
}


@dataclass(frozen=True)
class Module:
    name: str  # dotted; scripts are ``scripts.<file name>``
    path: Path
    package: str  # the workspace package: shared, testing, scripts or the service's folder
    is_package: bool  # an __init__.py


def source_roots(repo: Path) -> list[tuple[str, Path]]:
    """(workspace package, source folder) of every package the graph covers."""
    roots = [("shared", repo / "shared" / "src")]
    roots += [(src.parent.name, src) for src in sorted((repo / "services").glob("*/src"))]
    roots.append(("testing", repo / "testing" / "src"))
    return roots


def find_modules(repo: Path) -> dict[str, Module]:
    """Every module of the covered packages and the scripts, by dotted name."""
    found: dict[str, Module] = {}
    for package, root in source_roots(repo):
        for path in sorted(root.rglob("*.py")):
            if SKIPPED_DIRS & set(path.parts):
                continue
            parts = list(path.relative_to(root).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts.pop()
            name = ".".join(parts)
            found[name] = Module(name, path, package, is_package)
    for path in sorted((repo / "scripts").glob("*.py")):
        name = f"scripts.{path.stem}"
        found[name] = Module(name, path, "scripts", False)
    return found


def imported_modules(module: Module, modules: dict[str, Module]) -> set[str]:
    """The workspace modules ``module`` imports: ``import a.b`` imports ``a.b``; ``from a
    import b`` imports the module ``a.b`` when there is one, else ``a`` (for its name ``b``).
    The parent packages a dotted import also runs are not counted."""
    tree = ast.parse(module.path.read_text(), str(module.path))
    here = module.name if module.is_package else module.name.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = here.split(".")[: len(here.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                names.add(full if full in modules else base)
    targets = {resolve(name, modules) for name in names}
    return {target for target in targets if target is not None and target != module.name}


def resolve(name: str, modules: dict[str, Module]) -> str | None:
    """The workspace module ``name`` is (or lies in), None for anything outside it."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(modules: dict[str, Module]) -> dict[str, set[str]]:
    """module -> the workspace modules it imports."""
    return {name: imported_modules(module, modules) for name, module in modules.items()}


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected group of modules, as ``[a, b, ..., a]``."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's algorithm; the graph is a few hundred modules
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_cycle_through(group, graph) for group in groups]


def _cycle_through(group: list[str], graph: dict[str, set[str]]) -> list[str]:
    """A shortest cycle from the group's first module back to it, inside the group."""
    start, members = group[0], set(group)
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for target in sorted(graph[node] & members):
            if target == start:
                return [*paths[node], start]
            if target not in paths:
                paths[target] = [*paths[node], target]
                queue.append(target)
    return [*group, start]  # unreachable for a strongly connected group


def path_insertions(files: Iterable[Path]) -> list[str]:
    """``file:line`` of every ``sys.path.insert``/``sys.path.append`` call in ``files``."""
    found = []
    for path in files:
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("insert", "append")
                and ast.unparse(node.func.value) == "sys.path"
            ):
                found.append(f"{path.relative_to(REPO)}:{node.lineno}")
    return found


def files_of_tests(repo: Path) -> list[Path]:
    """Every Python file of a ``tests`` folder, and every conftest."""
    files = []
    for path in sorted(repo.rglob("*.py")):
        relative = path.relative_to(repo).parts
        if SKIPPED_DIRS & set(relative):
            continue
        if "tests" in relative[:-1] or path.name == "conftest.py":
            files.append(path)
    return files


def _graph() -> tuple[dict[str, Module], dict[str, set[str]]]:
    modules = find_modules(REPO)
    return modules, import_graph(modules)


def test_no_import_cycles() -> None:
    """No module of shared, the services, testing or scripts imports itself back through
    others, even through a deferred or TYPE_CHECKING import."""
    _, graph = _graph()
    cycles = find_cycles(graph)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_product_packages_do_not_import_the_test_support() -> None:
    """shared and the services never import ax3l.testing (it is not in their images)."""
    modules, graph = _graph()
    product = {"shared"} | {path.name for path in (REPO / "services").iterdir()}
    wrong = [
        f"{name} -> {target}"
        for name, targets in sorted(graph.items())
        if modules[name].package in product
        for target in sorted(targets)
        if modules[target].package == "testing"
    ]
    assert not wrong, wrong


def service_imports_of_shared(modules: dict[str, Module], graph: dict[str, set[str]]) -> list[str]:
    """``module -> target`` for every import of a service's module by a module of ``shared``
    (the floor every service stands on), wherever the import stands."""
    services = {module.package for module in modules.values()} - {"shared", "testing", "scripts"}
    return [
        f"{name} -> {target}"
        for name, targets in sorted(graph.items())
        if modules[name].package == "shared"
        for target in sorted(targets)
        if modules[target].package in services
    ]


def test_shared_imports_no_service() -> None:
    """shared never imports a service's code, not even inside a function or under
    TYPE_CHECKING: a service passes in what shared needs of it."""
    modules, graph = _graph()
    wrong = service_imports_of_shared(modules, graph)
    assert not wrong, wrong


def test_services_do_not_import_each_other() -> None:
    """A service imports another service's code only where ALLOWED_SERVICE_IMPORTS says why."""
    modules, graph = _graph()
    services = {path.name for path in (REPO / "services").iterdir() if path.is_dir()}
    wrong = [
        f"{name} -> {target}"
        for name, targets in sorted(graph.items())
        for target in sorted(targets)
        if modules[name].package in services
        and modules[target].package in services
        and modules[name].package != modules[target].package
        and (modules[name].package, modules[target].package) not in ALLOWED_SERVICE_IMPORTS
    ]
    assert not wrong, wrong


def test_no_test_puts_folders_on_sys_path() -> None:
    """Helpers beside the tests are found through pyproject's pytest pythonpath, never by a
    test or conftest editing sys.path."""
    found = path_insertions(files_of_tests(REPO))
    assert not found, found


def test_a_planted_cycle_is_found_and_named(tmp_path: Path) -> None:
    """The checker finds a cycle made of a deferred import and a TYPE_CHECKING one, and names
    its modules in order."""
    package = tmp_path / "shared" / "src" / "ax3l" / "shared"
    package.mkdir(parents=True)
    (tmp_path / "services").mkdir()
    (tmp_path / "scripts").mkdir()
    (package / "one.py").write_text("def f():\n    from ax3l.shared import two\n")
    (package / "two.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ax3l.shared.one import f\n"
    )
    (package / "three.py").write_text("from ax3l.shared import one\n")
    cycles = find_cycles(import_graph(find_modules(tmp_path)))
    assert cycles == [["ax3l.shared.one", "ax3l.shared.two", "ax3l.shared.one"]]


def test_a_planted_upward_import_from_shared_is_found(tmp_path: Path) -> None:
    """An import of a service from shared is found and named, at the top of a module and hidden
    in a function; shared's own imports and a service importing shared are not."""
    shared = tmp_path / "shared" / "src" / "ax3l" / "shared"
    reports = tmp_path / "services" / "reports" / "src" / "ax3l" / "reports"
    snakelab = tmp_path / "services" / "snakelab" / "src" / "snakelab"
    for folder in (shared, reports, snakelab):
        folder.mkdir(parents=True)
    (tmp_path / "scripts").mkdir()
    (reports / "settings.py").write_text("from ax3l.shared import base\n")
    (snakelab / "__init__.py").write_text("")
    (snakelab / "healthcheck.py").write_text("def ping():\n    return True\n")
    (shared / "base.py").write_text("")
    (shared / "spec.py").write_text(
        "from ax3l.shared import base\nfrom ax3l.reports.settings import X\n\n"
        "def healthy():\n    from snakelab.healthcheck import ping\n    return ping()\n"
    )
    modules = find_modules(tmp_path)
    assert service_imports_of_shared(modules, import_graph(modules)) == [
        "ax3l.shared.spec -> ax3l.reports.settings",
        "ax3l.shared.spec -> snakelab.healthcheck",
    ]


# -- Every statement is the store's ---------------------------------------------------------------

SNAKELAB_TABLES = ("simulation_runs", "configurations", "simulation_episodes")
# A statement naming one: FROM/JOIN/INTO/UPDATE/TABLE, then the table, qualified or not.
NAMED_IN_SQL = re.compile(
    r"\b(?:FROM|JOIN|INTO|UPDATE|TABLE)\s+(?:\S*\.)?`?(?:" + "|".join(SNAKELAB_TABLES) + r")\b"
)
# Any statement (the code writes SQL's keywords in capitals, prose does not).
STATEMENT = re.compile(
    r"\b(?:SELECT\b[\s\S]*?\bFROM|INSERT\s+(?:IGNORE\s+)?INTO|REPLACE\s+INTO|UPDATE\s+\S+\s+SET"
    r"|DELETE\s+FROM|(?:CREATE|ALTER|DROP)\s+(?:TABLE|DATABASE|USER)|GRANT\s+[A-Z]+"
    r"|SHOW\s+[A-Z]+)\b"
)
# The store: the package every statement on both databases lives in.
STORE = "ax3l.shared.db"
# The reference SnakeLab writes its own tables, as the real one does: it is SnakeLab, not Ax3l.
SNAKELAB_ITSELF = "snakelab"


def in_store(name: str) -> bool:
    return name == STORE or name.startswith(STORE + ".")


def _text(node: ast.AST) -> str | None:
    """A string literal's text; an f-string's with ``{}`` for each expression."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(str(v.value) if isinstance(v, ast.Constant) else "{}" for v in node.values)
    return None


def snakelab_sql_lines(path: Path) -> list[int]:
    """The lines of ``path`` that name a SnakeLab table in SQL: in a statement's text, or
    qualified for one by ``Database.sl("simulation_runs")``."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        qualified = (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "sl"
            and any(isinstance(a, ast.Constant) and a.value in SNAKELAB_TABLES for a in node.args)
        )
        text = _text(node)
        if qualified or (text is not None and NAMED_IN_SQL.search(text)):
            found.add(node.lineno)  # type: ignore[attr-defined]
    return sorted(found)


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring nodes of ``tree``."""
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return {
        id(first.value)
        for node in ast.walk(tree)
        if isinstance(node, kinds) and node.body
        if isinstance(first := node.body[0], ast.Expr) and isinstance(first.value, ast.Constant)
    }


def statement_lines(path: Path) -> list[int]:
    """The lines of ``path`` where a string other than a docstring holds a SQL statement."""
    tree = ast.parse(path.read_text(), str(path))
    docstrings = _docstrings(tree)
    return sorted(
        {
            node.lineno  # type: ignore[attr-defined]
            for node in ast.walk(tree)
            if id(node) not in docstrings
            if (text := _text(node)) is not None and STATEMENT.search(text)
        }
    )


def outside_the_store(
    modules: dict[str, Module], lines_of: Callable[[Path], list[int]], packages: set[str]
) -> dict[str, list[int]]:
    """``module: lines`` of every module outside the store, the reference SnakeLab and the
    scripts, in one of ``packages`` (all when empty), where ``lines_of`` finds something."""
    return {
        name: lines
        for name, module in sorted(modules.items())
        if not in_store(name) and module.package not in (SNAKELAB_ITSELF, "scripts")
        if not packages or module.package in packages
        if (lines := lines_of(module.path))
    }


def product_packages(repo: Path) -> set[str]:
    """The workspace packages that ship: ``shared`` and the services."""
    return {package for package, _ in source_roots(repo)} - {"testing"}


def test_snakelab_tables_are_read_only_in_the_store() -> None:
    """No module of the product or the test support outside the store names
    ``simulation_runs``, ``configurations`` or ``simulation_episodes`` in SQL."""
    found = outside_the_store(find_modules(REPO), snakelab_sql_lines, set())
    assert not found, f"SnakeLab's tables named in SQL outside the store: {found}"


def test_every_statement_of_the_product_is_in_the_store() -> None:
    """No product module outside ``ax3l.shared.db`` holds a SQL statement."""
    found = outside_the_store(find_modules(REPO), statement_lines, product_packages(REPO))
    assert not found, f"SQL statements outside the store: {found}"


def test_planted_statements_are_found(tmp_path: Path) -> None:
    """Statements in an f-string and across lines are found outside the store; docstrings,
    prose in lower case, the store and the test support are not."""
    shared = tmp_path / "shared" / "src" / "ax3l" / "shared"
    (shared / "db").mkdir(parents=True)
    (tmp_path / "services").mkdir()
    (tmp_path / "scripts").mkdir()
    (tmp_path / "testing" / "src" / "ax3l" / "testing").mkdir(parents=True)
    (shared / "pages.py").write_text(
        '"""Reads: SELECT name FROM seats, in a docstring."""\n'
        'def a(t):\n    """DELETE FROM t, in prose."""\n    return f"DELETE FROM {t}"\n'
        'def b():\n    return "select the best from here", (\n        "UPDATE seats"\n'
        '        " SET revoked_at = NULL")\n'
    )
    (shared / "db" / "seats.py").write_text('def c():\n    return "SELECT 1 FROM seats"\n')
    (tmp_path / "testing" / "src" / "ax3l" / "testing" / "rows.py").write_text(
        'ROWS = "INSERT INTO events VALUES (1)"\n'
    )
    found = outside_the_store(find_modules(tmp_path), statement_lines, product_packages(tmp_path))
    assert found == {"ax3l.shared.pages": [4, 7]}


def test_planted_snakelab_sql_is_found(tmp_path: Path) -> None:
    """A statement in an f-string across lines, a ``db.sl`` qualification and a backquoted
    database are found; prose about configurations and another table are not."""
    shared = tmp_path / "shared" / "src" / "ax3l" / "shared"
    shared.mkdir(parents=True)
    (tmp_path / "services").mkdir()
    (tmp_path / "scripts").mkdir()
    (shared / "reads.py").write_text(
        'def a(db, n):\n    return (f"SELECT id FROM {n}"\n'
        '        " r JOIN `{n}`.configurations c")\n'
        'def b(db):\n    return db.sl("simulation_episodes")\n'
        'def c():\n    return "no golden configurations FROM here", "SELECT 1 FROM events"\n'
    )
    found = outside_the_store(find_modules(tmp_path), snakelab_sql_lines, set())
    assert found == {"ax3l.shared.reads": [2, 5]}
