"""Tests of the scripts (test_correctness.py, test_benchmark.py) and the package plumbing, on the CPU."""
from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import statistics
import subprocess
import time
import sys
import tomllib
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import reference  # noqa: E402
import submission  # noqa: E402
import test_benchmark  # noqa: E402
import test_correctness  # noqa: E402
from harness import dsl as dsl_release  # noqa: E402
from utils import load_task  # noqa: E402

README_CORRECTNESS = "bash tools/setup.sh && .venv/bin/python test_correctness.py"
README_TESTS = "bash tools/setup.sh && .venv/bin/python -m pytest -q"
HARNESS_FILES = ("test_correctness.py", "test_benchmark.py", "reference.py", "utils.py", "problem_files.py", "task.py",
                 "task.yml")


def run_script(args, cwd=REPO, timeout=600):
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def copy_harness(tmp_path, preflight_source=None):
    for name in HARNESS_FILES:
        shutil.copy(REPO / name, tmp_path / name)
    if preflight_source is not None:
        (tmp_path / "tools").mkdir()
        (tmp_path / "tools" / "preflight.py").write_text(preflight_source)
    return tmp_path


# --------------------------------------------------------------------------------------------------
# test_correctness.py, no GPU
# --------------------------------------------------------------------------------------------------
EMULATED_LINE = r"^PASS  emulated MATCH(?: with \d+ notes?)?: (\S+)"  # "MATCH" or "MATCH with N notes" (emu.state.Note)


@pytest.mark.slow
@pytest.mark.skipif(not (REPO / "tools" / "preflight.py").exists(),
                    reason="tools/preflight.py is absent (the tools worker's sm_100a cross-compile check)")
def test_correctness_no_gpu_path_passes():
    """The README's correctness command, end to end, where no GPU is: preflight, the reference's self-check and the
    emulator on the configs the shapes use and their fallbacks (--configs all emulates the same way per config: the
    tests below). One schedule per strict run (`--schedules 1`, CI's time): the gate
    (tests/harness/test_verdict.py) gives each of these configs the six-schedule verdict on the same small shape."""
    proc = run_script(["test_correctness.py", "--schedules", "1"])
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert proc.stdout.splitlines()[0].startswith("the kernel cannot run here: no CUDA GPU is visible"), proc.stdout
    assert "PASS  preflight" in out
    assert out.count("PASS  reference dequant vs float64") == 8
    used = test_correctness.configs_used_by(load_task(REPO / "task.yml"))
    emulated = re.findall(EMULATED_LINE, proc.stdout, re.M)
    assert sorted(emulated) == sorted(2 * [c.name for c in used])
    assert "FAIL" not in out
    # strict data under --schedules 1 here, the leaderboard's under one (test_correctness.LEADERBOARD_SCHEDULES)
    assert out.count("1/1 schedules") == 2 * len(used), out
    assert proc.stdout.rstrip().splitlines()[-1].startswith(f"summary: {9 + len(emulated)} passed, 0 failed")


def test_correctness_checks_another_file_in_the_emulator(tmp_path):
    """--submission FILE off a B200: the reference's self-check, then the file through harness.runner on each test case
    with both generators (one small case here), two clusters of each launch, the three B200-timing schedules before
    the seeded ones (six on strict data, one on the leaderboard's; --no-b200 the seeded ones alone), lines labelled
    emulated; a copy with a planted bug fails with exit 1."""
    task = tmp_path / "task.yml"
    task.write_text("tests:\n  - {m: 256, n: 256, k: 256, l: 1, seed: 1111}\n"
                    "benchmarks:\n  - {m: 256, n: 256, k: 256, l: 1, seed: 1111, sol_us: 1.0}\n")  # (on a B200 only)
    good = REPO / "tests" / "harness" / "submissions" / "dsl_epilogue.py"
    proc = run_script(["test_correctness.py", "--submission", str(good), "--task", str(task)])
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert out.count("PASS  emulated MATCH: dsl_epilogue.py 256x256x256x1") == 2 and "2/512 clusters" in out
    assert "9 schedules" in out and "4 schedules" in out and "FAIL" not in out
    assert "track record: of the" in out and "called MATCH" in out  # docs/public_outcomes.json's MATCH rows
    proc = run_script(["test_correctness.py", "--submission", str(good), "--task", str(task), "--no-b200"])
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "6 schedules" in out and "1 schedule," in out, out[-3000:]
    bad = tmp_path / "dsl_epilogue.py"
    bad.write_text(good.read_text().replace("* y).to(cutlass.Float16)", "+ y).to(cutlass.Float16)"))
    proc = run_script(["test_correctness.py", "--submission", str(bad), "--task", str(task)])
    assert proc.returncode == 1 and "FAIL  emulated MISMATCH" in proc.stdout, proc.stdout[-3000:]


