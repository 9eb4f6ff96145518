"""Offline preflight for submission.py: no GPU needed.

Cross-compiles every kernel config for sm_100a (CONFIG_TABLE, the configs task.yml's shapes use and their fallbacks,
TUNE_SPACE), one subprocess per config, and judges the dumped PTX/cubin: registers, spills, shared
memory, barriers, threads per CTA, and static counts of the instructions that matter. Also lints
submission.py against the leaderboard rules (docs/leaderboard.md §4). Prints a table, writes JSON, exits 1 on
any failure.

    python tools/preflight.py [--quick] [--jobs 2] [--json build/preflight.json] [--dsl VERSION] [--no-cache]

Every number it prints is "compiled": read from the artifacts the CuTe DSL produced, never measured.
A config that compiled cleanly is cached (its record, PTX/cubin and the ptxas/cuobjdump readings) under
$EMU_LAUNCH_CACHE/preflight (default <tmp>/emu_launch_cache/preflight), keyed on everything the compile reads:
the submission's bytes and those of the local modules it imports, the config's fields, the versions of the DSL,
apache-tvm-ffi, torch and Python, this file, the binary tools and the CUTE_DSL_* environment. A hit is
labelled "cached" in the table; --no-cache compiles everything again.
"""
from __future__ import annotations

import argparse
import ast
import dataclasses
import hashlib
import itertools
import importlib.metadata
import importlib.util
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script: the emulator's B200 facts and tool finder
    sys.path.append(str(REPO))
from emu.device import B200_LIMITS  # noqa: E402
from emu.timing.sass import find_tool  # noqa: E402  (ptxas, cuobjdump, nvdisasm: $NAME, the pinned wheels, PATH)

SMEM_CAPACITY = B200_LIMITS["smem_optin"]  # B200 max shared memory per block (opt-in), emu/device.py
MIN_THREADS = 192       # issue 3: TMA warp + MMA warp + 4 epilogue warps
REGS_PER_SM = B200_LIMITS["regs_per_sm"]
# Errors that 4.3.5 raises at its JIT step on a machine with no driver, after .ptx/.cubin are written.
DRIVER_MISSING = {"DynamicLibNotFoundError", "CudaDriverDependencyError"}
PROGRESS_LOCK = threading.Lock()  # run_config's progress line, printed from the compile threads
ENV_DUMP = ("CUTE_DSL_ARCH", "CUTE_DSL_KEEP_PTX", "CUTE_DSL_KEEP_CUBIN", "CUTE_DSL_KEEP",
            "CUTE_DSL_DUMP_DIR", "CUTE_DSL_DISABLE_FILE_CACHING")


# ----------------------------------------------------------------------------- tools
def dsl_version() -> str:
    try:
        return importlib.metadata.version("nvidia-cutlass-dsl")
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


# ----------------------------------------------------------------------------- parsing
_COMMENT = re.compile(r"//[^\n]*")
_ENTRY = re.compile(r"\.entry\s+([\w$]+)\s*\(")


def ptx_entries(ptx: str) -> dict[str, tuple[str, str]]:
    """{kernel name: (directives between the parameter list and '{', body)}."""
    ptx = _COMMENT.sub("", ptx)
    starts = [(m.group(1), m.start()) for m in _ENTRY.finditer(ptx)]
    out = {}
    for i, (name, s) in enumerate(starts):
        chunk = ptx[s:starts[i + 1][1] if i + 1 < len(starts) else len(ptx)]
        close = chunk.find(")")
        brace = chunk.find("{", close)
        out[name] = (chunk[close + 1:brace], chunk[brace:])
    return out


def _instrs(body: str, prefix: str) -> list[str]:
    # An instruction is the first token of a statement, optionally behind a predicate guard.
    return re.findall(r"(?:^|[;{}])\s*(?:@!?%?\w+\s+)?(" + re.escape(prefix) + r"[\w.:]*)", body, re.M)


def parse_ptx(ptx: str) -> dict[str, dict]:
    """Static facts per kernel entry of one PTX file (counts are static instruction counts)."""
    res = {}
    for name, (directives, body) in ptx_entries(ptx).items():
        threads = None
        for d in ("reqntid", "maxntid"):
            m = re.search(r"\." + d + r"\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?", directives)
            if m:
                threads = {"value": int(m.group(1)) * int(m.group(2) or 1) * int(m.group(3) or 1), "from": d}
                break
        mmas = _instrs(body, "tcgen05.mma")
        tma = _instrs(body, "cp.async.bulk.tensor")
        bulk = [i for i in _instrs(body, "cp.async.bulk") if not i.startswith("cp.async.bulk.tensor")
                and not i.startswith("cp.async.bulk.commit") and not i.startswith("cp.async.bulk.wait")
                and not i.startswith("cp.async.bulk.prefetch")]
        kinds: dict[str, int] = {}
        for i in mmas:
            kinds[i] = kinds.get(i, 0) + 1
        res[name] = {
            "threads": threads,
            "tcgen05_mma": len(mmas),
            # 16-element scale blocks for NVFP4: PTX spells it scale_vec::4X (DSL 4.3) or block16 (newer)
            "mma_blockscaled16": sum(1 for i in mmas if ".kind::mxf4nvf4" in i and ".block_scale" in i
                                     and (".scale_vec::4X" in i or ".block16" in i)),
            "mma_2cta": sum(1 for i in mmas if "cta_group::2" in i),
            "mma_kinds": kinds,
            "tcgen05_cp": len(_instrs(body, "tcgen05.cp")),
            "tcgen05_ld": len(_instrs(body, "tcgen05.ld")),
            "tcgen05_st": len(_instrs(body, "tcgen05.st")),
            # destination state space comes first: .shared...global is a load, .global...shared a store
            "tma_load": sum(1 for i in tma if i.find(".shared") < i.find(".global")),
            "tma_store": sum(1 for i in tma if i.find(".global") < i.find(".shared")),
            "bulk_copy": len(bulk),
            "mbarrier_init": len(_instrs(body, "mbarrier.init")),
            "static_smem": sum(int(s) for s in re.findall(r"(?<!extern )\.shared\s+(?:\.align\s+\d+\s+)?\.\w+\s+[\w$]+\[(\d+)\]", body)),
        }
    # module-scope (non-extern) .shared declarations count for every kernel of this PTX
    glob_smem = sum(int(s) for s in re.findall(r"^(?!\s*\.extern)\s*\.shared\s+(?:\.align\s+\d+\s+)?\.\w+\s+[\w$]+\[(\d+)\]",
                                                 _COMMENT.sub("", ptx).split(".entry")[0], re.M))
    for r in res.values():
        r["static_smem"] += glob_smem
    return res


