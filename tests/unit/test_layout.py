"""The package's import structure, read from the source (ast): no import cycle among pabench's
modules, and no module, workflow script or benchmark that uses another module's private names."""
import ast
from pathlib import Path

from conftest import REPO

SRC = REPO / "src"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted((SRC / "pabench").rglob("*.py"))}


def import_nodes(tree: ast.AST):
    """Every import statement, at module level or inside a function (a deferred import closes a
    cycle as well when it runs), except those under `if TYPE_CHECKING:`, which never run."""
    skipped = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
               and "TYPE_CHECKING" in ast.unparse(node.test)
               for stmt in node.body for n in ast.walk(stmt)}
    return [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
            and id(n) not in skipped]


def imported(name: str, path: Path, node: ast.Import | ast.ImportFrom) -> list[tuple[str, str]]:
    """(module, name) for each name of one statement, relative imports resolved: ("a.b", "") for
    `import a.b`, ("a", "b") for `from a import b`."""
    if isinstance(node, ast.Import):
        return [(alias.name, "") for alias in node.names]
    base = node.module or ""
    if node.level:
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        base = ".".join(package[:len(package) - node.level + 1] + ([base] if base else []))
    return [(base, alias.name) for alias in node.names]


def import_graph() -> dict[str, set[str]]:
    """Each pabench module -> the pabench modules importing it runs: the imported module, a
    submodule named in `from x import y`, and the packages above them (their __init__ runs),
    except the packages above the importer itself, which are already imported."""
    mods = modules()
    graph = {}
    for name, path in mods.items():
        graph[name] = set()
        for node in import_nodes(ast.parse(path.read_text(), str(path))):
            for module, what in imported(name, path, node):
                target = f"{module}.{what}" if f"{module}.{what}" in mods else module
                while target and target != name and not name.startswith(target + "."):
                    if target in mods:
                        graph[name].add(target)
                    target = target.rpartition(".")[0]
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iteratively)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root), on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child), on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while not component or component[-1] != node:
                    component.append(stack.pop())
                    on_stack.discard(component[-1])
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_uses(path: Path, name: str, mods: dict[str, Path]) -> list[str]:
    """'line: module.name' for each private name of another pabench module that the file imports
    (`from m import _x`) or reads from a module it imported (`m._x`, `pabench.m._x`)."""
    tree = ast.parse(path.read_text(), str(path))
    bound, found = {}, []            # local name -> the pabench module it is bound to
    for node in import_nodes(tree):
        for alias, (module, what) in zip(node.names, imported(name, path, node)):
            if module.partition(".")[0] != "pabench":
                continue
            if isinstance(node, ast.Import):   # `import pabench.a.b` binds pabench
                local = alias.asname or "pabench"
                bound[local] = module if alias.asname else local
            elif f"{module}.{what}" in mods:
                bound[alias.asname or what] = f"{module}.{what}"
            elif is_private(what):
                found.append(f"{node.lineno}: {module}.{what}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and is_private(node.attr):
            dotted, value = [], node.value
            while isinstance(value, ast.Attribute):
                dotted.insert(0, value.attr)
                value = value.value
            if isinstance(value, ast.Name) and value.id in bound:
                module = ".".join([bound[value.id], *dotted])
                if module in mods and module != name:
                    found.append(f"{node.lineno}: {module}.{node.attr}")
    return found


def test_the_cycle_finder_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_pabench_has_no_import_cycle():
    graph = import_graph()
    assert "pabench.reporting.registry" in graph["pabench.papers.pa"]  # the graph is read at all
    found = cycles(graph)
    assert not found, f"modules that import each other (directly or around a loop): {found}"


def test_the_private_name_finder(tmp_path):
    mods = modules()
    script = tmp_path / "script.py"
    script.write_text("import pabench.core.io\nfrom pabench.core import paths as p\n"
                      "from pabench.core.io import _hidden, read_table, __doc__\n"
                      "def f():\n    return p._x, pabench.core.io._y, p.__name__, p.public\n")
    assert private_uses(script, "script", mods) == ["3: pabench.core.io._hidden",
                                                    "5: pabench.core.paths._x", "5: pabench.core.io._y"]


def test_no_module_uses_another_modules_private_names():
    """What one module uses of another is its API: public, so that renaming a private helper
    breaks nothing outside its module (tests may still reach into the module they test)."""
    mods = modules()
    files = dict(mods)
    for folder in ("workflow/scripts", "benchmarks"):
        files.update({f"{folder}/{p.name}": p for p in sorted((REPO / folder).glob("*.py"))})
    found = {name: uses for name, path in files.items() if (uses := private_uses(path, name, mods))}
    assert not found, f"private names used outside their module: {found}"


def test_paths_drawn_from_a_modules_own_file_point_at_the_checkout():
    """Modules that find the checkout (or src/) from their own file, at their depth in the tree."""
    from pabench.runtime import tracking
    from pabench.tools import campaign, rehearsal

    assert campaign.REPO == rehearsal.REPO == REPO.resolve()
    assert tracking.SRC == SRC.resolve()
