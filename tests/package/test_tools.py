"""CPU tests for tools/: the speed of light (tools/sol.py), preflight's parsing and lint, tune.py's --write, its
--dry-run (compile, then rank by the timed emulator) and its B200-path orchestration (run here with a stand-in
submission on the CPU).

Compile-heavy tests share session fixtures that run preflight once on a small stand-in kernel (one block-scaled NVFP4
GEMM tile per CTA, written below) under whichever nvidia-cutlass-dsl this interpreter has. The stand-in has one clean
config (m128n128), one that spills (m128n256) and one that does not compile (m128n64), so every verdict is exercised
on real artifacts. The dry run's timed ranking runs on a copy of the real submission (the emulator runs only kernels
with the contract's host side) at a small benchmark shape.
"""
import ast
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
from tools import preflight, sol, tune  # noqa: E402

TASK_YML = """tests:
  - {"m": 256, "n": 512, "k": 256, "l": 1, "seed": 1111}
  - {"m": 1536, "n": 512, "k": 7168, "l": 1, "seed": 1111}
benchmarks:
  - {"m": 256, "n": 4096, "k": 7168, "l": 1, "seed": 1111}
"""
needs_dsl = pytest.mark.skipif(not preflight.dsl_version()[0].isdigit(), reason="nvidia-cutlass-dsl not installed")


def run(*args, cwd=REPO, timeout=600):
    return subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=timeout)


# ============================================================================ speed of light (tools/sol.py)
def test_sol_reproduces_the_leaderboards_table_from_first_principles():
    table = sol.sol_table(REPO / "task.yml")  # the leaderboard's own figures (1.5 GHz), docs/leaderboard.md §2
    assert list(table) == sol.benchmark_shapes(REPO / "task.yml") and len(table) == 4
    for shape, us in table.items():
        assert sol.sol_us(*shape) == pytest.approx(us, rel=1e-3), shape
    assert sol.geomean(table.values()) == pytest.approx(sol.SOL_GEOMEAN_US, abs=5e-4)
    # docs/leaderboard.md §2: bytes moved, and which side binds (the 256-row rows DRAM, the 512-row rows FP4 math)
    assert sol.unique_bytes(256, 4096, 7168) == pytest.approx(36.2e6, rel=2e-3)
    assert sol.unique_bytes(256, 3072, 4096) == pytest.approx(16.3e6, rel=2e-3)
    for (m, n, k, l) in table:
        math_us = 2 * m * n * k * l / sol.FP4_MACS_PER_S * 1e6
        dram_us = sol.unique_bytes(m, n, k, l) / sol.DRAM_BW_SOL * 1e6
        assert (dram_us > math_us) == (m == 256), (m, n, k)
    # a single GEMM (nvfp4_gemm's SOL table: 128x7168x16384 -> 8.994 us) moves one B and does half the math
    assert sol.sol_us(128, 7168, 16384, 1, n_products=1) == pytest.approx(8.994, rel=2e-3)


def test_public_best_is_the_measured_entry_per_benchmark_shape():
    assert set(sol.PUBLIC_BEST_US) == set(sol.benchmark_shapes(REPO / "task.yml"))
    assert sol.geomean(sol.PUBLIC_BEST_US.values()) == pytest.approx(sol.PUBLIC_BEST_GEOMEAN_US, abs=5e-3)
    assert all(best > sol.sol_us(*shape) for shape, best in sol.PUBLIC_BEST_US.items())
    assert "13.30" in (REPO / "docs" / "leaderboard.md").read_text()  # its source: docs/leaderboard.md §7


# ============================================================================ preflight parsing (synthetic)
PTX = """
.version 8.8
.target sm_100a
.shared .align 8 .b8 sbuf[256];
.visible .entry k_main(
  .param .u64 p0
)
.reqntid 192, 1, 1
{
  // tcgen05.mma.cta_group::1.kind::f16 in a comment is not an instruction
  .extern .shared .align 1024 .b8 __dynamic_shmem__0[];
  @%p1 tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.scale_vec::4X [%r1], %rd1, %rd2, %r2, [%r3], [%r4], %p2;
  tcgen05.mma.cta_group::2.kind::mxf4nvf4.block_scale.block16.collector::a::discard [%r1], %rd1, %rd2, %r2, [%r3], [%r4], %p2;
  tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.scale_vec::1X [%r1], %rd1, %rd2, %r2, [%r3], [%r4], %p2;
  tcgen05.cp.cta_group::1.32x128b.warpx4 [%r15], %rd6;
  tcgen05.ld.sync.aligned.32x32b.x32.b32 {%r1}, [%r2];
  cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r1], [%rd1, {%r2, %r3}], [%r4];
  cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%rd1, {%r2, %r3}], [%r4];
  cp.async.bulk.prefetch.tensor.2d.L2.global [%rd1, {%r2, %r3}];
  cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], [%rd1], 512, [%r4];
  cp.async.bulk.commit_group;
  mbarrier.init.shared.b64 [%r1], %r2; mbarrier.init.shared.b64 [%r3], %r2;
}
.visible .entry k_helper(
)
.maxntid 64, 2, 1
{
  ret;
}
"""


def test_parse_ptx_counts_and_threads():
    e = preflight.parse_ptx(PTX)
    m, h = e["k_main"], e["k_helper"]
    assert m["threads"] == {"value": 192, "from": "reqntid"} and h["threads"] == {"value": 128, "from": "maxntid"}
    assert (m["tcgen05_mma"], m["mma_blockscaled16"], m["mma_2cta"]) == (3, 2, 1)
    assert (m["tcgen05_cp"], m["tcgen05_ld"], m["tma_load"], m["tma_store"], m["bulk_copy"]) == (1, 1, 1, 1, 1)
    assert m["mbarrier_init"] == 2 and m["static_smem"] == 256 and h["tcgen05_mma"] == 0


PTXAS = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'k_main' for 'sm_100a'
ptxas info    : Function properties for k_main
    184 bytes stack frame, 312 bytes spill stores, 184 bytes spill loads
ptxas info    : Used 255 registers, used 2 barriers, 184 bytes cumulative stack size
ptxas info    : Compiling entry function 'k_helper' for 'sm_100a'
ptxas info    : Function properties for k_helper
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers
"""
RESOURCE = """
Resource usage:
 Common:
  GLOBAL:0
 Function k_main:
  REG:168 STACK:0 SHARED:1024 LOCAL:0 CONSTANT[0]:2096 TEXTURE:0 SURFACE:0 SAMPLER:0
"""
SASS = """\t\tFunction : k_main
        /*0000*/                   LDC R1, c[0x0][0x37c] ;
        /*0010*/              @!UP0 UTCOMMA gdesc[UR4], gdesc[UR6], tmem[UR8], tmem[UR10], idesc[UR11], UPT ;
        /*0020*/                   UTCCP.T.S.4x32dp128bit tmem[UR4], gdesc[UR6] ;
        /*0030*/                   LDTM.x32 R4, tmem[UR4] ;
        /*0040*/                   STL [R1+0x4], R2 ;