def parse_ptxas(text: str) -> dict[str, dict]:
    """ptxas -v output -> {function: registers, barriers, stack, spill_stores, spill_loads}."""
    res, cur = {}, None
    for line in text.splitlines():
        m = re.search(r"(?:Compiling entry function|Function properties for) '?([\w$]+)'?", line)
        if m:
            cur = res.setdefault(m.group(1), {})
            continue
        if cur is None:
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m:
            cur.update(stack=int(m.group(1)), spill_stores=int(m.group(2)), spill_loads=int(m.group(3)))
        m = re.search(r"Used (\d+) registers", line)
        if m:
            cur["registers"] = int(m.group(1))
            b = re.search(r"used (\d+) barriers", line)
            cur["barriers"] = int(b.group(1)) if b else 0
    return res


def parse_resource_usage(text: str) -> dict[str, dict]:
    """cuobjdump --dump-resource-usage -> {function: REG, STACK, SHARED, LOCAL}."""
    res, cur = {}, None
    for line in text.splitlines():
        m = re.match(r"\s*Function ([\w$]+):", line)
        if m:
            cur = res.setdefault(m.group(1), {})
        elif cur is not None and "REG:" in line:
            cur.update({k.lower(): int(v) for k, v in re.findall(r"\b(REG|STACK|SHARED|LOCAL):(\d+)", line)})
    return res


# SASS mnemonics seen in DSL-built sm_100a cubins (observed here, not an NVIDIA-documented mapping):
# UTC*MMA = tcgen05.mma, UTCCP = tcgen05.cp, LDTM = tcgen05.ld, UTMALDG/UTMASTG = TMA load/store,
# LDL/STL = local memory (spills).
SASS_KEYS = ("UTCQMMA", "UTCOMMA", "UTCHMMA", "UTCIMMA", "UTCCP", "LDTM", "UTMALDG", "UTMASTG", "LDL", "STL")


def parse_sass(text: str) -> dict[str, dict]:
    res, cur = {}, None
    for line in text.splitlines():
        m = re.search(r"Function : ([\w$]+)", line)
        if m:
            cur = res.setdefault(m.group(1), {k: 0 for k in SASS_KEYS})
            continue
        m = re.match(r"\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_]+)", line)
        if cur is not None and m and m.group(1) in cur:
            cur[m.group(1)] += 1
    for name, loops in sass_mainloops(text).items():
        res.setdefault(name, {k: 0 for k in SASS_KEYS})["mainloops"] = loops
    return res


# Moves into the uniform datapath: R2UR copies a vector register to a uniform one, S2UR a special register. The
# tcgen05/TMA instructions take uniform operands, so a value ptxas could not prove warp-uniform costs an R2UR at
# each use; gau-nernst's B200 kernels (v1e, "check SASS to avoid R2UR") keep them out of the hot loop.
UNIFORM_MOVES = ("R2UR", "S2UR")
# The k-loops: the MMA warp's (it issues the UTC*MMA) and the TMA warp's (it issues the UTMALDG).
MAINLOOP_MARKERS = {"mma": ("UTCQMMA", "UTCOMMA", "UTCHMMA", "UTCIMMA"), "tma": ("UTMALDG",)}
_SASS_INSTR = re.compile(r"\s*/\*([0-9a-f]+)\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_]+)(?:\.[\w.]+)?\s*([^;]*);")


