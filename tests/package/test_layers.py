"""The layers import one way (README "Layout"): emu/ (a generic SM100 emulator) <- harness/ (this package's kernels
in it) <- calibration/ (checks against hardware and public kernels) <- tools/, probes/, tests/. Read from the source,
so a new back-import, cycle or private-name import fails here before anyone runs it: every import statement (those
inside functions too) and every load through importlib (`import_module("name")`, `spec_from_file_location(name,
PATH)` where PATH is built from string literals, directly or through a name assigned in the same function or at the
module's top, e.g. `REPO / "probes" / "tma_loads.py"`), in every Python file of the repository, tests/ and
nvfp4_gemm/ included."""
import ast
from functools import lru_cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# A top-level name -> its layer. The package's gpumode files (reference.py, task.py, utils.py, problem_files.py,
# submission.py, nvfp4_gemm/) sit with the harness: the harness may import reference (the check of C); emu may not
# (FORBIDDEN). Every top-level module or folder of the repository has a layer (test_every_module_has_a_layer).
LAYERS = {"emu": 0, "harness": 1, "reference": 1, "task": 1, "utils": 1, "submission": 1, "problem_files": 1,
          "nvfp4_gemm": 1, "calibration": 2, "tools": 3, "probes": 3, "tests": 3, "test_correctness": 3,
          "test_benchmark": 3}
FORBIDDEN = {"emu": {"reference", "task", "utils", "submission", "problem_files", "nvfp4_gemm"}}  # emu knows no problem
FOLDERS = ("emu", "harness", "calibration", "tools", "probes", "tests", "nvfp4_gemm")
# Loads by path that run a lower layer's file as the subject of a check rather than as a library: calibration runs the
# GPU probes' own stub kernels in the emulator (calibration/gpu_probes.py), as it runs public kernels' sources.
SUBJECTS = {("calibration.gpu_probes", "probes.tma_loads"), ("calibration.gpu_probes", "probes.epilogue")}
LOADERS = {"import_module", "__import__", "spec_from_file_location"}


def source_files(root: Path):
    for folder in FOLDERS:
        yield from sorted((root / folder).rglob("*.py"))
    yield from sorted(root.glob("*.py"))


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _assignments(scope) -> dict:
    """name -> the values assigned to it in `scope` (a module's top-level statements, or a whole function)."""
    nodes = scope.body if isinstance(scope, ast.Module) else ast.walk(scope)
    out = {}
    for node in nodes:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    out.setdefault(target.id, []).append(node.value)
    return out


def _path_suffixes(expr, names: dict, seen=()) -> list[tuple[str, ...]]:
    """The repository paths an expression can name, as their trailing literal parts: `X / "probes" / "a.py"` ->
    ("probes", "a.py"), `"a.py"` -> ("a.py",); names are followed into the values `names` holds for them."""
    out, in_chain = [], set()
    for node in ast.walk(expr):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and _literal(node.right, ".py"):
            parts, left = [node.right.value], node.left
            in_chain.add(id(node.right))
            while isinstance(left, ast.BinOp) and isinstance(left.op, ast.Div) and _literal(left.right):
                parts.insert(0, left.right.value)
                left = left.left
            out.append(tuple(parts))
        elif _literal(node, ".py") and id(node) not in in_chain:
            out.append((node.value,))
        elif isinstance(node, ast.Name) and node.id in names and node.id not in seen:
            for value in names[node.id]:
                out += _path_suffixes(value, names, seen + (node.id,))
    return out


def _literal(node, suffix: str = "") -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.endswith(suffix)


def _loads(tree: ast.Module) -> list[tuple[str, object, int]]:
    """("module", name, line) for `import_module("name")` / `__import__("name")` and ("path", suffix, line) for each
    path `spec_from_file_location(name, path)` can name (see _path_suffixes)."""
    top = _assignments(tree)
    out = []

    def visit(node, names):
        for child in ast.iter_child_nodes(node):
            scope = names
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                scope = {**names, **_assignments(child)}
            if isinstance(child, ast.Call):
                func = child.func
                called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
                if called in ("import_module", "__import__") and child.args and _literal(child.args[0]):
                    out.append(("module", child.args[0].value, child.lineno))
                elif called == "spec_from_file_location" and len(child.args) > 1:
                    out.extend(("path", s, child.lineno) for s in _path_suffixes(child.args[1], scope))
            visit(child, scope)

    visit(tree, top)
    return out


