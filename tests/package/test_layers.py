"""The layers import one way (README "Layout"): emu/ (a generic SM100 emulator) <- harness/ (this package's kernels
in it) <- calibration/ (checks against hardware and public kernels) <- tools/, probes/, tests. Read from the source
(every import statement, those inside functions too), so a new back-import, cycle or private-name import fails here
before anyone runs it."""
import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# A top-level name -> its layer. The package's gpumode files (reference.py, task.py, utils.py, submission.py) sit with
# the harness: the harness may import reference (the check of C); emu may not (FORBIDDEN).
LAYERS = {"emu": 0, "harness": 1, "reference": 1, "task": 1, "utils": 1, "submission": 1, "calibration": 2,
          "tools": 3, "probes": 3, "test_correctness": 3, "test_benchmark": 3}
FORBIDDEN = {"emu": {"reference", "task", "utils", "submission"}}  # emu knows no problem
FOLDERS = ("emu", "harness", "calibration", "tools", "probes")


def source_files(root: Path):
    for folder in FOLDERS:
        yield from sorted((root / folder).rglob("*.py"))
    yield from sorted(root.glob("*.py"))


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path, root: Path) -> list[tuple[str, list[str], int]]:
    """(module imported, names taken from it, line) for every import statement of the file, relative ones resolved."""
    package = module_name(path, root).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(a.name, [], node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            names = [a.name for a in node.names]
            out += [(f"{mod}.{n}", [], node.lineno) for n in names] if not node.module else [(mod, names, node.lineno)]
    return out


def edges(root: Path = REPO):
    """(importer, imported repository module, names taken, file:line) for every import between repository modules."""
    files = list(source_files(root))
    known = {module_name(p, root) for p in files} | set(FOLDERS)
    for path in files:
        me = module_name(path, root)
        for name, names, line in imports(path, root):
            parts = name.split(".")
            target = next((".".join(parts[:i]) for i in range(len(parts), 0, -1) if ".".join(parts[:i]) in known), None)
            if target is not None and target != me:
                yield me, target, names, f"{path.relative_to(root)}:{line}"


def back_imports(root: Path = REPO) -> list[str]:
    def layer(module):
        return LAYERS.get(module.split(".")[0], 0)

    return [f"{where}: {me} imports {target}" for me, target, _, where in edges(root)
            if layer(target) > layer(me) or target.split(".")[0] in FORBIDDEN.get(me.split(".")[0], ())]


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


def test_every_import_points_down_or_sideways():
    back = back_imports()
    assert not back, "imports that run back up a layer:\n" + "\n".join(back)


def test_no_import_cycle():
    found = cycles()
    assert not found, "import cycles: " + "; ".join(" -> ".join(c) for c in found)


def test_no_private_name_is_imported_from_another_module():
    private = [f"{where}: {me} takes {n} from {target}" for me, target, names, where in edges()
               for n in names if n.startswith("_") and not n.startswith("__")]
    assert not private, "private names imported across modules:\n" + "\n".join(private)


def test_the_readme_layout_table_names_every_layer():
    section = (REPO / "README.md").read_text().split("## Layout", 1)[1].split("\n## ", 1)[0]
    for folder in FOLDERS + ("tests",):
        assert f"`{folder}/`" in section, folder


@pytest.mark.parametrize("importer, line", [("emu/ptx.py", "from harness import verdict"),
                                            ("emu/ptx.py", "import reference"),
                                            ("harness/verdict.py", "from calibration.public import file_of"),
                                            ("calibration/public.py", "import tools.sol")])
def test_a_planted_back_import_is_reported(tmp_path, importer, line):
    """The rule is not vacuous: one back-import in a small tree of the same folders is reported."""
    for f in ("emu/__init__.py", "emu/ptx.py", "harness/__init__.py", "harness/verdict.py", "calibration/__init__.py",
              "calibration/public.py", "tools/__init__.py", "tools/sol.py", "reference.py"):
        (tmp_path / f).parent.mkdir(exist_ok=True)
        (tmp_path / f).write_text("import numpy\n")
    assert not back_imports(tmp_path)
    (tmp_path / importer).write_text(line + "\n")
    assert [b.split(":")[0] for b in back_imports(tmp_path)] == [importer]


def test_a_planted_cycle_is_reported(tmp_path):
    (tmp_path / "emu").mkdir()
    (tmp_path / "emu" / "a.py").write_text("from .b import x\n")
    (tmp_path / "emu" / "b.py").write_text("def f():\n    from .a import y\n")
    assert cycles(tmp_path) == [["emu.a", "emu.b", "emu.a"]]
