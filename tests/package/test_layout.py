"""The layout the docs describe is the tree that exists (issue 15): README's file table covers every tracked
top-level entry, and every repository path a document names in backticks exists."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS = ("README.md", "AGENTS.md", "MEMORY.md", "skills/nvfp4-dual-gemm-optimizer/SKILL.md", "docs/leaderboard.md",
        "docs/design.md")  # not docs/history/: a diary names the paths of its day
# folders of this repository; a backticked path starting with one of them must exist
OWN_ROOTS = ("tools/", "emu/", "harness/", "calibration/", "probes/", "tests/", "docs/", "skills/", ".ci/")
# generated at run time, never tracked (.gitignore): named by the docs as outputs
GENERATED = ("build/", ".venv/")
# tests/: one folder per layer (README "Layout") and the package's own files; the shared PTX fixture
TEST_FOLDERS = ("tests", "tests/emu", "tests/harness", "tests/calibration", "tests/package", "tests/no_tvm_ffi")
TEST_KIT = ("tests/emu/ptx_kit.py", "tests/no_tvm_ffi/sitecustomize.py")  # the PTX fixture; a machine without apache-tvm-ffi
# leaderboard files written for the runner's tests (tests/harness/test_runner.py): loaded by path as `submission`, as the
# leaderboard loads one, so not a package
SUBMISSIONS = "tests/harness/submissions"


def _tracked() -> list[str]:
    out = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True)
    if out.returncode:  # not a git checkout (an unpacked copy): walk the tree instead
        return [str(p.relative_to(REPO)) for p in REPO.rglob("*") if p.is_file() and ".venv" not in p.parts]
    return out.stdout.split()


def test_readme_file_table_covers_every_top_level_entry():
    readme = (REPO / "README.md").read_text()
    table = readme[readme.index("| path | audience |"):readme.index("## Two commands")]
    named = set(re.findall(r"`([^`]+)`", table))
    plumbing = {".gitignore", "pyproject.toml", "README.md"}
    entries = {p.split("/")[0] + ("/" if "/" in p else "") for p in _tracked()} - plumbing
    unnamed = [e for e in sorted(entries) if not any(n == e or n.startswith(e) for n in named)]
    assert not unnamed, f"README's file table does not name {unnamed}"


def test_every_path_the_docs_name_exists():
    missing = []
    for doc in DOCS:
        text = (REPO / doc).read_text()
        # a path that belongs to another repository is written with its owner before it ("kernelbot's `tests/...`")
        for ref in re.findall(r"(?<!'s )`([^`\s]+)`", text):
            path = ref.split("::")[0].rstrip(".,:;)")
            if not path.startswith(OWN_ROOTS) or path.startswith(GENERATED) or any(c in path for c in "<>*{}$"):
                continue
            if not (REPO / path).exists():
                missing.append(f"{doc}: {ref}")
    assert not missing, missing


def test_probes_live_outside_tests_and_tools_are_user_clis():
    """tests/ holds pytest files, their fixtures (conftest.py, each folder's __init__.py), the PTX kit, the
    no-apache-tvm-ffi environment and the runner's test submissions only, in folders that mirror the layers; GPU
    probes are in probes/, emulator calibration in calibration/."""
    tests = [p.relative_to(REPO).as_posix() for p in (REPO / "tests").rglob("*.py")
             if p.parent != REPO / SUBMISSIONS]
    assert all(n.rsplit("/", 1)[1].startswith("test_") or n.endswith(("/__init__.py", "/conftest.py")) or n in TEST_KIT
               for n in tests), tests
    assert all(p.read_text().startswith("#!POPCORN leaderboard ") for p in (REPO / SUBMISSIONS).glob("*.py"))
    folders = {p.parent for p in (REPO / "tests").rglob("*.py") if p.parent != REPO / SUBMISSIONS}
    assert {f.relative_to(REPO).as_posix() for f in folders} <= set(TEST_FOLDERS), folders
    assert all((f / "__init__.py").is_file() for f in folders), folders  # unique module names under pytest's import
    tools = sorted(p.name for p in (REPO / "tools").glob("*.py") if p.name != "__init__.py")
    assert not [t for t in tools if "probe" in t or t.startswith("emu_")], tools