def imports(path: Path, root: Path, tree: ast.Module) -> list[tuple[str, list[str], int]]:
    """(module imported, names taken from it, line) for every import statement of the file (its `tree`), relative ones
    resolved (`from . import _x` takes `_x` from the package)."""
    package = module_name(path, root).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, [], node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            out.append((mod, [a.name for a in node.names], node.lineno))
    return out


def edges(root: Path = REPO) -> tuple:
    """(importer, imported repository module, names taken, file:line) for every import or load between repository
    modules; the repository's are read once per run (a planted tree, written between two calls, every time)."""
    return _repository_edges() if root == REPO else tuple(_edges(root))


@lru_cache(maxsize=None)
def _repository_edges() -> tuple:
    return tuple(_edges(REPO))


def _edges(root: Path):
    files = list(source_files(root))
    modules = {module_name(p, root): p for p in files}
    known = set(modules) | set(FOLDERS)
    for path in files:
        me = module_name(path, root)
        text = path.read_text()
        tree = ast.parse(text)
        loads = _loads(tree) if any(loader in text for loader in LOADERS) else []
        found = [(name, [], line) for kind, name, line in loads if kind == "module"]
        for name, names, line in imports(path, root, tree):
            # `from package import submodule` imports the submodule
            subs = [n for n in names if f"{name}.{n}" in known]
            found += [(f"{name}.{n}", [n], line) for n in subs]
            if len(subs) < len(names) or not names:
                found.append((name, [n for n in names if n not in subs], line))
        for kind, suffix, line in loads:
            if kind == "path":
                found += [(m, [], line) for m, p in modules.items()
                          if p.relative_to(root).parts[-len(suffix):] == suffix]
        for name, names, line in found:
            parts = name.split(".")
            target = next((".".join(parts[:i]) for i in range(len(parts), 0, -1) if ".".join(parts[:i]) in known), None)
            if target is not None and target != me:
                yield me, target, names, f"{path.relative_to(root)}:{line}"


def layer(module: str) -> int:
    return LAYERS[module.split(".")[0]]


def back_imports(root: Path = REPO) -> list[str]:
    return [f"{where}: {me} imports {target}" for me, target, _, where in edges(root)
            if (layer(target) > layer(me) and (me, target) not in SUBJECTS)
            or target.split(".")[0] in FORBIDDEN.get(me.split(".")[0], ())]


def cycles(root: Path = REPO) -> list[list[str]]:
    graph, state, stack, found = {}, {}, [], []
    for me, target, _, _ in edges(root):
        graph.setdefault(me, set()).add(target)

    def visit(node):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                found.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return found


def private_imports(root: Path = REPO) -> list[str]:
    return [f"{where}: {me} takes {n} from {target}" for me, target, names, where in edges(root)
            for n in names if n.startswith("_") and not n.startswith("__")]


def test_every_import_points_down_or_sideways():
    back = back_imports()
    assert not back, "imports that run back up a layer:\n" + "\n".join(back)


def test_no_import_cycle():
    found = cycles()
    assert not found, "import cycles: " + "; ".join(" -> ".join(c) for c in found)


def test_no_private_name_is_imported_from_another_module():
    private = private_imports()
    assert not private, "private names imported across modules:\n" + "\n".join(private)


def test_every_module_has_a_layer_and_every_subject_load_exists():
    assert {module_name(p, REPO).split(".")[0] for p in source_files(REPO)} <= set(LAYERS)
    loads = {(me, target) for me, target, _, _ in edges()}
    assert SUBJECTS <= loads, SUBJECTS - loads  # a stated exception that no longer happens is removed


def test_the_readme_layout_table_names_every_layer():
    section = (REPO / "README.md").read_text().split("## Layout", 1)[1].split("\n## ", 1)[0]
    for folder in FOLDERS:
        assert f"`{folder}/`" in section, folder