def sass_mainloops(text: str) -> dict[str, dict]:
    """{function: {"mma"|"tma": {"span": [first, last address], "R2UR": n, "S2UR": n}}}: per k-loop, the
    innermost loop (address range from a backward branch's target to the branch) that holds the loop's marker
    instruction, and the uniform-datapath moves inside that range. Out-of-line code the loop branches to (the
    mbarrier retry paths ptxas moves to the function's end) lies outside the range and is not counted."""
    funcs: dict[str, list] = {}
    cur = None
    for line in text.splitlines():
        m = re.search(r"Function : ([\w$]+)", line)
        if m:
            cur = funcs.setdefault(m.group(1), [])
            continue
        m = _SASS_INSTR.match(line)
        if cur is not None and m:
            cur.append((int(m.group(1), 16), m.group(2), m.group(3)))
    out = {}
    for name, instrs in funcs.items():
        loops = []
        for addr, op, args in instrs:
            target = re.search(r"\b0x([0-9a-f]+)\b", args) if op in ("BRA", "JMP") else None
            if target and int(target.group(1), 16) <= addr:
                loops.append((int(target.group(1), 16), addr))
        found = {}
        for role, markers in MAINLOOP_MARKERS.items():
            marked = [a for a, op, _ in instrs if op in markers]
            spans = [(lo, hi) for lo, hi in loops if any(lo <= a <= hi for a in marked)]
            if not spans:
                continue
            lo, hi = min(spans, key=lambda span: span[1] - span[0])
            inside = [op for a, op, _ in instrs if lo <= a <= hi]
            found[role] = {"span": [lo, hi], **{k: inside.count(k) for k in UNIFORM_MOVES}}
        if found:
            out[name] = found
    return out


# ----------------------------------------------------------------------------- lint
HEADERS = ("#!POPCORN leaderboard nvfp4_dual_gemm", "#!POPCORN gpu NVIDIA")  # docs/leaderboard.md §5
GEMM_HEADERS = ("#!POPCORN leaderboard nvfp4_gemm", "#!POPCORN gpu NVIDIA")  # nvfp4_gemm/submission.py, §9
GEMM_TASK = REPO / "nvfp4_gemm" / "task.yml"
GRAPH_RE = re.compile(r"cudagraph|cuda\.graph|cugraph|graph\.replay|make_graphed_callables|capture_begin", re.I)
TENSOR_ANN = re.compile(r"input_t|Tensor")
CONTAINER_CALLS = {"dict", "list", "set", "OrderedDict", "defaultdict", "WeakValueDictionary", "WeakKeyDictionary", "deque"}
METADATA = {"shape", "dtype", "device", "stride", "size", "ndim", "dim", "numel", "is_contiguous"}
IDENTITY_HINTS = ("data_ptr", "untyped_storage", "storage", "tobytes", "clone")


def lint_source(text: str, path: str = "submission.py", headers=HEADERS) -> list[str]:
    """Rules of docs/leaderboard.md §4. The caching check is a heuristic: it flags a module-level container or
    global written with a key/value derived from the call's tensors (or their addresses), and
    functools caches on functions that take tensors. Caching compiled kernels by config or shape passes."""
    problems = []
    lines = text.splitlines()
    for i, line in enumerate(lines, 1):
        if "stream" in line.lower():
            problems.append(f"line {i}: contains 'stream' (any case is rejected by the leaderboard): {line.strip()[:80]}")
        if GRAPH_RE.search(line):
            problems.append(f"line {i}: CUDA graph use is banned: {line.strip()[:80]}")
    head = []
    for line in lines:
        if line.strip() and not line.lstrip().startswith("#"):
            break
        head.append(line.strip())
    for h in headers:
        if h not in head:
            problems.append(f"missing header '{h}' in the leading comment block")
    try:
        tree = ast.parse(text)
    except SyntaxError as e:
        return problems + [f"syntax error: {e}"]
    here = Path(path).resolve().parent
    for node in ast.walk(tree):
        mods = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else []
        for mod in mods:
            top = mod.split(".")[0]
            if top != "task" and top not in sys.stdlib_module_names and \
                    ((here / f"{top}.py").exists() or (here / top / "__init__.py").exists()):
                problems.append(f"line {node.lineno}: imports local module '{top}': the submission is one file "
                                "(it may import task.py, torch and the CuTe DSL)")
    problems += _lint_caching(tree)
    return problems


def lint_gemm_submission() -> list[str]:
    """nvfp4_gemm/submission.py under the rules with nvfp4_gemm's header, and in sync with submission.py (it is
    generated by tools/gemm_submission.py)."""
    path = REPO / "nvfp4_gemm" / "submission.py"
    if not path.exists():
        return ["missing: run python tools/gemm_submission.py"]
    if str(REPO) not in sys.path:
        sys.path.append(str(REPO))
    from tools import gemm_submission
    problems = lint_source(path.read_text(), str(path), GEMM_HEADERS)
    if path.read_text() != gemm_submission.render((REPO / "submission.py").read_text()):
        problems.append("out of date with submission.py: run python tools/gemm_submission.py")
    return problems


def _names(node) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _is_metadata(node) -> bool:
    """m, n = c.shape[0], c.shape[1] derives sizes, not tensors: a cache keyed on them is a compile cache."""
    return any(isinstance(n, ast.Attribute) and n.attr in METADATA for n in ast.walk(node))


def _mentions_identity(node) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr in IDENTITY_HINTS for n in ast.walk(node)) or \
        any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("id", "hash") for n in ast.walk(node))


