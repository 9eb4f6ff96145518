"""nvidia-cutlass-dsl releases beside the installed one: where each lives, the environment that imports it, and its
install.

The kernel must compile on any runner it may meet: the leaderboard's reference was tested with "CuTe DSL 4.3.0.dev0"
and the runners' packages are not public (docs/leaderboard.md §5), so every release from 4.3.0 on is a possible
runner, and a user may have any later one. MATRIX is one release of each: every 4.3 patch (the leaderboard's era) and
the newest patch of each later minor on PyPI; tools/dsl_matrix.py compiles and emulates the kernel under each.

A release X is installed into .venv/dsl/X with `pip install --no-deps --target` (tools/setup.sh installs DEFAULT;
`bash tools/setup.sh --dsl X` or `python -m harness.dsl install X` any other). From 4.4 on the PyPI package is a
metapackage whose code is in nvidia-cutlass-dsl-libs-* wheels: install() follows its Requires-Dist names of that
family (without extras) and installs each at the same version.

    PYTHONPATH=$(python -m harness.dsl path 4.3.0) python tools/preflight.py ...   # or: tools/preflight.py --dsl 4.3.0

Why both entries of the path: the installed release's .pth runs `import nvidia_cutlass_dsl` and puts that package's
dsl_packages first on sys.path; with .venv/dsl/X first on PYTHONPATH, that import finds release X instead, so the
installed release never enters. Release X's own code is in nvidia_cutlass_dsl/python_packages (4.3-4.5) or
nvidia_cutlass_dsl/dsl_packages (4.6 on): the second entry names whichever it has.
"""
from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DSL_ROOT = REPO / ".venv" / "dsl"
PACKAGE = "nvidia-cutlass-dsl"
# Every 4.3 patch, then the newest patch of each later minor (releases on PyPI, read 2026-11-29).
MATRIX = ("4.3.0", "4.3.1", "4.3.2", "4.3.3", "4.3.4", "4.3.5", "4.4.2", "4.5.3", "4.6.3", "4.7.1", "4.8.1")
OLDEST, LEADERBOARD_ERA = "4.3.0", "4.3.5"
DEFAULT = (OLDEST, LEADERBOARD_ERA)  # what tools/setup.sh installs beside the venv's own release
CODE_FOLDERS = ("dsl_packages", "python_packages")


def installed_version() -> str:
    """The release the venv itself has (what `default` compiles with)."""
    try:
        return importlib.metadata.version(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def resolve(version: str) -> str:
    """`default` -> the venv's own release; a release number stays itself."""
    return installed_version() if version == "default" else version


def release_tuple(version: str) -> tuple:
    return tuple(int(x) for x in re.findall(r"\d+", version)[:3])


def before(version: str, release: str) -> bool:
    """Whether `version` is an older release than `release` ("4.3.5" before "4.5": True)."""
    return release_tuple(version) < release_tuple(release)


def root(version: str) -> Path:
    return DSL_ROOT / version


def is_installed(version: str) -> bool:
    """Whether `version` can be imported: it is the venv's own release, or installed in .venv/dsl/<version>."""
    return version in ("default", installed_version()) or (root(version) / ".complete").is_file()


def code_folder(version: str) -> Path:
    for name in CODE_FOLDERS:
        folder = root(version) / "nvidia_cutlass_dsl" / name
        if (folder / "cutlass").is_dir():
            return folder
    raise FileNotFoundError(f"nvidia-cutlass-dsl {version} has no cutlass package under {root(version)} "
                            f"(install it: bash tools/setup.sh --dsl {version})")


def pythonpath(version: str) -> str:
    return os.pathsep.join([str(root(version)), str(code_folder(version))])


def environment(version: str, base: dict | None = None) -> dict:
    """os.environ (or base) with PYTHONPATH importing `version`; for the venv's own release (or "default"), unchanged.
    Raises FileNotFoundError naming the install command if the release is not installed."""
    env = dict(os.environ if base is None else base)
    if version in ("default", installed_version()):
        return env
    if not is_installed(version):
        raise FileNotFoundError(f"nvidia-cutlass-dsl {version} is not installed in {root(version)}: "
                                f"bash tools/setup.sh --dsl {version}")
    env["PYTHONPATH"] = pythonpath(version)
    return env


def family_requirements(wheel: Path) -> list[str]:
    """The nvidia-cutlass-dsl-* distributions a wheel requires unconditionally (no extra, no environment marker)."""
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        lines = z.read(meta).decode().splitlines()
    names = []
    for line in lines:
        m = re.match(r"Requires-Dist:\s*(nvidia-cutlass-dsl[\w-]*)\s*([^;]*)(;.*)?$", line)
        if m and not m.group(3):
            names.append(m.group(1))
    return names


def install(version: str, quiet: bool = True) -> Path:
    """Install release `version` into .venv/dsl/<version> (idempotent): the package and, at the same version, every
    nvidia-cutlass-dsl-* distribution it requires, found by reading each wheel's metadata. The venv's own release
    is not installed again (its folder is returned)."""
    if version in ("default", installed_version()):
        return Path(importlib.metadata.distribution(PACKAGE).locate_file(""))
    target = root(version)
    if is_installed(version):
        return target
    flags = ["-qq"] if quiet else []
    with tempfile.TemporaryDirectory(prefix="dsl_wheels_") as tmp:
        wanted, done = [PACKAGE], set()
        while wanted:
            name = wanted.pop()
            if name in done:
                continue
            done.add(name)
            subprocess.run([sys.executable, "-m", "pip", "download", *flags, "--disable-pip-version-check",
                            "--no-deps", "--only-binary=:all:", "-d", tmp, f"{name}=={version}"], check=True)
            wheel = next(p for p in Path(tmp).glob("*.whl")
                         if p.name.lower().startswith(name.replace("-", "_") + "-"))
            wanted += family_requirements(wheel)
        if target.exists():
            subprocess.run(["rm", "-rf", str(target)], check=True)
        subprocess.run([sys.executable, "-m", "pip", "install", *flags, "--disable-pip-version-check", "--no-deps",
                        "--no-compile", "--target", str(target), *sorted(map(str, Path(tmp).glob("*.whl")))],
                       check=True)
    code_folder(version)  # the layout is one this module knows
    (target / ".complete").write_text(version + "\n")
    return target


def main(argv: list[str]) -> int:
    usage = "usage: python -m harness.dsl install VERSION|matrix... | path VERSION | matrix"
    if argv[:1] == ["install"] and argv[1:]:
        for version in dict.fromkeys(v for a in argv[1:] for v in (MATRIX if a == "matrix" else [a])):
            try:
                print(f"harness.dsl: nvidia-cutlass-dsl {version} in {install(version)}", file=sys.stderr)
            except subprocess.CalledProcessError as e:  # pip said why above
                print(f"harness.dsl: cannot install nvidia-cutlass-dsl {version}: {' '.join(e.cmd[3:5])} failed",
                      file=sys.stderr)
                return 1
        return 0
    if argv[:1] == ["path"] and len(argv) == 2:
        print(pythonpath(argv[1]))
        return 0
    if argv == ["matrix"]:
        print(" ".join(MATRIX))
        return 0
    print(usage, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
