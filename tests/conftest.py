"""Shared pytest setup: the repo root on sys.path, offline compiles target the B200, and the quick/full split.

CUTE_DSL_ARCH must be set before cutlass is first imported; on a machine with an SM100 GPU the value
is the one the DSL would pick itself.

Quick and full
--------------
`pytest -q` runs the quick set (the README's test command adds `-n auto`, a worker per CPU): every test not marked
`slow`. It touches each layer once (reference, harness, preflight of one config, the emulator on a 1-CTA, a 2-CTA,
an A-collector and a CONFIG_TABLE config, a planted bug) in about 2 minutes on 2 CPUs (4 in one process). The slow tests are deselected, not skipped: they count in
pytest's "N deselected", and the end of the run lists them by group (the test module, with the number of tests
per test function) and prints the command that runs them.

  pytest -q --full                everything: the quick set and the slow tests (what .ci/run runs)
  pytest -q -m slow               the slow tests only
  pytest -q -m "slow or not slow" everything as well: any -m expression is obeyed as given
  pytest -q -m slow tests/harness/test_verdict.py
                                  one group's slow tests (a folder, tests/harness/, one layer's)
  pytest -q "tests/harness/test_mutants.py::test_planted_bug_is_reported[swap_b]"
                                  a test named by its node id runs even if it is slow

Adding a test (no edit here; the group is the module the test lives in): put it in the folder of the layer it tests
(tests/emu/, tests/harness/, tests/calibration/; tests/package/ for the package's own files), in the module named after
the subsystem; hand-written PTX goes through tests/emu/ptx_kit.py (kernel_text, run_ptx on emu.run_kernel).
- a test that takes more than a few seconds on 2 CPUs (emulating the kernel, compiling several configs, sweeps,
  mutants over schedules, calibration kernels, DSL 4.3.5, timing) carries `@pytest.mark.slow`; for a
  parametrized test mark the heavy cases, `pytest.param(case, marks=pytest.mark.slow)`, and leave one cheap
  case per feature unmarked, so the quick set still runs the feature once;
- everything else stays unmarked and runs in the quick set. Check the quick set's time with
  `pytest -q --durations=20` before adding to it: its budget is about 3 minutes on 2 CPUs.
- a test of a path that exists only with apache-tvm-ffi (the TVM-FFI entry itself, the profile buffer, the GPU probes'
  compiles) carries `@pytest.mark.needs_tvm_ffi("why")`: skipped, with that reason, where apache-tvm-ffi is missing.
  Every other test passes there too: `PYTHONPATH=tests/no_tvm_ffi pytest -q` runs the quick set as on such a machine
  (tests/no_tvm_ffi/sitecustomize.py hides the installed package from every process the run starts).
- .ci/run runs the slow tests with pytest-xdist, one worker process per CPU (`pytest -q -m slow -n 2`): a test must
  not rely on another having run in its process (session fixtures run once per worker), files shared between
  processes (compile caches) appear whole, by rename; and one test per config (parametrize) rather than one test
  looping over every config, so the workers share the work.
"""
import importlib.util
import os
import shlex
import sys
from collections import Counter, defaultdict
from pathlib import Path

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
os.environ.setdefault("CUTE_DSL_ARCH", "sm_100a")
# A pytest-xdist worker (.ci/run starts one per CPU) computes with one thread, it and the processes its tests start.
# torch's default (a thread per CPU) gains the emulator nothing: measured on 2 CPUs, one several-tiles case took
# 11.7 s wall either way, burning 17.5 s of CPU with 2 threads and 11.7 s with 1, and two workers spinning two threads
# each ran no faster than one process. Set before anything imports torch (its OpenMP runtime reads it at load).
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")

LEFT_OUT = pytest.StashKey[list]()


def pytest_addoption(parser):
    parser.addoption("--full", action="store_true",
                     help="also run the tests marked slow (the full suite, as .ci/run does); without it and without "
                          "-m they are deselected")


def _named_on_command_line(config) -> list[tuple[Path, str]]:
    """(file, test path inside it) for each command-line argument that names tests by node id (file::name...)."""
    named = []
    for arg in config.args:
        if "::" in arg:
            file, rest = arg.split("::", 1)
            named.append(((config.invocation_params.dir / file).resolve(), rest))
    return named


def _is_named(item, named) -> bool:
    inside = item.nodeid.split("::", 1)[1] if "::" in item.nodeid else ""
    return any(item.path == file and (inside == rest or inside.startswith((rest + "[", rest + "::")))
               for file, rest in named)


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected theirs: only what would have run is counted
def pytest_collection_modifyitems(config, items):
    if config.getoption("full") or config.option.markexpr:
        return
    named = _named_on_command_line(config)
    slow = [item for item in items if item.get_closest_marker("slow") and not _is_named(item, named)]
    if slow:
        left_out = set(slow)
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if item not in left_out]
    config.stash[LEFT_OUT] = [(item.nodeid, getattr(item, "originalname", item.name)) for item in slow]
    if hasattr(config, "workeroutput"):  # a pytest-xdist worker: its controller prints the summary
        config.workeroutput["left_out"] = config.stash[LEFT_OUT]


def pytest_runtest_setup(item):
    """A needs_tvm_ffi test is skipped where apache-tvm-ffi is not found: the same test the CuTe DSL makes before it
    refuses a TVM-FFI compile (CONFIG_MISSING_TVM_FFI)."""
    marker = item.get_closest_marker("needs_tvm_ffi")
    if marker is not None and importlib.util.find_spec("tvm_ffi") is None:
        pytest.skip(f"apache-tvm-ffi is not installed: {marker.args[0]}")


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """pytest-xdist's controller collects nothing itself: it takes the list from a worker (each collects the same)."""
    if "left_out" in getattr(node, "workeroutput", {}):
        node.config.stash[LEFT_OUT] = node.workeroutput["left_out"]


def _python(invocation_dir: Path) -> str:
    exe = Path(sys.executable)
    try:
        return str(exe.relative_to(invocation_dir))
    except ValueError:
        return str(exe)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    slow = config.stash.get(LEFT_OUT, [])
    if not slow:
        return
    groups = defaultdict(Counter)
    for nodeid, function in slow:
        groups[nodeid.split("::", 1)[0]][function] += 1
    tr = terminalreporter
    tr.write_sep("=", f"quick set: {len(slow)} slow test{'s' * (len(slow) > 1)} in {len(groups)} "
                      f"group{'s' * (len(groups) > 1)} left out")
    for module, functions in sorted(groups.items()):
        detail = ", ".join(f"{name} {count}" if count > 1 else name for name, count in functions.items())
        tr.write_line(f"{module} ({sum(functions.values())}): {detail}")
    python = _python(config.invocation_params.dir)
    args = " ".join(shlex.quote(a) for a in config.invocation_params.args)
    base = f"{python} -m pytest" + (f" {args}" if args else "")
    tr.write_line(f"run them too (the full suite, as CI does): {base} --full")
    tr.write_line(f"only these: {python} -m pytest -q -m slow [one group's file]")