def _lint_caching(tree: ast.Module) -> list[str]:
    containers = set()
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            v = node.value
            if isinstance(v, (ast.Dict, ast.List, ast.Set)) or (isinstance(v, ast.Call) and (
                    getattr(v.func, "id", None) in CONTAINER_CALLS or getattr(v.func, "attr", None) in CONTAINER_CALLS)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                containers |= {t.id for t in targets if isinstance(t, ast.Name)}
    problems = []
    for fn in [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]:
        args = fn.args.args + fn.args.kwonlyargs + fn.args.posonlyargs
        # tensors of this call: a parameter named data / annotated as tensors, and what is unpacked from it
        tensors = {a.arg for a in args if a.arg == "data" or (a.annotation is not None and TENSOR_ANN.search(ast.unparse(a.annotation)))}
        for dec in fn.decorator_list:
            d = ast.unparse(dec)
            if re.search(r"\b(lru_cache|cache)\b", d) and tensors:
                problems.append(f"line {fn.lineno}: {d} on '{fn.name}', which takes tensors: caches inputs across calls")
        changed = True
        while changed:  # propagate through plain assignments: a, b1, ... = data ; x = a
            changed = False
            for st in ast.walk(fn):
                if isinstance(st, ast.Assign) and not isinstance(st.value, ast.Call) and _names(st.value) & tensors \
                        and not _is_metadata(st.value):
                    for t in st.targets:
                        new = {n.id for n in ast.walk(t) if isinstance(n, ast.Name)} - tensors
                        if new:
                            tensors |= new
                            changed = True
        globals_decl = {n for st in ast.walk(fn) if isinstance(st, ast.Global) for n in st.names}

        def tainted(node):
            return node is not None and (bool(_names(node) & tensors) or _mentions_identity(node))

        for st in ast.walk(fn):
            if isinstance(st, ast.Assign):
                for t in st.targets:
                    if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id in containers \
                            and (tainted(t.slice) or tainted(st.value)):
                        problems.append(f"line {st.lineno}: '{t.value.id}[...]' stores call data in a module-level "
                                        "container: inputs/outputs must not be cached across calls")
                    if isinstance(t, ast.Name) and t.id in globals_decl and tainted(st.value):
                        problems.append(f"line {st.lineno}: global '{t.id}' keeps call data across calls")
            if isinstance(st, ast.Call) and isinstance(st.func, ast.Attribute) and isinstance(st.func.value, ast.Name) \
                    and st.func.value.id in containers and st.func.attr in ("setdefault", "append", "add", "update", "__setitem__", "appendleft") \
                    and any(tainted(a) for a in st.args):
                problems.append(f"line {st.lineno}: '{st.func.value.id}.{st.func.attr}(...)' stores call data in a "
                                "module-level container: inputs/outputs must not be cached across calls")
    return sorted(set(problems))


# ----------------------------------------------------------------------------- worker (one config)
def load_submission(path: Path):
    """Import submission.py as module 'submission' (pickled configs refer to that name)."""
    sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location("submission", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["submission"] = mod
    spec.loader.exec_module(mod)
    return mod


def _chain(e: BaseException) -> list[BaseException]:
    out = []
    while e is not None and e not in out:
        out.append(e)
        e = e.__cause__ or e.__context__
    return out


def analyze_artifacts(dump: Path, tools: dict) -> dict:
    """Read every .ptx/.cubin the compile dumped; run ptxas -v on the PTX and cuobjdump on the cubin."""
    out = {"ptx_files": [], "entries": {}, "ptxas": {}, "resource": {}, "sass": {}, "tool_errors": []}
    for ptx_path in sorted(dump.glob("*.ptx")):
        # DSL 4.3.5 ends its dumped PTX with a NUL byte, which ptxas rejects ("Unexpected EOF").
        text = ptx_path.read_bytes().rstrip(b"\0").decode("utf-8", "replace")
        out["ptx_files"].append(ptx_path.name)
        out["entries"].update(parse_ptx(text))
        if tools.get("ptxas"):
            clean = ptx_path.with_suffix(".clean.ptx")
            clean.write_text(text)
            p = subprocess.run([tools["ptxas"]["path"], "-v", "-arch=sm_100a", str(clean), "-o", str(clean.with_suffix(".ptxas.cubin"))],
                               capture_output=True, text=True, timeout=600)
            if p.returncode:
                out["tool_errors"].append(f"ptxas {tools['ptxas']['version']} on {ptx_path.name}: {p.stderr.strip()[-300:]}")
            out["ptxas"].update(parse_ptxas(p.stdout + p.stderr))
    for cubin in sorted(dump.glob("*.cubin")):
        if cubin.name.endswith(".ptxas.cubin"):
            continue
        if tools.get("cuobjdump"):
            for flag, key, parse in (("--dump-resource-usage", "resource", parse_resource_usage), ("-sass", "sass", parse_sass)):
                p = subprocess.run([tools["cuobjdump"]["path"], flag, str(cubin)], capture_output=True, text=True, timeout=600)
                if p.returncode:
                    out["tool_errors"].append(f"cuobjdump {flag} on {cubin.name}: {p.stderr.strip()[-300:]}")
                out[key].update(parse(p.stdout))
    out["cubin_files"] = sorted(c.name for c in dump.glob("*.cubin") if not c.name.endswith(".ptxas.cubin"))
    return out


def worker(submission: Path, config_file: Path, result_file: Path, dump: Path) -> None:
    res = {"status": "error", "error": None}
    t0 = time.time()
    try:
        sub = load_submission(submission)
        cfg = pickle.loads(config_file.read_bytes())
        try:
            res["plan"] = dict(sub.DualGemmKernel(cfg).plan())
        except Exception as e:  # plan() is contract API; its failure is reported, the compile still runs
            res["plan_error"] = f"{type(e).__name__}: {e}"
        try:
            sub.compile_config(cfg)
            res["status"] = "compiled"
        except Exception as e:
            chain = _chain(e)
            names = [type(c).__name__ for c in chain]
            have = any(dump.glob("*.ptx")) and any(dump.glob("*.cubin"))
            if DRIVER_MISSING & set(names) and have:
                res["status"] = "compiled (JIT step skipped: no driver)"
            else:
                res["status"] = "compile error"
                res["error"] = " <- ".join(f"{type(c).__name__}: {str(c).strip()[:400]}" for c in chain)
    except Exception as e:
        res["error"] = "".join(traceback.format_exception(e))[-2000:]
    res["compile_s"] = round(time.time() - t0, 2)
    result_file.write_text(json.dumps(res))


# ----------------------------------------------------------------------------- driver
def load_shapes(task_path: Path) -> dict[str, list[tuple]]:
    import yaml
    task = yaml.safe_load(task_path.read_text())
    return {kind: [(int(s["m"]), int(s["n"]), int(s["k"]), int(s.get("l", 1))) for s in task.get(kind, [])]
            for kind in ("tests", "benchmarks")}


def collect_configs(sub, shapes: dict, quick: bool, gemm_shapes: dict | None = None) -> tuple[list, dict, list[str]]:
    """Ordered unique configs with the roles that pull them in, plus shape-level problems. gemm_shapes: nvfp4_gemm's
    task shapes (its configs join, roles prefixed "gemm"), where the submission serves that problem
    (GEMM_TUNE_SPACE)."""
    roles: dict = {}
    problems = []

    def add(cfg, role):
        roles.setdefault(cfg, []).append(role)

    for kind, lst in shapes.items():
        for shape in dict.fromkeys(lst):
            cfg = sub.config_for(*shape)
            add(cfg, f"{kind[:-1]} {shape[:3]}")
            dflt = sub.default_config(*shape)
            if dflt != cfg:
                add(dflt, f"default {shape[:3]}")
            fallback = getattr(sub, "CONFIG_FALLBACK", {}).get(shape)  # a GPU holding fewer clusters runs it
            if fallback is not None:
                add(fallback, f"fallback {shape[:3]}")
            for later in getattr(sub, "config_chain", lambda *a: [])(*shape)[1:]:  # the first call's fallbacks
                if later not in (dflt, fallback):
                    add(later, f"chain {shape[:3]}")
            ok, why = sub.DualGemmKernel.can_implement(cfg, *shape)
            if not ok:
                problems.append(f"{kind[:-1]} shape {shape}: its config {cfg.name} cannot implement it: {why}")
    if not quick:
        for shape, cfg in sub.CONFIG_TABLE.items():
            add(cfg, f"table {tuple(shape)[:3]}")
        for cfg in sub.TUNE_SPACE:
            add(cfg, "tune space")
    if gemm_shapes and hasattr(sub, "GEMM_TUNE_SPACE"):
        problem = "nvfp4_gemm"
        for kind, lst in gemm_shapes.items():
            for shape in dict.fromkeys(lst):
                cfg = sub.config_for(*shape, problem)
                add(cfg, f"gemm {kind[:-1]} {shape[:3]}")
                dflt = sub.default_config(*shape, problem)
                if dflt != cfg:
                    add(dflt, f"gemm default {shape[:3]}")
                for later in getattr(sub, "config_chain", lambda *a: [])(*shape, problem)[1:]:
                    if later != dflt:
                        add(later, f"gemm chain {shape[:3]}")
                ok, why = sub.DualGemmKernel.can_implement(cfg, *shape)
                if not ok:
                    problems.append(f"gemm {kind[:-1]} shape {shape}: its config {cfg.name} cannot implement it: {why}")
        if not quick:
            for shape, cfg in sub.GEMM_CONFIG_TABLE.items():
                add(cfg, f"gemm table {tuple(shape)[:3]}")
            for cfg in sub.GEMM_TUNE_SPACE:
                add(cfg, "gemm tune space")
    return list(roles), roles, problems


def judge(rec: dict, capacity: int) -> list[str]:
    """Failures for one config; fills the summary fields used by the table and the JSON."""
    bad = []
    if not rec["status"].startswith("compiled"):
        return ["compile failed: " + " ".join(str(rec.get("error") or "unknown").split())[:600]]
    art, plan = rec["artifacts"], rec.get("plan") or {}
    if rec.get("plan_error"):
        bad.append(f"plan() failed: {rec['plan_error']}")
    ents = art["entries"]
    if not ents:
        return bad + ["no kernel entry found in the dumped PTX"]
    # The main kernel is the one issuing MMAs; helper kernels, if any, are still checked for spills.
    main = max(ents, key=lambda n: (ents[n]["tcgen05_mma"], len(n)))
    e = ents[main]
    ptxas, res = art["ptxas"], art["resource"]
    s = rec["summary"] = {"kernel": main, "kernels": len(ents)}
    # registers: the DSL's own cubin is what would run; ptxas -v (a possibly different ptxas) is the fallback
    s["registers_cubin"] = max([v["reg"] for v in res.values() if "reg" in v], default=None)
    s["registers_ptxas"] = max([v["registers"] for v in ptxas.values() if "registers" in v], default=None)
    s["registers"] = s["registers_cubin"] if s["registers_cubin"] is not None else s["registers_ptxas"]
    s["barriers"] = max([v.get("barriers", 0) for v in ptxas.values()], default=None)
    if ptxas:
        s["spill_bytes"] = sum(v.get("spill_stores", 0) + v.get("spill_loads", 0) for v in ptxas.values())
        s["spill_from"] = "ptxas -v"
    elif res:
        s["spill_bytes"] = sum(v.get("stack", 0) + v.get("local", 0) for v in res.values())
        s["spill_from"] = "cuobjdump STACK+LOCAL (upper bound: local arrays count too)"
    else:
        s["spill_bytes"] = None
        bad.append("cannot check spills: neither ptxas nor cuobjdump ran (install nvidia-cuda-nvcc / nvidia-cuda-cuobjdump)")
    if s["spill_bytes"]:
        bad.append(f"spills: {s['spill_bytes']} bytes ({s['spill_from']})")
    sass_local = sum(v.get("LDL", 0) + v.get("STL", 0) for v in art["sass"].values())
    s["sass_local_ops"] = sass_local if art["sass"] else None
    # Reported, not judged: today's CONFIG_TABLE 512-row config has 3 R2UR per k-tile in its MMA loop.
    loops = [v["mainloops"] for v in art["sass"].values() if v.get("mainloops")]
    s["mainloop_uniform_moves"] = {role: sum(loop[role][k] for k in UNIFORM_MOVES) for loop in loops for role in loop} \
        if loops else None
    # shared memory: dynamic from plan(), static from the cubin (includes the DSL's 1 KB aligned base) or PTX
    static = max([v.get("shared", 0) for v in res.values()] + [v["static_smem"] for v in ents.values()], default=0)
    dyn = plan.get("dynamic_smem_bytes", plan.get("smem_bytes"))  # static is measured from the cubin above
    s["smem_static"], s["smem_dynamic"] = static, dyn
    s["smem_total"] = static + (dyn or 0)
    if dyn is None:
        bad.append("plan() has no smem_bytes: dynamic shared memory unknown")
    if s["smem_total"] > capacity:
        bad.append(f"shared memory {s['smem_total']} B > {capacity} B (static {static} + dynamic {dyn})")
    th = e["threads"]
    s["threads"] = th["value"] if th else plan.get("threads_per_cta")
    s["threads_from"] = f"PTX .{th['from']}" if th else "plan()"
    if th and plan.get("threads_per_cta") not in (None, th["value"]):
        bad.append(f"plan() says {plan['threads_per_cta']} threads, PTX .{th['from']} says {th['value']}")
    if s["threads"] is None or s["threads"] < MIN_THREADS:
        bad.append(f"threads per CTA {s['threads']} < {MIN_THREADS}")
    if s["registers"] and s["threads"] and s["registers"] * s["threads"] > REGS_PER_SM:
        bad.append(f"{s['registers']} registers x {s['threads']} threads > {REGS_PER_SM}: cannot launch")
    if plan.get("tmem_cols") and plan["tmem_cols"] > 512:
        bad.append(f"plan() tmem_cols {plan['tmem_cols']} > 512")
    for k in ("tcgen05_mma", "mma_blockscaled16", "mma_2cta", "tcgen05_cp", "tcgen05_ld", "tma_load", "tma_store", "bulk_copy", "mbarrier_init"):
        s[k] = sum(v[k] for v in ents.values())
    if s["mma_blockscaled16"] == 0:
        bad.append("no block-scaled tcgen05.mma with 16-element blocks (kind::mxf4nvf4 + scale_vec::4X/block16) in the PTX")
    elif s["mma_blockscaled16"] != s["tcgen05_mma"]:
        bad.append(f"{s['tcgen05_mma'] - s['mma_blockscaled16']} tcgen05.mma are not block-scaled NVFP4 with 16-element blocks")
    return bad


def _emu_launch():
    """harness.capture, for its cache folder and source digests (run as a script, the repository root is not on
    sys.path)."""
    if str(REPO) not in sys.path:
        sys.path.append(str(REPO))
    from harness import capture

    return capture


def cache_dir(cfg, submission: Path, tools: dict) -> Path:
    """Where this config's compile record lives in the cache: a folder named by a digest of all the compile reads."""
    launch = _emu_launch()
    submission = Path(submission).resolve()
    # the worker's sys.path: the submission's folder, this folder (the script's), then $PYTHONPATH
    search = [submission.parent, Path(__file__).resolve().parent] + \
        [Path(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    versions = {}
    for dist in ("nvidia-cutlass-dsl", "apache-tvm-ffi", "torch"):
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            versions[dist] = None
    key = {"sources": launch.source_digest(submission, search), "config": [type(cfg).__name__] +
           sorted((f.name, repr(getattr(cfg, f.name))) for f in dataclasses.fields(cfg)),
           "versions": versions, "python": sys.version, "preflight": hashlib.sha256(Path(__file__).read_bytes()).hexdigest(),
           "tools": {n: t and [t["path"], t["version"]] for n, t in sorted(tools.items())},
           "env": sorted((k, v) for k, v in os.environ.items() if k.startswith("CUTE_DSL_") and k not in ENV_DUMP)}
    digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:24]
    return launch.cache_root() / "preflight" / digest


def _store(cache: Path, rec: dict, dump: Path) -> None:
    """Write a clean compile's record and artifacts into the cache (atomically: a concurrent writer's copy wins)."""
    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=cache.name + ".tmp.", dir=cache.parent))
    shutil.copytree(dump, tmp / "dump")
    (tmp / "record.json").write_text(json.dumps(rec))
    try:
        os.replace(tmp, cache)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)