"""


def test_parse_tool_outputs():
    p = preflight.parse_ptxas(PTXAS)
    assert p["k_main"] == {"stack": 184, "spill_stores": 312, "spill_loads": 184, "registers": 255, "barriers": 2}
    assert p["k_helper"]["registers"] == 8 and p["k_helper"]["spill_stores"] == 0 and p["k_helper"]["barriers"] == 0
    assert preflight.parse_resource_usage(RESOURCE) == {"k_main": {"reg": 168, "stack": 0, "shared": 1024, "local": 0}}
    s = preflight.parse_sass(SASS)["k_main"]
    assert (s["UTCOMMA"], s["UTCCP"], s["LDTM"], s["STL"], s["LDL"]) == (1, 1, 1, 1, 0)


# Two k-loops as ptxas lays them out: the TMA loop (0x0100-0x0160) and the MMA loop (0x0200-0x0280), a wait-retry
# stub at the end that branches back into the MMA loop (a larger backward range: not the innermost), an R2UR before
# the loops (not counted) and one in the out-of-line stub (outside the innermost range: not counted).
LOOPS_SASS = """\t\tFunction : k_main
        /*0000*/                   R2UR UR4, R2 ;
        /*0100*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4], R3 ;
        /*0110*/              @!P0 BRA 0x0300 ;
        /*0120*/                   R2UR UR8, R10 ;
        /*0130*/                   UTMALDG.3D.2CTA [UR48], [UR60], desc[URZ] ;
        /*0140*/                   S2UR UR9, SR_CTAID.Z ;
        /*0150*/                   UTMALDG.4D.MULTICAST.2CTA [UR16], [UR46], UR23, desc[URZ] ;
        /*0160*/                   BRA.U UP0, 0x0100 ;
        /*0200*/                   UTCCP.T.S.2CTA.4x32dp128bit tmem[UR21+0x100], gdesc[UR4] ;
        /*0210*/                   UTCOMMA.2CTA.4X gdesc[UR8].A_KEEP, gdesc[UR10], tmem[UR29], tmem[UR74], idesc[UR75], tmem[UR34], UP3 ;
        /*0220*/              @!P1 BRA 0x0310 ;
        /*0280*/                   BRA.U UP1, 0x0200 ;
        /*0300*/                   BRA 0x0100 ;
        /*0310*/                   R2UR UR5, R9 ;
        /*0320*/                   BRA 0x0210 ;