def test_emulate_names_an_author_files_verdict_with_its_track_record():
    """tools/emulate.py --submission FILE: the B200-timing schedules, then the seeded ones; the verdict line, then how
    that verdict class has fared against the public files' published B200 outcomes (calibration.outcomes)."""
    good = REPO / "tests" / "harness" / "submissions" / "dsl_epilogue.py"
    proc = run_script(["tools/emulate.py", "--submission", str(good), "--shape", "256,256,256", "--clusters", "2",
                       "--schedules", "1"])
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert "emulated MATCH" in proc.stdout and "4 schedules" in proc.stdout, proc.stdout
    assert "track record: of the" in proc.stdout and "called MATCH" in proc.stdout, proc.stdout


def test_correctness_configs_all_emulates_every_tune_space_config(monkeypatch, capsys):
    """--configs all hands every TUNE_SPACE config to the emulated checks (which run per config: the test below), under
    the default verdict unless --schedules says how many."""
    handed, asked, workers = [], [], []
    monkeypatch.setattr(test_correctness, "sm100_status", lambda: (False, "no CUDA GPU is visible (stand-in)"))
    monkeypatch.setattr(test_correctness, "run_preflight", lambda: (True, "stand-in"))
    monkeypatch.setattr(test_correctness, "reference_self_check", lambda: (8, 0))

    def checks(configs, schedules=None, jobs=None):
        handed.extend(configs)
        asked.append(schedules)
        workers.append(jobs)
        return 2 * len(configs), 0

    monkeypatch.setattr(test_correctness, "run_emulator_checks", checks)
    assert test_correctness.main(["--configs", "all"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert handed == list(submission.TUNE_SPACE)
    assert out[1].startswith("--configs all: every TUNE_SPACE config runs in the SM100 emulator"), out
    assert out[-1].startswith(f"summary: {9 + 2 * len(handed)} passed, 0 failed")
    assert test_correctness.main(["--schedules", "2", "--jobs", "1"]) == 0
    assert asked == [None, 2] and workers == [os.cpu_count(), 1]


# What `test_correctness.py --configs all` runs for each config (test_correctness.run_emulator_checks: two clusters'
# worth of tiles, so the CTAs wrap their rings and accumulator stages), one test per config so that pytest-xdist
# spreads them over the CPUs (CI, .ci/run). The strict generator gets the default verdict (six schedules); the
# leaderboard's generator one schedule: its point is the leaderboard's data within tolerance, and the kernel's C does
# not depend on the schedule, while a race shows at least as well on strict data (all FP4 codes, scales >= 1).
# One config per protocol family (1-CTA and 2-CTA tiles, the A collector, the product pair's exchange) that
# test_correctness_no_gpu_path_passes does not already run (it emulates the configs CONFIG_TABLE uses, the K split's
# reduce-scatter among them): every TUNE_SPACE config already gets the six-schedule verdict on a wrapping shape in
# tests/harness/test_verdict.py (the gate), the K splits also over several tiles (tests/harness/test_knobs.py), and
# the quick test above checks that --configs all hands over every config.
PROTOCOLS = ("m256n64_c2x1_e32_ac", "m256n128_c2x1_e32", "m128n128_c1x1_e32_ppc")
EMULATED_BY_THE_SCRIPT = {c.name for c in test_correctness.configs_used_by(load_task(REPO / "task.yml"))}


@pytest.mark.slow
@pytest.mark.parametrize("config", [c for c in submission.TUNE_SPACE
                                    if c.name in PROTOCOLS and c.name not in EMULATED_BY_THE_SCRIPT],
                         ids=lambda c: c.name)
def test_correctness_emulated_checks_pass_for_each_protocol(config, capsys):
    strict = test_correctness.run_emulator_checks([config], modes=("strict",))
    leaderboard = test_correctness.run_emulator_checks([config], modes=("leaderboard",))
    out = capsys.readouterr().out
    assert (strict, leaderboard) == ((1, 0), (1, 0)), out
    assert re.findall(EMULATED_LINE, out, re.M) == [config.name, config.name], out
    assert "6/6 schedules" in out and "1/1 schedules" in out, out


@pytest.mark.slow  # the quick set keeps the harness's other failure modes (no preflight, a wrong reference)
def test_correctness_fails_when_preflight_fails(tmp_path):
    cwd = copy_harness(tmp_path, "import sys\nprint('stub preflight: FAILED')\nsys.exit(3)\n")
    proc = run_script(["test_correctness.py"], cwd=cwd)
    assert proc.returncode == 1
    assert "stub preflight: FAILED" in proc.stdout and "FAIL  preflight" in proc.stdout and "exit code 3" in proc.stdout


def test_correctness_fails_when_reference_is_wrong(tmp_path):
    cwd = copy_harness(tmp_path, "import sys\nsys.exit(0)\n")
    ref = cwd / "reference.py"
    text = ref.read_text()
    table = "0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,"
    assert text.count(table) == 1
    ref.write_text(text.replace(table, "0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 5.0,"))  # +6.0 decoded as 5.0
    proc = run_script(["test_correctness.py"], cwd=cwd)
    assert proc.returncode == 1
    assert "PASS  preflight" in proc.stdout
    # only strict data contains the code for 6.0; the leaderboard's data cannot see this bug
    assert proc.stdout.count("FAIL  reference dequant vs float64  strict") == 4
    assert proc.stdout.count("PASS  reference dequant vs float64  leaderboard") == 4


# --------------------------------------------------------------------------------------------------
# test_correctness.py's kernel path, driven on the CPU with stand-in kernels on small shapes
# --------------------------------------------------------------------------------------------------
SMALL_TASK = {
    "tests": [{"m": 128, "n": 128, "k": 256, "l": 1, "seed": 1}, {"m": 256, "n": 128, "k": 512, "l": 2, "seed": 2}],
    "benchmarks": [{"m": 128, "n": 256, "k": 256, "l": 1, "seed": 3, "sol_us": 1.0}],
}


def _writes_reference(data):
    return data[9].copy_(reference.ref_kernel_dequant(data))


def _high_codes_wrong(data):  # decodes FP4 codes 4..7 / 12..15 (|v| >= 2) wrongly in A
    bad_a = (data[0].view(torch.uint8) & 0xBB).view(torch.float4_e2m1fn_x2)
    return data[9].copy_(reference.ref_kernel_dequant((bad_a, *data[1:])))


def _misses_last_row(data):
    out = reference.ref_kernel_dequant(data)
    data[9][:-1].copy_(out[:-1])
    return data[9]


def _raises(data):
    raise RuntimeError("launch failed")


def _run_kernel_path(kernel, capsys):
    passed, failed = test_correctness.run_gpu_checks(SMALL_TASK, kernel=kernel)
    out = capsys.readouterr().out.splitlines()
    lines = [line for line in out if line.startswith(("PASS", "FAIL"))]
    assert len(lines) == passed + failed == 5  # 2 tests x 2 generators + 1 benchmark shape
    assert len(out) == 2 * len(lines), "each case announces itself before it runs (the hang watchdog's marker)"
    return passed, failed, lines


def test_kernel_path_passes_a_correct_kernel(capsys):
    passed, failed, lines = _run_kernel_path(_writes_reference, capsys)
    assert (passed, failed) == (5, 0) and all(line.startswith("PASS") for line in lines)
    assert any("bench 0 50 sets" in line for line in lines)


def test_kernel_path_catches_unwritten_output(capsys):
    passed, failed, lines = _run_kernel_path(_misses_last_row, capsys)
    assert (passed, failed) == (0, 5)
    passed, failed, lines = _run_kernel_path(lambda data: data[9], capsys)  # writes nothing: c stays NaN
    assert (passed, failed) == (0, 5) and "nan" in lines[0]


def test_kernel_path_strict_generator_catches_what_the_leaderboards_misses(capsys):
    passed, failed, lines = _run_kernel_path(_high_codes_wrong, capsys)
    assert (passed, failed) == (3, 2)
    assert all(line.startswith("FAIL") for line in lines if " strict " in line)
    assert all(line.startswith("PASS") for line in lines if " leaderboard " in line or "bench" in line)


def test_kernel_path_ends_a_hung_case_and_names_it():
    """A deadlocked kernel never returns: the watchdog ends the run and the last line names the case."""
    code = (
        "import time, test_correctness as t\n"
        "t.CASE_TIMEOUT_S = 2\n"
        f"t.run_gpu_checks({SMALL_TASK!r}, kernel=lambda data: time.sleep(120))\n"
    )
    start = time.monotonic()
    proc = run_script(["-c", code], timeout=90)
    assert time.monotonic() - start < 60
    assert proc.returncode != 0
    assert proc.stdout.strip().splitlines()[-1].startswith("....  test 0")
    assert "Timeout" in proc.stderr


def test_kernel_path_reports_exceptions(capsys):
    passed, failed, lines = _run_kernel_path(_raises, capsys)
    assert (passed, failed) == (0, 5) and "RuntimeError: launch failed" in lines[0]


# --------------------------------------------------------------------------------------------------
# test_benchmark.py
# --------------------------------------------------------------------------------------------------
def test_benchmark_no_gpu_message():
    proc = run_script(["test_benchmark.py"])
    assert proc.returncode == 2
    assert "no CUDA GPU here" in proc.stderr and "--callable reference" in proc.stderr
    proc = run_script(["test_benchmark.py", "--callable", "reference"])
    assert proc.returncode == 2 and "no CUDA GPU here" in proc.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU error; a CUDA GPU is visible")
def test_benchmark_callable_needs_cuda():
    with pytest.raises(RuntimeError, match="CUDA"):
        test_benchmark.benchmark_callable(lambda d: d[9], 256, 4096, 7168, 1, 1111)


def test_benchmark_stats_match_the_leaderboards_formula():
    samples = [10.0, 12.0, 11.0, 15.0, 9.5]
    stats = test_benchmark.calculate_stats(samples)
    assert stats.runs == 5 and stats.mean == pytest.approx(statistics.mean(samples))
    assert stats.std == pytest.approx(statistics.stdev(samples))  # n - 1 in the denominator
    assert stats.err == pytest.approx(statistics.stdev(samples) / 5 ** 0.5)
    assert (stats.best, stats.worst) == (9.5, 15.0)


def test_benchmark_resolve_callable():
    assert test_benchmark.resolve_callable("reference") == (reference.ref_kernel, "reference:ref_kernel")
    assert test_benchmark.resolve_callable("reference:check_implementation")[0] is reference.check_implementation
    with pytest.raises(ValueError, match="module:function"):
        test_benchmark.resolve_callable("nonsense")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (none visible)")
def test_benchmark_times_the_reference_on_a_gpu():
    stats = test_benchmark.benchmark_callable(test_benchmark.reference.ref_kernel, 256, 3072, 4096, 1, 1111,
                                              max_repeats=3)
    assert stats["runs"] == 3 and 0 < stats["best_us"] <= stats["mean_us"] <= stats["worst_us"]


# --------------------------------------------------------------------------------------------------
# Plumbing: pyproject, README, setup.sh, .ci/run, .gitignore
# --------------------------------------------------------------------------------------------------
def test_pyproject():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    deps = project["project"]["dependencies"]
    names = {d.split(";")[0].split("[")[0].split("<")[0].split(">")[0].split("=")[0].strip() for d in deps}
    assert {"torch", "nvidia-cutlass-dsl", "pyyaml", "apache-tvm-ffi"} <= names
    assert any(d.startswith("pytest") for d in project["project"]["optional-dependencies"]["test"])
    assert "pytest-xdist" in project["project"]["optional-dependencies"]["test"]  # .ci/run's slow set: one worker per CPU
    dsl = next(d for d in deps if d.startswith("nvidia-cutlass-dsl"))
    specifiers = pytest.importorskip("packaging.specifiers")
    spec = specifiers.SpecifierSet(dsl[len("nvidia-cutlass-dsl"):])
    from harness import dsl as dsl_release

    assert all(v in spec for v in dsl_release.MATRIX) and "4.2.1" not in spec and "5.0.0" not in spec
    assert project["tool"]["pytest"]["ini_options"]["testpaths"] == ["tests"]


def test_readme_has_the_two_commands():
    readme = (REPO / "README.md").read_text()
    assert README_CORRECTNESS in readme and README_TESTS in readme
    assert "submission.py" in readme and "MEMORY.md" in readme and "skills/" in readme


def test_shell_scripts_parse_and_ci_runs_the_readme_command():
    for script in ("tools/setup.sh", ".ci/run"):
        assert subprocess.run(["bash", "-n", str(REPO / script)]).returncode == 0, script
    ci = (REPO / ".ci" / "run").read_text()
    assert "set -euo pipefail" in ci and README_TESTS in ci and "tools/preflight.py" in ci
    assert '-m pytest -q -m slow -n "${workers}"' in ci  # the slow set spread over the CPUs: CI's 30-minute budget
    setup = (REPO / "tools" / "setup.sh").read_text()
    assert "--system-site-packages" in setup and "torch==2.13.0" in setup and "-m harness.dsl install" in setup
    from harness import dsl as dsl_release

    # the releases it installs beside the venv's own: the oldest a runner may have and the leaderboard's era
    assert f"releases=({' '.join(dsl_release.DEFAULT)})" in setup and dsl_release.DEFAULT == ("4.3.0", "4.3.5")


def test_setup_lets_the_user_choose_the_torch_build_and_reruns_on_one_import_check():
    setup = (REPO / "tools" / "setup.sh").read_text()
    assert 'TORCH_SPEC="${TORCH_SPEC:-torch==2.13.0}"' in setup and "TORCH_PIP_ARGS" in setup
    fast_path = setup[setup.index("# Fast path"):setup.index('step="create .venv')]
    assert fast_path.count("${VPY}\" -c") == 1 and "exit 0" in fast_path, fast_path
    readme = (REPO / "README.md").read_text()
    assert "TORCH_PIP_ARGS" in readme and "about a second" not in readme


def test_ci_keeps_one_preflight_report_per_dsl_version():
    ci = (REPO / ".ci" / "run").read_text()
    assert '--json "build/preflight-${newest}.json"' in ci and '--json "build/preflight-${oldest}.json"' in ci
    # the oldest release a runner may have compiles every config the first call may run (tools/dsl_matrix.py: all)
    assert 'tools/preflight.py --dsl "${oldest}" --quick' in ci
    assert f"oldest={dsl_release.OLDEST}" in ci


def _repo_text_files():
    skip = {".git", ".venv", "build", "__pycache__", ".pytest_cache"}
    for path in REPO.rglob("*"):
        if path.is_file() and not skip & set(path.relative_to(REPO).parts) and not path.name.endswith(".egg-info") \
                and ".egg-info" not in str(path) and path.suffix not in {".pyc", ".so", ".o", ".cubin", ".whl"}:
            try:
                yield path, path.read_text()
            except UnicodeDecodeError:
                continue


def test_nothing_in_the_repo_refers_to_files_outside_it():
    """Facts live in docs/leaderboard.md (with their public sources) and MEMORY.md, not in a private notebook."""
    outside = ("FACTS" + ".md", "FACTS" + " §", "../" + "shared", "/work/" + "shared")
    hits = [f"{path.relative_to(REPO)}: {word}" for path, text in _repo_text_files() for word in outside if word in text]
    assert not hits, hits
    assert (REPO / "docs" / "leaderboard.md").is_file()


def test_gitignore_covers_generated_files():
    ignored = (REPO / ".gitignore").read_text().split()
    for entry in (".venv/", "__pycache__/", "build/"):
        assert entry in ignored


def test_tune_space_check_covers_every_config_on_the_shapes_it_can_implement():
    import submission

    per_config = test_correctness.tasks_per_config(load_task(REPO / "task.yml"), submission.TUNE_SPACE)
    assert [config for config, _ in per_config] == list(submission.TUNE_SPACE)
    for config, sub_task in per_config:
        assert sub_task["tests"], f"{config.name} would be checked on no test shape"
        for case in sub_task["tests"]:
            assert submission.DualGemmKernel.can_implement(config, case["m"], case["n"], case["k"], case["l"])[0]


def test_config_kernel_forces_the_config_and_writes_c(monkeypatch):
    import submission

    launched = []
    monkeypatch.setattr(submission, "check_inputs", lambda data: (128, 128, 256, 1))
    monkeypatch.setattr(submission, "compile_config", lambda cfg: lambda *ts: launched.append((cfg, ts)))
    config = submission.TUNE_SPACE[-1]
    data = reference.generate_input(128, 128, 256, 1, seed=5, device="cpu")
    assert test_correctness.config_kernel(config)(data) is data[9]
    assert launched[0][0] == config and launched[0][1][3] is data[6] and launched[0][1][6] is data[9]


# ------------------------------------------------------------------ test_correctness.py without apache-tvm-ffi
# A machine without apache-tvm-ffi (the Modal runner; a user with the core packages only): tests/no_tvm_ffi on
# PYTHONPATH hides the installed package from the process and every process it starts (its sitecustomize.py).
NO_TVM_FFI = REPO / "tests" / "no_tvm_ffi"


def without_tvm_ffi(home: Path) -> dict:
    """The environment of a process that runs as on a machine without apache-tvm-ffi (the compile cache shared)."""
    return {"PYTHONPATH": f"{NO_TVM_FFI}:{REPO}", "PATH": "/usr/bin:/bin", "CUTE_DSL_ARCH": "sm_100a",
            "HOME": str(home), **{k: v for k, v in os.environ.items() if k == "EMU_LAUNCH_CACHE"}}


def test_correctness_script_takes_the_pointer_launcher_without_tvm_ffi(tmp_path):
    """Where apache-tvm-ffi is missing, neither import nor the DSL's find_spec sees it (the DSL's own test before it
    refuses a TVM-FFI compile) nor its distribution's metadata, while every other package's is found (the DSL's
    version keys the compile cache); test_correctness.py's emulated checks capture the pointer fallback custom_kernel
    takes there."""
    code = ("import importlib.metadata as m, importlib.util, submission as s; "
            "from harness.capture import default_host_path; from harness.dsl import installed_version; "
            "print(importlib.util.find_spec('tvm_ffi'), s.USE_TVM_FFI, default_host_path(), installed_version(), "
            "[d.metadata['Name'] for d in m.distributions()].count('apache-tvm-ffi'))")
    p = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                       env=without_tvm_ffi(tmp_path))
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.split() == ["None", "False", "pointer", importlib.metadata.version("nvidia-cutlass-dsl"), "0"]


def test_the_emulator_cli_falls_back_to_the_pointer_launcher_without_tvm_ffi(tmp_path):
    """With only the core packages (no apache-tvm-ffi), tools/emulate.py with no --host-path compiles, captures and
    emulates the launcher custom_kernel takes there (the pointer fallback) instead of failing on the DSL's
    CONFIG_MISSING_TVM_FFI: one config, one schedule, a small shape."""
    p = subprocess.run([sys.executable, "tools/emulate.py", "--shape", "128,128,256", "--config", "m128n64_c1x1_e32",
                        "--schedules", "1"], cwd=REPO, capture_output=True, text=True, env=without_tvm_ffi(tmp_path),
                       timeout=600)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    assert "pointer fallback" in p.stdout and "emulated MATCH" in p.stdout