def run_config(i: int, cfg, args, tmp: Path, tools: dict) -> dict:
    cache = None if getattr(args, "no_cache", False) else cache_dir(cfg, args.submission, tools)
    if cache is not None and (cache / "record.json").is_file():
        rec = json.loads((cache / "record.json").read_text())
        rec["cached"] = str(cache)
        return _finish(rec, cfg, args, cache / "dump")
    d = tmp / f"cfg{i}"
    dump = d / "dump"
    dump.mkdir(parents=True)
    (d / "config.pkl").write_bytes(pickle.dumps(cfg))
    env = dict(os.environ, CUTE_DSL_ARCH="sm_100a", CUTE_DSL_KEEP_PTX="1", CUTE_DSL_KEEP_CUBIN="1",
               CUTE_DSL_KEEP="ptx,cubin", CUTE_DSL_DUMP_DIR=str(dump),
               # a file-cache hit would skip the compile and dump nothing
               CUTE_DSL_DISABLE_FILE_CACHING="1")
    t0 = time.time()
    try:
        p = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", str(args.submission),
                            str(d / "config.pkl"), str(d / "result.json"), str(dump)],
                           env=env, capture_output=True, text=True, timeout=args.timeout)
        log = (p.stdout + p.stderr)[-1500:]
    except subprocess.TimeoutExpired:
        log = f"timed out after {args.timeout}s"
    rec = {"status": "compile error", "error": f"worker produced no result: {log}"}
    if (d / "result.json").exists():
        rec = json.loads((d / "result.json").read_text())
    rec["wall_s"] = round(time.time() - t0, 2)
    rec["artifacts"] = analyze_artifacts(dump, tools) if rec["status"].startswith("compiled") else {}
    if cache is not None and rec["status"].startswith("compiled") and not rec["artifacts"]["tool_errors"]:
        _store(cache, rec, dump)
    return _finish(rec, cfg, args, dump)