def tree(tmp_path: Path) -> Path:
    """A small repository of the same folders, every file importing only numpy."""
    for f in ("emu/__init__.py", "emu/ptx.py", "harness/__init__.py", "harness/verdict.py", "calibration/__init__.py",
              "calibration/public.py", "tools/__init__.py", "tools/sol.py", "tests/__init__.py", "tests/kit.py",
              "nvfp4_gemm/reference.py", "reference.py", "utils.py"):
        (tmp_path / f).parent.mkdir(exist_ok=True)
        (tmp_path / f).write_text("import numpy\n")
    assert not back_imports(tmp_path) and not cycles(tmp_path) and not private_imports(tmp_path)
    return tmp_path


@pytest.mark.parametrize("importer, line", [
    ("emu/ptx.py", "from harness import verdict"),
    ("emu/ptx.py", "import reference"),
    ("emu/ptx.py", "import nvfp4_gemm.reference"),
    ("harness/verdict.py", "from calibration.public import file_of"),
    ("calibration/public.py", "import tools.sol"),
    ("calibration/public.py", "from tests.kit import kernel_text"),
    ("harness/verdict.py", "def f():\n    import importlib\n    return importlib.import_module('tools.sol')"),
    ("emu/ptx.py", "import importlib.util\nfrom pathlib import Path\nHERE = Path(__file__).parents[1]\n"
                   "def load():\n    where = HERE / 'harness' / 'verdict.py'\n"
                   "    return importlib.util.spec_from_file_location('v', where)"),
])
def test_a_planted_back_import_is_reported(tmp_path, importer, line):
    """The rule is not vacuous: one back-import in a small tree of the same folders is reported, an import statement
    or an importlib load, of any repository folder."""
    root = tree(tmp_path)
    (root / importer).write_text(line + "\n")
    assert [b.split(":")[0] for b in back_imports(root)] == [importer]


@pytest.mark.parametrize("a, b", [
    ("from .b import x\n", "def f():\n    from .a import y\n"),
    ("from .b import x\n", "import importlib\ndef f():\n    return importlib.import_module('emu.a')\n"),
])
def test_a_planted_cycle_is_reported(tmp_path, a, b):
    (tmp_path / "emu").mkdir()
    (tmp_path / "emu" / "a.py").write_text(a)
    (tmp_path / "emu" / "b.py").write_text(b)
    assert cycles(tmp_path) == [["emu.a", "emu.b", "emu.a"]]


def test_the_circle_through_a_problem_lookup_in_utils_is_reported(tmp_path):
    """Issue 30's circle: utils.py loading reference.py by importlib while reference.py imports utils.py."""
    root = tree(tmp_path)
    (root / "reference.py").write_text("from utils import verbose_allclose\n")
    (root / "utils.py").write_text("def load_reference():\n    import importlib\n"
                                   "    return importlib.import_module('reference')\n")
    assert cycles(root) == [["reference", "utils", "reference"]]
    (root / "utils.py").write_text("import importlib.util\nfrom pathlib import Path\nREPO_DIR = Path(__file__).parent\n"
                                   "def load_reference(folder):\n    path = REPO_DIR / folder / 'reference.py'\n"
                                   "    return importlib.util.spec_from_file_location('r', path)\n")
    assert ["reference", "utils", "reference"] in cycles(root)


@pytest.mark.parametrize("importer, line, taken", [
    ("harness/verdict.py", "from emu.ptx import _parse", "_parse"),
    ("emu/ptx.py", "from . import _machine", "_machine"),
    ("tools/sol.py", "from harness.verdict import emulate, _prepare", "_prepare"),
])
def test_a_planted_private_name_import_is_reported(tmp_path, importer, line, taken):
    root = tree(tmp_path)
    (root / "emu" / "_machine.py").write_text("import numpy\n")
    (root / importer).write_text(line + "\n")
    assert [p.split(": ", 1)[1].split(" takes ")[1].split(" from ")[0] for p in private_imports(root)] == [taken]