"""


def test_sass_mainloops_count_uniform_moves_in_the_innermost_k_loops():
    loops = preflight.sass_mainloops(LOOPS_SASS)["k_main"]
    assert loops == {"tma": {"span": [0x100, 0x160], "R2UR": 1, "S2UR": 1},
                     "mma": {"span": [0x200, 0x280], "R2UR": 0, "S2UR": 0}}
    assert preflight.parse_sass(LOOPS_SASS)["k_main"]["mainloops"] == loops
    assert preflight.sass_mainloops(SASS) == {}  # straight-line code has no k-loop


def _rec(ptx=PTX, ptxas=PTXAS, resource=RESOURCE, plan=None):
    return {"status": "compiled", "plan": plan or {"smem_bytes": 200000, "threads_per_cta": 192, "tmem_cols": 512},
            "artifacts": {"entries": preflight.parse_ptx(ptx), "ptxas": preflight.parse_ptxas(ptxas),
                          "resource": preflight.parse_resource_usage(resource), "sass": {}}}


def test_judge_verdicts():
    clean = PTXAS.replace("312 bytes spill stores, 184 bytes spill loads", "0 bytes spill stores, 0 bytes spill loads")
    ok_ptx = PTX.replace("tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.scale_vec::1X", "tcgen05.cp.cta_group::1.32x128b.warpx4")
    rec = _rec(ok_ptx, clean)
    assert preflight.judge(rec, 232448) == []
    assert rec["summary"]["smem_total"] == 200000 + 1024 and rec["summary"]["threads"] == 192
    assert any("spills: 496" in p for p in preflight.judge(_rec(ok_ptx), 232448))
    assert any("not block-scaled" in p for p in preflight.judge(_rec(PTX, clean), 232448))
    assert any("no block-scaled" in p for p in preflight.judge(_rec(ok_ptx.replace("tcgen05.mma", "tcgen05.xx"), clean), 232448))
    assert any("shared memory" in p for p in preflight.judge(_rec(ok_ptx, clean, plan={"smem_bytes": 232448, "threads_per_cta": 192}), 232448))
    few = ok_ptx.replace(".reqntid 192, 1, 1", ".reqntid 128, 1, 1")
    probs = preflight.judge(_rec(few, clean, plan={"smem_bytes": 1000, "threads_per_cta": 128}), 232448)
    assert any("< 192" in p for p in probs)
    assert any("plan() says 192" in p for p in preflight.judge(_rec(few, clean), 232448))
    assert preflight.judge({"status": "compile error", "error": "MLIRError: x\ny"}, 232448) == ["compile failed: MLIRError: x y"]
    nospill = _rec(ok_ptx, "", "")
    assert any("cannot check spills" in p for p in preflight.judge(nospill, 232448))


# ============================================================================ lint
GOOD = '''#!POPCORN leaderboard nvfp4_dual_gemm
#!POPCORN gpu NVIDIA
"""doc"""
import functools
import torch
from task import input_t, output_t

_compiled = {}


@functools.lru_cache(maxsize=None)
def plan_for(m, n):
    return (m, n)


def compile_config(config):
    if config not in _compiled:
        _compiled[config] = object()
    return _compiled[config]


def custom_kernel(data: input_t) -> output_t:
    a, b1, b2, _, _, _, sfa, sfb1, sfb2, c = data
    m, n = c.shape[0], c.shape[1]
    _compiled.setdefault((m, n), None)
    compile_config((m, n))(a, c)
    return c
'''


def test_lint_accepts_compile_caches(tmp_path):
    assert preflight.lint_source(GOOD, str(tmp_path / "submission.py")) == []


@pytest.mark.parametrize("mutation, expect", [
    (lambda s: s.replace('"""doc"""', '"""doc"""  # no Stream here'), "'stream'"),
    (lambda s: s.replace("_compiled = {}", "_compiled = {}\nSTREAMS = 1"), "'stream'"),
    (lambda s: s.replace("#!POPCORN gpu NVIDIA\n", ""), "missing header '#!POPCORN gpu NVIDIA'"),
    (lambda s: s.replace('"""doc"""', 'import os\n#!POPCORN leaderboard nvfp4_dual_gemm').replace("#!POPCORN leaderboard nvfp4_dual_gemm\n#!POPCORN gpu", "#!POPCORN gpu", 1),
     "missing header '#!POPCORN leaderboard"),
    (lambda s: s.replace("    return c\n", "    g = torch.cuda.CUDAGraph()\n    return c\n"), "CUDA graph"),
    (lambda s: s.replace("    return c\n", "    _compiled[a.data_ptr()] = c\n    return c\n"), "module-level container"),
    (lambda s: s.replace("    return c\n", "    _compiled[(m, n)] = c\n    return c\n"), "module-level container"),
    (lambda s: s.replace("def custom_kernel(data: input_t) -> output_t:\n", "def custom_kernel(data: input_t) -> output_t:\n    global _last\n")
     .replace("    return c\n", "    _last = c\n    return c\n"), "global '_last'"),
    (lambda s: s.replace("def plan_for(m, n):", "def plan_for(data):").replace("return (m, n)", "return data"), "lru_cache"),
    (lambda s: s.replace("    _compiled.setdefault((m, n), None)", "    _compiled.setdefault(id(a), c)"), "setdefault"),
    (lambda s: s.replace("import torch\n", "import torch\nimport reference\n"), "local module 'reference'"),
])
def test_lint_catches_rule_breaks(tmp_path, mutation, expect):
    (tmp_path / "reference.py").write_text("")
    src = mutation(GOOD)
    assert src != GOOD
    problems = preflight.lint_source(src, str(tmp_path / "submission.py"))
    assert any(expect in p for p in problems), problems


# ============================================================================ tune --write (no GPU)
TABLE_SRC = '''#!POPCORN leaderboard nvfp4_dual_gemm
x = 1  # before
# >>> config table (tools/tune.py --write rewrites this block)
CONFIG_TABLE = {
    # comment kept
    (256, 4096, 7168, 1): KernelConfig(mma_tile_mn=(128, 64), cluster_mn=(1, 1)),
    (512, 4096, 7168, 1): KernelConfig(mma_tile_mn=(128, 128), cluster_mn=(1, 1)),
}
# <<< config table
y = 2  # after
'''


def test_rewrite_table_changes_only_entries():
    new = tune.rewrite_table(TABLE_SRC, {(256, 4096, 7168, 1): "KernelConfig(mma_tile_mn=(256, 64), cluster_mn=(2, 1))",
                                         (256, 3072, 4096, 1): "KernelConfig(mma_tile_mn=(128, 64), cluster_mn=(1, 1))"})
    ents = tune.table_entries(new)
    assert ents == {(256, 4096, 7168, 1): "KernelConfig(mma_tile_mn=(256, 64), cluster_mn=(2, 1))",
                    (512, 4096, 7168, 1): "KernelConfig(mma_tile_mn=(128, 128), cluster_mn=(1, 1))",
                    (256, 3072, 4096, 1): "KernelConfig(mma_tile_mn=(128, 64), cluster_mn=(1, 1))"}
    old_lines, new_lines = TABLE_SRC.splitlines(), new.splitlines()
    assert new_lines[:4] == old_lines[:4] and new_lines[-3:] == old_lines[-3:] and "    # comment kept" in new_lines
    assert len(new_lines) == len(old_lines) + 1
    ast.parse(new)
    empty = TABLE_SRC.split("CONFIG_TABLE = {")[0] + "CONFIG_TABLE = {\n}\n# <<< config table\n"
    assert tune.table_entries(tune.rewrite_table(empty, {(1, 2, 3, 1): "K()"})) == {(1, 2, 3, 1): "K()"}
    with pytest.raises(ValueError):
        tune.rewrite_table(TABLE_SRC.replace("# <<< config table\n", ""), {})


# ============================================================================ real compiles of the stand-in
@pytest.fixture(scope="session")
def standin(tmp_path_factory):
    d = tmp_path_factory.mktemp("standin")
    (d / "submission.py").write_text(STANDIN)
    (d / "task.yml").write_text(TASK_YML)
    return d


@pytest.fixture(scope="session")
def preflight_full(standin):
    out = standin / "preflight.json"
    p = run(REPO / "tools" / "preflight.py", "--submission", standin / "submission.py", "--task", standin / "task.yml",
            "--json", out, "--dsl-label", "test-label")
    return p, json.loads(out.read_text())


@pytest.mark.slow
@needs_dsl
def test_preflight_judges_real_artifacts(preflight_full):
    p, rep = preflight_full
    assert p.returncode == 1, p.stdout + p.stderr  # the stand-in has a spilling and a non-compiling config
    assert rep["dsl_label"] == "test-label" and rep["lint"] == [] and rep["tools"]["ptxas"]
    cfg = {c["name"]: c for c in rep["configs"]}
    assert set(cfg) == {"m128n128_c1x1", "m128n64_c1x1", "m128n256_c1x1"}
    good = cfg["m128n128_c1x1"]
    assert good["ok"] and good["status"].startswith("compiled"), good["problems"]
    s = good["summary"]
    assert s["threads"] == 192 and s["threads_from"] == "PTX .reqntid" and s["spill_bytes"] == 0
    assert 0 < s["registers"] <= 255 and s["barriers"] >= 1
    assert (s["tcgen05_mma"], s["mma_blockscaled16"], s["tcgen05_cp"], s["tcgen05_ld"], s["tma_load"]) == (4, 4, 8, 4, 4)
    assert s["smem_total"] == s["smem_static"] + 37888
    assert "test (256, 512, 256)" in good["roles"] and "tune space" in good["roles"]
    assert cfg["m128n256_c1x1"]["summary"]["spill_bytes"] > 0 and not cfg["m128n256_c1x1"]["ok"]
    assert cfg["m128n64_c1x1"]["status"] == "compile error" and "compile failed" in cfg["m128n64_c1x1"]["problems"][0]
    assert "benchmark (256, 4096, 7168)" in cfg["m128n64_c1x1"]["roles"]
    assert "PREFLIGHT FAILED" in p.stdout and "compiled" in p.stdout
    # progress: one stderr line per config as it finishes; the table's "used by" column is printed whole
    done = [line for line in p.stderr.splitlines() if line.startswith("preflight: ") and "/3 m128n" in line]
    assert len(done) == 3, p.stderr
    assert ", ".join(good["roles"]) in p.stdout and "..." not in p.stdout.split("used by")[1].split("\n  regs")[0]


@needs_dsl
def test_preflight_quick_passes_and_lint_fails(standin, tmp_path):
    # quick: only configs of task.yml shapes; with the benchmark mapped to the clean config it passes
    sub = tmp_path / "submission.py"
    sub.write_text(STANDIN.replace("KernelConfig(mma_tile_mn=(128, 64), cluster_mn=(1, 1)),", "KernelConfig(mma_tile_mn=(128, 128), cluster_mn=(1, 1)),"))
    p = run(REPO / "tools" / "preflight.py", "--quick", "--submission", sub, "--task", standin / "task.yml", "--json", tmp_path / "q.json")
    rep = json.loads((tmp_path / "q.json").read_text())
    assert p.returncode == 0, p.stdout + p.stderr
    assert [c["name"] for c in rep["configs"]] == ["m128n128_c1x1"] and rep["ok"]
    # the same file with "Stream" in a comment breaks a rule: non-zero exit
    sub.write_text(sub.read_text().replace("# Stand-in for", "# Stream-free stand-in for"))
    p = run(REPO / "tools" / "preflight.py", "--quick", "--submission", sub, "--task", standin / "task.yml", "--json", tmp_path / "q.json")
    rep = json.loads((tmp_path / "q.json").read_text())
    assert p.returncode == 1 and any("stream" in x for x in rep["lint"])


@needs_dsl
def test_preflight_caches_clean_compiles_and_no_cache_recompiles(standin, tmp_path):
    """A clean compile is reused by the next run (issue 16: same record, "cache" in the table's s column);
    --no-cache compiles again and judges the same artifacts the same way."""
    sub = tmp_path / "submission.py"
    sub.write_text(STANDIN.replace("KernelConfig(mma_tile_mn=(128, 64), cluster_mn=(1, 1)),", "KernelConfig(mma_tile_mn=(128, 128), cluster_mn=(1, 1)),"))
    reports = []
    for extra in ([], [], ["--no-cache"]):
        p = run(REPO / "tools" / "preflight.py", "--quick", "--submission", sub, "--task", standin / "task.yml",
                "--json", tmp_path / "q.json", *extra)
        assert p.returncode == 0, p.stdout + p.stderr
        reports.append((json.loads((tmp_path / "q.json").read_text())["configs"][0], p))
    (first, _), (second, p2), (third, p3) = reports
    assert second.get("cached") and "(cached, compiled in" in p2.stderr and "cache  test (256, 512, 256)" in p2.stdout
    assert not third.get("cached") and "cache  test" not in p3.stdout
    for rec in (first, third):
        assert rec["summary"] == second["summary"] and rec["artifacts"]["entries"] == second["artifacts"]["entries"]


# ============================================================================ tune --dry-run: the timed ranking
def test_dry_run_ranks_clean_matching_candidates_by_timed_time():
    rows = [{"config": "a", "preflight": "ok", "status": "match", "timed_us": 12.0},
            {"config": "b", "preflight": "ok", "status": "match", "timed_us": 11.0},
            {"config": "c", "preflight": "FAIL", "status": "not timed", "problems": ["spills"]},
            {"config": "d", "preflight": "ok", "status": "mismatch", "timed_us": 5.0},  # fastest, but C was wrong
            {"config": "e", "preflight": "ok", "status": "deadlock"},
            {"config": "f", "preflight": "ok", "status": "match", "timed_us": 11.5},
            {"config": "g", "preflight": "FAIL", "status": "match", "timed_us": 4.0}]  # a preflight failure never wins
    ranked = tune.rank(rows)
    assert [r["config"] for r in ranked] == ["b", "f", "a", "c", "d", "e", "g"]
    assert [r.get("vs_best") for r in ranked] == [0.0, round(11.5 / 11 - 1, 4), round(12 / 11 - 1, 4)] + [None] * 4
    band = {"delta_rms": 0.056}  # within the band of the best: marked, it is not a result
    assert [tune._vs_best(r, band) for r in ranked[:4]] == ["best", "+4.5%~", "+9.1%", ""]
    assert tune.rank([rows[2], rows[3]])[0].get("vs_best") is None  # nothing eligible: nothing to choose


def test_dry_run_ranks_by_the_worst_case_over_the_engine_variants():
    """With per-variant times, the ranking is minimax: a config fastest under the adopted engine but 9% behind under
    H1 loses to one never more than 3% behind; a change counts only beyond the band under every variant."""
    rows = [{"config": "fast_b0", "preflight": "ok", "status": "match", "timed_us": 10.0,
             "variants": {"B0": 10.0, "H1 wide": 9.81}},
            {"config": "steady", "preflight": "ok", "status": "match", "timed_us": 10.3,
             "variants": {"B0": 10.3, "H1 wide": 9.0}},
            {"config": "slow", "preflight": "ok", "status": "match", "timed_us": 11.5,
             "variants": {"B0": 11.5, "H1 wide": 10.0}}]
    ranked = tune.rank(rows)
    assert [r["config"] for r in ranked] == ["steady", "fast_b0", "slow"]
    assert ranked[0]["vs_best"] == 0.03 and ranked[1]["vs_best"] == round(9.81 / 9.0 - 1, 4)
    assert tune.beyond_band_everywhere(ranked[0], ranked[2], 0.056)  # 10.4% and 10.0% ahead
    assert not tune.beyond_band_everywhere(ranked[0], ranked[1], 0.056)  # behind under B0


def test_engine_variants_are_the_adopted_engine_and_the_kept_hypotheses():
    from calibration.timing import variants, variants_line
    from emu.timing import costs as cost_table

    kept = variants()
    assert kept[0]["name"] == "B0" and kept[0]["overrides"] == {}
    assert {v["name"] for v in kept} >= {"B0", "H1 separate", "H1 wide", "H12", "H9+H10"}
    for v in kept:  # every override names a row of emu/timing/b200.yaml (load refuses another)
        cost_table.load(overrides=v["overrides"])
        assert v["source"]
    with pytest.raises(ValueError, match="no engine variant"):
        variants(["H99"])
    line = variants_line({"B0": 8.37, "H1 wide": 8.12, "H12": 8.71})
    assert "B0 8.37, H1 wide 8.12, H12 8.71 us; worst H12 8.71" in line


def test_dry_run_error_band_and_constants_come_from_the_calibration():
    from calibration.timing import REPORT_JSON, error_band

    band = error_band()
    rep = json.loads(REPORT_JSON.read_text())
    assert band["source"] == "docs/timing_calibration.json" and band["engine"] == rep["engine"]
    assert band["fitted_overrides"] == rep["fitted_overrides"] and band["fitted_overrides"]
    deltas, points = rep["summary"]["timed_fitted_us:deltas_dual"], rep["summary"]["timed_fitted_us:holdout"]
    assert (band["delta_rms"], band["delta_n"]) == (deltas["rms"], deltas["n"]) and band["delta_n"] == 28
    assert (band["abs_median"], band["abs_max"]) == (points["median_abs"], points["max_abs"])
    from emu.timing import costs

    fitted = costs.load(overrides=band["fitted_overrides"])  # every fitted row is a row of the cost table
    assert all(fitted.rows[name].fitted for name in band["fitted_overrides"])


DRY_TASK = """tests:
  - {"m": 256, "n": 256, "k": 512, "l": 1, "seed": 1111}
benchmarks:
  - {"m": 256, "n": 256, "k": 512, "l": 1, "seed": 1111}
"""


@pytest.mark.slow
@needs_dsl
def test_tune_dry_run_times_ranks_and_writes(tmp_path):
    """The real kernel (a copy), two candidates, one small benchmark shape: compiled, timed in the timed emulator,
    ranked, the best written into the copy's table; --costs rows applied after the calibration's fitted ones."""
    sub = tmp_path / "submission.py"
    shutil.copy(REPO / "submission.py", sub)
    shutil.copy(REPO / "task.py", tmp_path / "task.py")  # the kernel's one import beside torch and the DSL
    before = sub.read_text()
    (tmp_path / "task.yml").write_text(DRY_TASK)
    (tmp_path / "costs.yaml").write_text("provenance: test\noverrides:\n  cta_start_cycles: 0\n")
    names = ["m128n64_c1x1_e32", "m256n64_c2x1_e32_ac"]
    p = run(REPO / "tools" / "tune.py", "--dry-run", "--write", "--submission", sub, "--task", tmp_path / "task.yml",
            "--configs", ",".join(names), "--costs", tmp_path / "costs.yaml", "--json", tmp_path / "dry.json",
            timeout=1200)
    assert p.returncode == 0, p.stdout + p.stderr
    out = json.loads((tmp_path / "dry.json").read_text())
    assert "timed" in out["label"] and "not measured" in out["label"] and "modeled" not in p.stdout
    from calibration.timing import error_band

    assert out["costs"]["overrides"] == {"cta_start_cycles": 0.0}  # after the table's fitted values
    assert "fitted constants" in p.stdout and f"{error_band()['delta_rms']:.1%}" in p.stdout
    assert "speed of light" not in p.stdout  # this task carries no sol_us: no figure to set beside it
    assert len([ln for ln in p.stderr.splitlines() if ln.startswith("tune --dry-run: ") and "/2 m" in ln]) == 2
    assert len([ln for ln in p.stderr.splitlines() if ln.startswith("tune --dry-run: timed ") and "(timed)" in ln]) == 2
    rows = out["shapes"][0]["ranking"]
    assert sorted(r["config"] for r in rows) == sorted(names)
    assert all(r["preflight"] == "ok" and r["status"] == "match" and r["timed_us"] > 0 for r in rows), rows
    assert [r["timed_us"] for r in rows] == sorted(r["timed_us"] for r in rows)
    # the load column: 8 tiles of 128 x 64 on 8 1-CTA clusters, 4 of 256 x 64 on 4 pairs; one round of 2 k-tiles each
    assert {r["config"]: r["schedule"] for r in rows} == {
        "m128n64_c1x1_e32": {"clusters": 8, "tiles": 8, "rounds": 1, "busiest_k_tiles": 2},
        "m256n64_c2x1_e32_ac": {"clusters": 4, "tiles": 4, "rounds": 1, "busiest_k_tiles": 2}}
    assert "load = the persistent scheduler's rounds" in p.stdout
    chosen = out["chosen"]["(256, 256, 512, 1)"]
    assert chosen["config"] == rows[0]["config"] and chosen["timed_us"] == rows[0]["timed_us"]
    after = sub.read_text()
    assert tune.table_entries(after)[(256, 256, 512, 1)] == rows[0]["config_src"]
    a, b = before.split("# >>> config table"), after.split("# >>> config table")
    assert a[0] == b[0] and a[1].split("# <<< config table")[1] == b[1].split("# <<< config table")[1]


# ============================================================================ tune's B200 path, orchestrated on the CPU
FAKE_SUB = '''#!POPCORN leaderboard nvfp4_dual_gemm
#!POPCORN gpu NVIDIA
from dataclasses import dataclass


@dataclass(frozen=True)
class KernelConfig:
    mma_tile_mn: tuple = (128, 128)
    cluster_mn: tuple = (1, 1)

    @property
    def name(self):
        return f"m{self.mma_tile_mn[0]}n{self.mma_tile_mn[1]}"

    @property
    def use_2cta(self):
        return self.mma_tile_mn[0] == 256


# >>> config table (tools/tune.py --write rewrites this block)
CONFIG_TABLE = {
}
# <<< config table
TUNE_SPACE = (KernelConfig((128, 128)), KernelConfig((128, 64)), KernelConfig((256, 128), (2, 1)), KernelConfig((128, 256)))


def config_for(m, n, k, l):
    return CONFIG_TABLE.get((m, n, k, l), TUNE_SPACE[0])


def candidate_configs(m, n, k, l):
    return list(TUNE_SPACE)


def compile_config(cfg):
    if cfg.mma_tile_mn[0] == 256:
        raise RuntimeError("does not compile")
    return cfg


def custom_kernel(data):
    x, c = data
    cfg = config_for(c.shape[0], c.shape[1], 256, 1)
    if cfg.mma_tile_mn == (128, 256):
        return c               # writes nothing: the NaN poison must catch it
    c.copy_(x * 2)
    if cfg.mma_tile_mn == (128, 64):
        c[0, 0] = 0.0          # the fastest config below, but wrong in one element
    return c
'''
FAKE_REF = '''import torch


def generate_input(m, n, k, l, seed, mode="leaderboard"):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(m, n, generator=g) + (1.0 if mode == "strict" else 0.0)
    return x, torch.empty(m, n)


def check_implementation(data, output):
    ok = torch.allclose(output, data[0] * 2)
    return ok, "" if ok else "mismatch"
'''
FAKE_BENCH = '''import sys


def benchmark_callable(fn, m, n, k, l, seed, *, progress=None, reference=None):
    cfg = sys.modules["submission"].config_for(m, n, k, l)
    t = {(128, 128): 10.0, (128, 64): 1.0}[cfg.mma_tile_mn]
    return {"mean_us": t, "std_us": 0.1, "err_us": 0.01, "best_us": t, "worst_us": t, "runs": 3}
'''


@pytest.mark.slow
def test_tune_drops_failing_configs_and_writes_the_fastest_correct(tmp_path):
    (tmp_path / "submission.py").write_text(FAKE_SUB)
    (tmp_path / "reference.py").write_text(FAKE_REF)
    (tmp_path / "test_benchmark.py").write_text(FAKE_BENCH)
    (tmp_path / "task.yml").write_text('benchmarks:\n  - {"m": 8, "n": 16, "k": 256, "l": 1, "seed": 7}\n')
    p = run(REPO / "tools" / "tune.py", "--any-device", "--write", "--submission", tmp_path / "submission.py",
            "--task", tmp_path / "task.yml", "--json", tmp_path / "tune.json", timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    out = json.loads((tmp_path / "tune.json").read_text())
    st = {r["config"]: r["status"] for r in out["results"]}
    assert st["m128n128"] == "ok" and st["m128n64"].startswith("wrong") and st["m128n256"].startswith("wrong")
    assert st["m256n128"] == "error" and "does not compile" in next(r["error"] for r in out["results"] if r["config"] == "m256n128")
    assert out["chosen"] == {"(8, 16, 256, 1)": {"config": "m128n128", "config_src": "KernelConfig(mma_tile_mn=(128, 128), cluster_mn=(1, 1))", "mean_us": 10.0}}
    assert out["label"].startswith("measured (") and "torch" in out["info"]
    assert tune.table_entries((tmp_path / "submission.py").read_text()) == {(8, 16, 256, 1): "KernelConfig(mma_tile_mn=(128, 128), cluster_mn=(1, 1))"}
    assert "dropped" in p.stdout


@needs_dsl
def test_tune_dry_run_shapes_narrows_to_benchmark_shapes_only(tmp_path):
    """--shapes ranks a subset of the benchmark shapes; a shape that is not one of them is refused before any compile."""
    (tmp_path / "task.yml").write_text(DRY_TASK)
    p = run(REPO / "tools" / "tune.py", "--dry-run", "--task", tmp_path / "task.yml", "--shapes", "512,4096,7168",
            "--json", tmp_path / "dry.json", timeout=300)
    assert p.returncode != 0 and "not among the benchmark shapes" in p.stdout + p.stderr
    assert not (tmp_path / "dry.json").exists()


def test_tune_refuses_without_sm100(tmp_path):
    (tmp_path / "submission.py").write_text(FAKE_SUB)
    (tmp_path / "task.yml").write_text('benchmarks:\n  - {"m": 8, "n": 16, "k": 256, "l": 1, "seed": 7}\n')
    p = run(REPO / "tools" / "tune.py", "--submission", tmp_path / "submission.py", "--task", tmp_path / "task.yml")
    try:
        import torch
        if torch.cuda.is_available() and torch.cuda.get_device_capability() == (10, 0):
            pytest.skip("this machine has an SM100 GPU")
    except ImportError:
        pass
    assert p.returncode != 0 and "--dry-run" in p.stderr + p.stdout


# ============================================================================ tools discovery, docs
def test_find_tool_prefers_override_and_reports_origin(tmp_path, monkeypatch):
    fake = tmp_path / "ptxas"
    fake.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 13.9, V13.9.1'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PTXAS", str(fake))
    assert preflight.find_tool("ptxas") == {"path": str(fake), "origin": "$PTXAS", "version": "13.9.1"}
    assert preflight.find_tool("no-such-tool-here") is None


def test_skill_and_agents_docs():
    skill = (REPO / "skills" / "nvfp4-dual-gemm-optimizer" / "SKILL.md").read_text()
    front = skill.split("---")[1]
    assert "name: nvfp4-dual-gemm-optimizer" in front and "description:" in front
    for must in ("tools/preflight.py", "tools/tune.py", "tools/emulate.py --timing", "4.886", "13.30", "45", "deadlock",
                 "stream"):
        assert must in skill, must
    agents = (REPO / "AGENTS.md").read_text()
    assert "skills/nvfp4-dual-gemm-optimizer/SKILL.md" in agents and "MEMORY.md" in agents and "stream" in agents
    # commands must work from a fresh clone: the venv's interpreter, never a bare `python`
    for doc in (agents, skill):
        assert not re.search(r"`python ", doc), re.findall(r"`python [^`]*`", doc)


# ============================================================================ the real submission (no compile)
@needs_dsl
@pytest.mark.skipif(not (REPO / "submission.py").exists(), reason="no submission.py yet")
def test_real_submission_lints_clean_and_offers_candidates_per_benchmark():
    assert preflight.lint_source((REPO / "submission.py").read_text(), str(REPO / "submission.py")) == []
    code = (f"import sys, json; sys.path.insert(0, {str(REPO)!r}); from pathlib import Path; "
            f"from tools import preflight, sol, tune; sub = preflight.load_submission(Path({str(REPO / 'submission.py')!r})); "
            f"print(json.dumps({{str(s): [[c.name for c in sub.candidate_configs(*s)], sub.config_for(*s).name, "
            f"[tune.config_source(sub, c) for c in sub.candidate_configs(*s)]] "
            f"for s in sol.benchmark_shapes(Path({str(REPO / 'task.yml')!r}))}}))")
    p = run("-c", code)
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.loads(p.stdout.strip().splitlines()[-1])
    assert len(res) == 4
    for shape, (names, table, sources) in res.items():
        # what tune --dry-run ranks and tune --write can write back: the table's own config among them
        assert names and table in names and len(sources) == len(names), shape


# ============================================================================ the stand-in kernel
STANDIN = r'''#!POPCORN leaderboard nvfp4_dual_gemm
#!POPCORN gpu NVIDIA
# Stand-in for the real submission: one block-scaled NVFP4 GEMM tile per CTA, exposing the
# contract's offline API so the tools can be exercised before the real kernel exists.
from dataclasses import dataclass

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
import cutlass.utils as utils
import cutlass.utils.blackwell_helpers as sm100_utils
import cutlass.utils.blockscaled_layout as bsl
from cutlass.cute.nvgpu import cpasync, tcgen05
from cutlass.cute.runtime import make_ptr

SM_COUNT = 148
SMEM_CAPACITY = 232448
TMEM_COLUMNS = 512
THREADS = 192  # warps 0-3 epilogue, warp 4 TMA + MMA, warp 5 idle
AB, SF, CD = cutlass.Float4E2M1FN, cutlass.Float8E4M3FN, cutlass.Float16


@dataclass(frozen=True)
class KernelConfig:
    mma_tile_mn: tuple = (128, 128)
    cluster_mn: tuple = (1, 1)

    @property
    def name(self):
        return f"m{self.mma_tile_mn[0]}n{self.mma_tile_mn[1]}_c{self.cluster_mn[0]}x{self.cluster_mn[1]}"

    @property
    def use_2cta(self):
        return self.mma_tile_mn[0] == 256

    @property
    def cta_tile_mn(self):
        return (self.mma_tile_mn[0] // (2 if self.use_2cta else 1), self.mma_tile_mn[1])


# >>> config table (tools/tune.py --write rewrites this block)
CONFIG_TABLE = {
    (256, 4096, 7168, 1): KernelConfig(mma_tile_mn=(128, 64), cluster_mn=(1, 1)),
}
# <<< config table

TUNE_SPACE = (KernelConfig((128, 128)), KernelConfig((128, 64)), KernelConfig((128, 256)))


class DualGemmKernel:
    def __init__(self, config):
        self.config = config

    @staticmethod
    def can_implement(config, m, n, k, l):
        tm, tn = config.cta_tile_mn
        if m % tm or n % tn or k % 256:
            return False, f"M % {tm}, N % {tn}, K % 256 must be 0"
        return True, ""

    def plan(self):
        tn = self.config.mma_tile_mn[1]
        per_stage = 128 * 128 + tn * 128 + (128 + tn) * 16
        return dict(ab_stages=1, acc_stages=1, smem_bytes=per_stage + 1024, tmem_cols=512,
                    threads_per_cta=THREADS, epi_tile_n=tn)


def default_config(m, n, k, l):
    return KernelConfig((128, 128)) if n % 128 == 0 else KernelConfig((128, 64))


def config_for(m, n, k, l):
    return CONFIG_TABLE.get((m, n, k, l), default_config(m, n, k, l))


def candidate_configs(m, n, k, l):
    return [c for c in TUNE_SPACE if DualGemmKernel.can_implement(c, m, n, k, l)[0]]


@cute.kernel
def _kernel(mma: cute.TiledMma, tma_a: cute.CopyAtom, mA: cute.Tensor, tma_b: cute.CopyAtom,
            mB: cute.Tensor, tma_sfa: cute.CopyAtom, mSFA: cute.Tensor, tma_sfb: cute.CopyAtom,
            mSFB: cute.Tensor, mC: cute.Tensor, a_l: cute.ComposedLayout, b_l: cute.ComposedLayout,
            sfa_l: cute.Layout, sfb_l: cute.Layout, tiler: cutlass.Constexpr, tx_bytes: cutlass.Constexpr):
    warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    tidx, _, _ = cute.arch.thread_idx()
    bx, by, bz = cute.arch.block_idx()

    @cute.struct
    class Storage:
        ab_bar: cute.struct.MemRange[cutlass.Int64, 2]
        acc_bar: cute.struct.MemRange[cutlass.Int64, 2]
        tmem_buf: cutlass.Int32

    smem = utils.SmemAllocator()
    st = smem.allocate(Storage)
    sA = smem.allocate_tensor(AB, a_l.outer, 128, a_l.inner)
    sB = smem.allocate_tensor(AB, b_l.outer, 128, b_l.inner)
    sSFA = smem.allocate_tensor(SF, sfa_l, 128)
    sSFB = smem.allocate_tensor(SF, sfb_l, 128)

    one = pipeline.CooperativeGroup(pipeline.Agent.Thread)
    ab_p, ab_c = pipeline.PipelineTmaUmma.create(
        barrier_storage=st.ab_bar.data_ptr(), num_stages=1, producer_group=one,
        consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 1), tx_count=tx_bytes,
    ).make_participants()
    acc_p, acc_c = pipeline.PipelineUmmaAsync.create(
        barrier_storage=st.acc_bar.data_ptr(), num_stages=1, producer_group=one,
        consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 128),
    ).make_participants()

    # Global tiles, MMA partitions, TMA partitions.
    gA = cute.local_tile(mA, cute.slice_(tiler, (None, 0, None)), (None, None, None))
    gB = cute.local_tile(mB, cute.slice_(tiler, (0, None, None)), (None, None, None))
    gSFA = cute.local_tile(mSFA, cute.slice_(tiler, (None, 0, None)), (None, None, None))
    gSFB = cute.local_tile(mSFB, cute.slice_(tiler, (0, None, None)), (None, None, None))
    gC = cute.local_tile(mC, cute.slice_(tiler, (None, None, 0)), (None, None, None))
    thr = mma.get_slice(0)

    def tma_part(atom, s, g):
        ts, tg = cpasync.tma_partition(atom, 0, cute.make_layout(1), cute.group_modes(s, 0, 3),
                                       cute.group_modes(g, 0, 3))
        return cute.filter_zeros(ts), cute.filter_zeros(tg)

    tAs, tAg = tma_part(tma_a, sA, thr.partition_A(gA))
    tBs, tBg = tma_part(tma_b, sB, thr.partition_B(gB))
    tSFAs, tSFAg = tma_part(tma_sfa, sSFA, thr.partition_A(gSFA))
    tSFBs, tSFBg = tma_part(tma_sfb, sSFB, thr.partition_B(gSFB))
    tAg, tSFAg = tAg[(None, bx, None, bz)], tSFAg[(None, bx, None, bz)]
    tBg, tSFBg = tBg[(None, by, None, bz)], tSFBg[(None, by, None, bz)]
    tCgC = thr.partition_C(gC)

    rA, rB = mma.make_fragment_A(sA), mma.make_fragment_B(sB)
    acc_fake = mma.make_fragment_C(mma.partition_shape_C(tiler[:2]))

    # Tensor memory: accumulator, then SFA, then SFB columns.
    tmem = utils.TmemAllocator(st.tmem_buf, barrier_for_retrieve=pipeline.NamedBarrier(barrier_id=1, num_threads=THREADS))
    tmem.allocate(TMEM_COLUMNS)
    tmem.wait_for_alloc()
    base = tmem.retrieve_ptr(cutlass.Float32)
    acc = cute.make_tensor(base, acc_fake.layout)
    col = tcgen05.find_tmem_tensor_col_offset(acc)
    tSFA = cute.make_tensor(cute.recast_ptr(base + col, dtype=SF),
                            bsl.make_tmem_layout_sfa(mma, tiler, 16, cute.slice_(sfa_l, (None, None, None, 0))))
    col = col + tcgen05.find_tmem_tensor_col_offset(tSFA)
    tSFB = cute.make_tensor(cute.recast_ptr(base + col, dtype=SF),
                            bsl.make_tmem_layout_sfb(mma, tiler, 16, cute.slice_(sfb_l, (None, None, None, 0))))

    s2t_atom = cute.make_copy_atom(tcgen05.Cp4x32x128bOp(tcgen05.CtaGroup.ONE), SF)

    def s2t(s, t):
        tc = tcgen05.make_s2t_copy(s2t_atom, cute.filter_zeros(t))
        th = tc.get_slice(0)
        src = tcgen05.get_s2t_smem_desc_tensor(tc, th.partition_S(cute.filter_zeros(s)))
        return tc, src, th.partition_D(cute.filter_zeros(t))

    cp_a, cp_a_s, cp_a_t = s2t(sSFA, tSFA)
    cp_b, cp_b_s, cp_b_t = s2t(sSFB, tSFB)

    if warp == 4:
        acc_empty = acc_p.acquire_and_advance()
        mma.set(tcgen05.Field.ACCUMULATE, False)
        for _ in range(cute.size(tAg, mode=[1])):
            e = ab_p.acquire_and_advance()
            for atom, g, s in ((tma_a, tAg, tAs), (tma_b, tBg, tBs), (tma_sfa, tSFAg, tSFAs), (tma_sfb, tSFBg, tSFBs)):
                cute.copy(atom, g[(None, e.count)], s[(None, e.index)], tma_bar_ptr=e.barrier)
            f = ab_c.wait_and_advance()
            cute.copy(cp_a, cp_a_s[(None, None, None, None, f.index)], cp_a_t)
            cute.copy(cp_b, cp_b_s[(None, None, None, None, f.index)], cp_b_t)
            for kb in cutlass.range(cute.size(rA, mode=[2]), unroll_full=True):
                mma.set(tcgen05.Field.SFA, tSFA[(None, None, kb)].iterator)
                mma.set(tcgen05.Field.SFB, tSFB[(None, None, kb)].iterator)
                cute.gemm(mma, acc, rA[(None, None, kb, f.index)], rB[(None, None, kb, f.index)], acc)
                mma.set(tcgen05.Field.ACCUMULATE, True)
            f.release()
        acc_empty.commit()

    if warp < 4:
        t2r = tcgen05.make_tmem_copy(cute.make_copy_atom(
            tcgen05.Ld32x32bOp(tcgen05.Repetition.x32, tcgen05.Pack.NONE), cutlass.Float32), acc)
        th = t2r.get_slice(tidx)
        tAcc = th.partition_S(acc)
        tC = th.partition_D(tCgC)[(None, None, None, None, bx, by, bz)]
        r = cute.make_rmem_tensor(tC.shape, cutlass.Float32)
        rc = cute.make_rmem_tensor(tC.shape, CD)
        full = acc_c.wait_and_advance()
        cute.copy(t2r, tAcc, r)
        x = r.load()
        if cutlass.const_expr(tiler[1] > 128):
            # Deliberately heavy epilogue (silu on 256 columns held at once): this config spills,
            # which gives the tools a real spilling artifact to catch.
            rc.store((x / (1.0 + cute.math.exp(-x, fastmath=True))).to(CD))
        else:
            rc.store(x.to(CD))
        cute.copy(cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), CD), rc, tC)
        full.release()
    cute.arch.barrier()
    if warp == 0:
        tmem.free(base)


@cute.jit
def _host(a_ptr: cute.Pointer, b_ptr: cute.Pointer, sfa_ptr: cute.Pointer, sfb_ptr: cute.Pointer,
          c_ptr: cute.Pointer, m: cutlass.Int32, n: cutlass.Int32, k: cutlass.Int32, tn: cutlass.Constexpr):
    tiler = (128, tn, 256)
    kk = cute.assume(k, 256)
    a = cute.make_tensor(a_ptr, cute.make_layout((m, kk, 1), stride=(kk, 1, m * kk)))
    b = cute.make_tensor(b_ptr, cute.make_layout((n, kk, 1), stride=(kk, 1, n * kk)))
    c = cute.make_tensor(c_ptr, cute.make_layout((m, n, 1), stride=(n, 1, m * n)))
    sfa = cute.make_tensor(sfa_ptr, bsl.tile_atom_to_shape_SF(a.shape, 16))
    sfb = cute.make_tensor(sfb_ptr, bsl.tile_atom_to_shape_SF(b.shape, 16))
    mma = cute.make_tiled_mma(tcgen05.MmaMXF4NVF4Op(SF, (128, tn, 64), tcgen05.CtaGroup.ONE, tcgen05.OperandSource.SMEM))
    a_l = sm100_utils.make_smem_layout_a(mma, tiler, AB, 1)
    b_l = sm100_utils.make_smem_layout_b(mma, tiler, AB, 1)
    sfa_l = bsl.make_smem_layout_sfa(mma, tiler, 16, 1)
    sfb_l = bsl.make_smem_layout_sfb(mma, tiler, 16, 1)
    cl = cute.tiled_divide(cute.make_layout((1, 1, 1)), (mma.thr_id.shape,)).shape
    op = cpasync.CopyBulkTensorTileG2SOp(tcgen05.CtaGroup.ONE)
    s0 = (None, None, None, 0)
    tma_a, ta = cute.nvgpu.make_tiled_tma_atom_A(op, a, cute.slice_(a_l, s0), tiler, mma, cl)
    tma_b, tb = cute.nvgpu.make_tiled_tma_atom_B(op, b, cute.slice_(b_l, s0), tiler, mma, cl)
    tma_sfa, tsfa = cute.nvgpu.make_tiled_tma_atom_A(op, sfa, cute.slice_(sfa_l, s0), tiler, mma, cl, internal_type=cutlass.Int16)
    tma_sfb, tsfb = cute.nvgpu.make_tiled_tma_atom_B(op, sfb, cute.slice_(sfb_l, s0), tiler, mma, cl, internal_type=cutlass.Int16)
    tx = (cute.size_in_bytes(AB, cute.slice_(a_l, s0)) + cute.size_in_bytes(AB, cute.slice_(b_l, s0))
          + cute.size_in_bytes(SF, cute.slice_(sfa_l, s0)) + cute.size_in_bytes(SF, cute.slice_(sfb_l, s0)))
    _kernel(mma, tma_a, ta, tma_b, tb, tma_sfa, tsfa, tma_sfb, tsfb, c, a_l, b_l, sfa_l, sfb_l, tiler, tx).launch(
        grid=(cute.ceil_div(m, 128), cute.ceil_div(n, tn), 1), block=[THREADS, 1, 1], cluster=(1, 1, 1))


_compiled = {}


def compile_config(config):
    # One compile per config (shapes are dynamic); the in-memory cache is the only state kept.
    if config not in _compiled:
        null = lambda t, al: make_ptr(t, 0, cute.AddressSpace.gmem, assumed_align=al)
        _compiled[config] = cute.compile(_host, null(AB, 16), null(AB, 16), null(SF, 32), null(SF, 32),
                                         null(CD, 16), 128, 128, 256, config.mma_tile_mn[1])
    return _compiled[config]


def compile_for(m, n, k, l):
    cfg = config_for(m, n, k, l)
    ok, why = DualGemmKernel.can_implement(cfg, m, n, k, l)
    if not ok:
        raise ValueError(why)
    return compile_config(cfg)
'''


def test_sol_cli_prints_every_benchmark_shape_and_the_geomean(capsys):
    assert sol.main() == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1 + len(sol.benchmark_shapes(REPO / "task.yml")) + 1
    assert out[-1].split()[:2] == ["geomean", f"{sol.SOL_GEOMEAN_US:.3f}"]


# ------------------------------------------------------------------ tools/phases.py
def phase_records(problem: str, per_call: dict) -> list[dict]:
    """Records as tools/emulate.py --timing --json writes them, one per benchmark shape, timed on today's submission.py
    and cost table (so tools/phases.py reuses them instead of timing): phases in a fixed proportion of per_call."""
    from emu.timing import costs as cost_table
    from tools.emulate import file_digest

    return [{"label": "timed", "problem": problem, "status": "match", "config": f"cfg{i}", "shape": list(shape),
             "per_call_us": us, "start_us": 0.3, "kernel_us": us - 0.3,
             "phases_us": {"to first load": 1.0, "to first MMA": 0.5, "mainloop": us - 2.5, "tail": 0.6},
             "costs_overridden": {}, "full_grid": False, "submission_sha256": file_digest(REPO / "submission.py"),
             "cost_table_sha256": file_digest(cost_table.TABLE)} for i, (shape, us) in enumerate(per_call.items())]


@pytest.mark.parametrize("problem", ["nvfp4_dual_gemm", "nvfp4_gemm"])
def test_phases_picture_labels_timed_measured_and_speed_of_light(problem, tmp_path, capsys):
    """tools/phases.py on stored records (no timing): per benchmark shape a timed bar stacked by phase (adding up to
    the call), the best public entry's measured (B200) bar and the speed of light, each labelled with its number, then
    the geometric means; the records file is rewritten with one record per shape."""
    pytest.importorskip("matplotlib", reason="matplotlib (optional; in the test extra) draws the picture")
    from problem_files import task_path
    from tools import phases

    shapes = sol.benchmark_shapes(task_path(problem))
    per_call = {s: 5.0 + i for i, s in enumerate(shapes)}
    results, out = tmp_path / "r.json", tmp_path / "p.png"
    stale = dict(phase_records(problem, {shapes[0]: 99.0})[0], submission_sha256="another submission")
    results.write_text(json.dumps({"records": [stale] + phase_records(problem, per_call)}))
    assert phases.main(["--problem", problem, "--results", str(results), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    best, best_geo, whose = sol.public_best(problem)
    sol_us = sol.sol_table(task_path(problem))
    for s in shapes:
        assert (f"{s[0]}x{s[1]}x{s[2]}: timed {per_call[s]:.2f} us (cfg{shapes.index(s)}), measured (B200) "
                f"{best[s]:.2f} us ({whose}), speed of light {sol_us[s]:.3f} us") in printed
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    kept = json.loads(results.read_text())["records"]
    assert [r["per_call_us"] for r in kept] == [per_call[s] for s in shapes]  # the stale record was not reused
    assert all(sum(phases.segments(r)) == pytest.approx(r["per_call_us"]) for r in kept)
    fig = phases.figure(problem, kept, sol_us, best, best_geo, whose, ["note"])
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.texts]
    for s in shapes:
        assert {f"timed\n{per_call[s]:.2f}", f"measured\n(B200)\n{best[s]:.2f}", f"speed of\nlight\n{sol_us[s]:.2f}"} \
            <= set(labels)
    assert f"measured\n(B200)\n{best_geo:.2f}" in labels and f"timed\n{sol.geomean(per_call.values()):.2f}" in labels
    assert [t.get_text() for t in ax.get_legend().get_texts()][-2:] == [
        f"measured (B200): {whose}, GPU MODE leaderboard", "speed of light (task.yml)"]


# ------------------------------------------------------------------ tools/dsl_matrix.py, calibration/ptx_ledger.py
def test_dsl_matrix_groups_releases_by_their_ptx_up_to_the_kernels_name(tmp_path):
    from tools import dsl_matrix

    one, other = tmp_path / "a.ptx", tmp_path / "b.ptx"
    body = ".visible .entry {name}(\n.param .u64 p)\n{{\n// generated by {tool}\nadd.s32 %r1, %r2, 1;\n}}\x00"
    one.write_text(body.format(name="kernel_cutlass_abc_0", tool="4.3.0"))
    other.write_text(body.format(name="kernel_cutlass_xyz_123", tool="4.3.1"))
    assert dsl_matrix.normalised_ptx(one) == dsl_matrix.normalised_ptx(other)
    other.write_text(body.format(name="kernel_cutlass_xyz_123", tool="4.3.1").replace("1;", "2;"))
    assert dsl_matrix.normalised_ptx(one) != dsl_matrix.normalised_ptx(other)


def test_dsl_matrix_table_says_compile_group_and_verdict_per_release():
    from tools import dsl_matrix

    verdict = {"status": "match", "passed": True, "notes": [], "summary": "emulated MATCH: ..."}
    result = {"releases": ["4.3.0", "4.8.1"], "schedules_label": "1 schedule(s)", "submission_sha": "f" * 64,
              "date": "2026-11-29", "configs": {"m128n64_c1x1_e32": {
                  "compiled": {"4.3.0": {"ok": True, "registers": 90, "spill_bytes": 0, "ptx": "d1", "problems": []},
                               "4.8.1": {"ok": False, "problems": ["spills 8 bytes"]}},
                  "groups": {"d1": {"letter": "A", "releases": ["4.3.0"], "verdict": verdict}}}}}
    text = dsl_matrix.markdown(result)
    assert "| `m128n64_c1x1_e32` | ok 90r/0B A MATCH | FAIL: spills 8 bytes |" in text
    assert "- `m128n64_c1x1_e32` A (4.3.0): emulated MATCH: ..." in text


def test_ledger_counts_a_public_file_as_run_only_where_a_b200_passed_it():
    from calibration.ptx_ledger import passed_on_a_b200

    assert passed_on_a_b200({"points": ["p1"]}).startswith("B200 times published")
    assert "runner output out_x.txt" in passed_on_a_b200({"published": {"output": "out_x.txt", "mean_us": [1.0]}})
    assert passed_on_a_b200({"published": {"output": "out_x.txt", "mean_us": [1.0], "outcome": "mismatch"}}) == ""
    assert passed_on_a_b200({"published": {}}) == ""


def test_ledger_table_names_the_forms_no_public_kernel_ran():
    from calibration.ptx_ledger import markdown

    rows = {"griddepcontrol.wait": {"configs": {"a": 2}, "precedents": [], "opcode_precedented": False},
            "mbarrier.init.shared.b64 [a], v": {"configs": {"a": 3, "b": 1}, "precedents": ["x/y@1234abcd f.py"],
                                                "opcode_precedented": True}}
    result = {"public_files": {"x/y@1234abcd f.py": {"url": "https://github.com/x/y", "b200": "B200 times published"}},
              "configs": {"a": {"roles": ["first"], "forms": 2, "unprecedented": ["griddepcontrol.wait"]},
                          "b": {"roles": ["safe"], "forms": 1, "unprecedented": []}},
              "forms": rows}
    text = markdown(result)
    assert "| `a` | first | 2 | `griddepcontrol.wait` | none |" in text and "| `b` | safe | 1 | none | none |" in text
    assert "| `griddepcontrol.wait` | 1 | **none** |" in text and "| `mbarrier.init.shared.b64 [a], v` | 2 | x:f.py |" in text


# ============================================================================ the emulator's own speed and schedules
def test_emulator_bench_gives_the_verdicts_rate_together():
    """The verdict workloads' warp-instructions over their CPU seconds, per tree, with the speed-up over the first; a
    tree missing a workload's run is incomplete, not a smaller sum."""
    from tools.emulator_bench import together

    row = lambda w, t, cpu, wi: {"workload": w, "tree": t, "median_cpu_s": cpu, "warp_instructions": wi}  # noqa: E731
    rows = [row("verdict:a", "base", 3.0, 300_000), row("verdict:b", "base", 1.0, 100_000),
            row("verdict:a", "new", 2.0, 300_000), row("verdict:b", "new", 0.5, 100_000), row("timed", "new", 9.0, 1)]
    assert together(rows, ["base", "new"], ["verdict:a", "verdict:b"]) == ["400000, 4.0, 100,000",
                                                                            "400000, 2.5, 160,000, 1.60x"]
    assert together(rows[:3], ["base", "new"], ["verdict:a", "verdict:b"])[1] == "incomplete"


def test_emulator_bench_compares_schedules_and_refuses_another_kernel():
    """tools/emulator_bench.py hashes: equal records compare clean; a schedule whose digest differs is named; a kernel
    whose PTX is not the recorded one cannot be compared at all (its schedules are another program's)."""
    from tools.emulator_bench import compare, machine, machine_line

    ran = {"status": "match", "notes": 0, "trace": "0f", "events": 3, "c": "aa"}
    recorded = {"ptx": "p1", "dsl": "4.8.1", "schedules": {"uniform:0": ran, "late_wake:3": ran}}
    assert compare("cfg", recorded, json.loads(json.dumps(recorded))) == []
    moved = {**recorded, "schedules": {**recorded["schedules"], "late_wake:3": {**ran, "trace": "10"}}}
    (line,) = compare("cfg", recorded, moved)
    assert line.startswith("cfg late_wake:3: recorded")
    assert compare("cfg", recorded, moved, ["uniform:0"]) == []  # a subset compares only its schedules
    (line,) = compare("cfg", recorded, {**moved, "schedules": {}}, ["uniform:0"])  # and a missing one is named
    assert line.startswith("cfg uniform:0: recorded")
    (line,) = compare("cfg", recorded, {**recorded, "ptx": "p2"})
    assert "PTX differs" in line and "--write" in line
    assert machine_line(machine()).startswith(f"machine: {__import__('os').cpu_count()} CPUs")


@pytest.mark.slow
def test_full_grid_runs_every_cluster_and_reports_its_time(tmp_path):
    """tools/full_grid.py on one small shape (the configs' benchmark shapes take hours): every cluster, a progress
    line as its clusters finish, the verdict with its time, the JSON row."""
    out = tmp_path / "grid.json"
    proc = run("tools/full_grid.py", "--shapes", "256,256,512", "--schedules", "1", "--modes", "strict",
               "--jobs", "1", "--json", out)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert "clusters (" in proc.stdout and "PASS  emulated MATCH" in proc.stdout
    (row,) = json.loads(out.read_text())["rows"]
    clusters, total = row["clusters"].split("/")
    assert clusters == total and row["verdict"] == "MATCH" and row["schedules"] == ["uniform:0"]