def _finish(rec: dict, cfg, args, dump: Path) -> dict:
    if args.keep:
        keep = Path(args.keep) / cfg.name
        shutil.copytree(dump, keep, dirs_exist_ok=True)
        rec["artifact_dir"] = str(keep)
    progress = getattr(args, "progress", None)  # (label, counter, total): one line per finished config
    if progress:
        label, counter, total = progress
        took = f"cached, compiled in {rec['wall_s']} s" if rec.get("cached") else f"{rec['wall_s']} s"
        with PROGRESS_LOCK:  # configs finish in threads (tools/tune.py --dry-run): one whole line at a time
            print(f"{label}: {next(counter)}/{total} {cfg.name}: {rec['status']} ({took})", file=sys.stderr, flush=True)
    return rec


def fmt_table(rows: list[dict]) -> str:
    """One row per config; "used by" comes last and is printed whole (it can name many shapes)."""
    width = max([len(r["name"]) for r in rows] + [6])
    cols = [("config", width), ("result", 6), ("regs", 4), ("spill B", 7), ("smem B", 6), ("bars", 4), ("thr", 3),
            ("mma bs16/all", 12), ("2cta", 4), ("cp", 3), ("ld", 3), ("tma", 4), ("r2ur m/t", 8), ("s", 5),
            ("used by", 0)]
    out = ["  ".join(n.ljust(w) for n, w in cols).rstrip()]
    for r in rows:
        s = r.get("summary", {})
        moves = s.get("mainloop_uniform_moves")
        r2ur = f"{moves.get('mma', '-')}/{moves.get('tma', '-')}" if moves else None
        vals = [r["name"], "ok" if r["ok"] else "FAIL",
                s.get("registers"), s.get("spill_bytes"), s.get("smem_total"), s.get("barriers"), s.get("threads"),
                f"{s.get('mma_blockscaled16', '-')}/{s.get('tcgen05_mma', '-')}", s.get("mma_2cta"), s.get("tcgen05_cp"), s.get("tcgen05_ld"),
                s.get("tma_load"), r2ur, "cache" if r.get("cached") else r.get("wall_s"), ", ".join(r["roles"])]
        out.append("  ".join(str("-" if v is None else v).ljust(w) for v, (_, w) in zip(vals, cols)).rstrip())
    return "\n".join(out)


def preflight(args) -> dict:
    t0 = time.time()
    os.environ["CUTE_DSL_ARCH"] = "sm_100a"  # before the submission imports cutlass
    tools = {n: find_tool(n) for n in ("ptxas", "cuobjdump", "nvdisasm")}
    report = {"label": "compiled", "dsl_label": args.dsl_label or f"nvidia-cutlass-dsl {dsl_version()}",
              "dsl_version": dsl_version(), "python": sys.version.split()[0], "submission": str(args.submission),
              "tools": tools, "jobs": args.jobs, "quick": args.quick, "problems": [], "configs": []}
    report["lint"] = lint_source(Path(args.submission).read_text(), str(args.submission))
    report["problems"] += [f"rule: {p}" for p in report["lint"]]
    if Path(args.submission).resolve() == (REPO / "submission.py").resolve():
        # nvfp4_gemm's submittable file: the same rules under its own header, and generated from this one
        report["lint_gemm"] = lint_gemm_submission()
        report["problems"] += [f"rule: nvfp4_gemm/submission.py: {p}" for p in report["lint_gemm"]]
    try:
        sub = load_submission(Path(args.submission))
        capacity = getattr(sub, "SMEM_CAPACITY", SMEM_CAPACITY)
        shapes = load_shapes(Path(args.task))
        gemm_shapes = load_shapes(GEMM_TASK) if GEMM_TASK.exists() and not args.dual_only else None
        configs, roles, shape_problems = collect_configs(sub, shapes, args.quick, gemm_shapes)
        report["problems"] += shape_problems
    except Exception as e:
        report["problems"].append(f"cannot import submission / read task.yml: {type(e).__name__}: {e}")
        configs, roles, capacity = [], {}, SMEM_CAPACITY
    args.progress = ("preflight", itertools.count(1), len(configs))
    print(f"preflight: compiling {len(configs)} configs for sm_100a, {args.jobs} at a time (a line per config as it "
          "finishes; the table comes at the end)", file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(prefix="preflight_") as tmp, ThreadPoolExecutor(args.jobs) as pool:
        futs = [pool.submit(run_config, i, c, args, Path(tmp), tools) for i, c in enumerate(configs)]
        for cfg, fut in zip(configs, futs):
            rec = fut.result()
            rec.update(name=cfg.name, config=repr(cfg), roles=roles[cfg])
            rec["problems"] = judge(rec, capacity)
            rec["ok"] = not rec["problems"]
            report["configs"].append(rec)
            report["problems"] += [f"{cfg.name}: {p}" for p in rec["problems"]]
    report["tool_errors"] = sorted({e for r in report["configs"] for e in r.get("artifacts", {}).get("tool_errors", [])})
    report["ok"] = not report["problems"] and bool(configs)
    report["wall_s"] = round(time.time() - t0, 1)
    return report


def print_report(rep: dict) -> None:
    print(f"preflight ({rep['dsl_label']}, python {rep['python']}, sm_100a cross-compile, {rep['jobs']} jobs, "
          f"{rep['wall_s']} s) -- all numbers are compiled, not measured")
    for n, t in rep["tools"].items():
        print(f"  {n}: " + (f"{t['path']} ({t['version']}, from {t['origin']})" if t else "not found"))
    print(fmt_table(rep["configs"]))
    print("  regs: the DSL's cubin (cuobjdump), else ptxas -v; spill: ptxas -v on the PTX; smem = static (cubin) + plan() dynamic;"
          " thr from PTX .reqntid;\n  mma/2cta/cp/ld/tma: static PTX counts of tcgen05.mma (block-scaled 16-element / all; cta_group::2),"
          " tcgen05.cp, tcgen05.ld, TMA tensor loads;\n  r2ur m/t: R2UR + S2UR (moves into uniform registers) inside the MMA / TMA"
          " warp's k-loop in the SASS (reported, not judged); s: wall seconds of the config's compile (cache: taken from"
          " the compile cache, --no-cache to redo)")
    for e in rep.get("tool_errors", []):
        print(f"  tool warning: {e}")
    print("lint: " + ("ok" if not rep["lint"] else f"{len(rep['lint'])} rule(s) broken")
          + ("" if "lint_gemm" not in rep else "; nvfp4_gemm/submission.py: " + (
              "ok" if not rep["lint_gemm"] else f"{len(rep['lint_gemm'])} rule(s) broken")))
    for p in rep["problems"]:
        print(f"  FAIL {p}")
    print("PREFLIGHT " + ("PASSED" if rep["ok"] else "FAILED"))


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        worker(*map(Path, argv[1:5]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--submission", default=str(REPO / "submission.py"))
    ap.add_argument("--task", default=str(REPO / "task.yml"))
    ap.add_argument("--quick", action="store_true", help="only the configs task.yml's shapes use (and nvfp4_gemm/task.yml's)")
    ap.add_argument("--dual-only", action="store_true", help="leave out nvfp4_gemm's configs (GEMM_TUNE_SPACE, its shapes)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json", default=str(REPO / "build" / "preflight.json"))
    ap.add_argument("--dsl", default=None, metavar="VERSION",
                    help="compile with nvidia-cutlass-dsl VERSION (installed in .venv/dsl by `bash tools/setup.sh --dsl "
                         "VERSION`; harness.dsl); default: the venv's own release")
    ap.add_argument("--dsl-label", default=None, help="label recorded in the report (default: the DSL version compiled with)")
    ap.add_argument("--keep", default=None, help="copy each config's .ptx/.cubin into DIR/<config name>/")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per config compile")
    ap.add_argument("--no-cache", action="store_true", help="compile every config even if the compile cache holds it")
    args = ap.parse_args(argv)
    if args.dsl and dsl_version() != args.dsl:
        # The release is chosen by PYTHONPATH before anything imports it: the same command again, in its environment
        # (there dsl_version() is args.dsl, so this happens once)
        _emu_launch()
        from harness import dsl as dsl_release

        os.execve(sys.executable, [sys.executable, str(Path(__file__).resolve()), *argv],
                  dsl_release.environment(args.dsl))
    args.submission = Path(args.submission).resolve()
    rep = preflight(args)
    print_report(rep)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(rep, indent=1, default=str))
    print(f"wrote {args.json}")
    return 0 if rep["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
