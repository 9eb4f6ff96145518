"""What the machine executes: the SASS of the launch's cubin, read where the PTX and the SASS disagree on how often an
asynchronous copy issues.

Why. PTX says each thread that executes cp.async.bulk{.tensor} / cp.async.bulk.prefetch{.tensor} issues its own
copy (PTX ISA 9.7.9.25.4 / 9.7.9.25.5: the instructions are per thread; only .sync.aligned forms are warp-wide).
The functional emulator follows the PTX: a copy executed by 32 lanes of a warp is 32 asynchronous operations. The
machine runs what ptxas made of it, and ptxas puts the TMA family on the uniform datapath (one instruction per warp,
operands in uniform registers: UTMASTG, UTMALDG, UTMAPF, UBLKCP, UBLKPF). What it makes of a whole-warp PTX copy
depends on the copy (ptxas 13.5.37 -arch=sm_100a, hand-written PTX; tests/emu/test_timing_sass.py compiles them):
- a store (cp.async.bulk.tensor.Nd.global.shared::cta, UTMASTG) or a prefetch (UTMAPF, UBLKPF) whose operands
  are warp-uniform: ONE instruction, no loop. The same PTX under elect.sync compiles to the identical SASS: ptxas
  drops the elect, i.e. it treats 32 identical stores as one. With lane-dependent operands: a loop of R2UR (with a
  predicate result) + the copy + BRA.U.ANY, one trip per distinct value the active lanes hold;
- a load (UTMALDG, UBLKCP.S.G: it signals an mbarrier with complete_tx, so 32 copies are not one): a loop of
  ELECT + the copy + BRA.U.ANY, one trip per active lane. The PTX's per-lane charge is what the machine does.
arseni_ivanov's epilogue (cute.copy(tma_atom_c, ...) under `if warp_idx == ...`, no elect in the PTX) is the first
case: his three kernels' cubins (CuTe DSL 4.8.1) hold 2 / 4 / 4 UTMASTG for 2 / 4 / 4 PTX stores, each straight-line on
uniform registers, so each whole-warp PTX store is one store on the machine.

The rule the timed engine applies (emu.timing.engine, IssueMerge). For each copy kind, the SASS instances of that kind
are classified: "warp" (no loop around it: issued once per warp-execution), "per_value" (an R2UR-uniformising loop:
once per distinct operand value), "per_lane" (an ELECT loop: once per active lane). When the cubin holds instances of a
kind and none is "per_lane", the active lanes of one warp-execution of a PTX instruction of that kind whose operands
(every operand's value: tensor map, coordinates, shared and global addresses, mbarrier, cache policy, masks) are
identical are charged once: the first lane's operation uses what its kind uses (a store: shared memory, the store
path, L2; a prefetch: HBM), the others complete with it and use nothing. Lanes with different operands are charged one
each (what the "per_value" loop issues). A kind whose SASS is "warp" under an elect (the usual elected TMA load) is
merged too, which changes nothing: one lane executes it. How a loop issues is read from its shape (ELECT, or R2UR with
a predicate result, then BRA.U.ANY back): NVIDIA does not document SASS semantics; the shapes are those ptxas 13.5
emits for the PTX cases above. Otherwise, and wherever no cubin or no disassembler is available, the PTX's per-lane charge
stands and the timed result says why (TimedCall.corrections). The PTX is not mapped instruction by instruction to the
SASS (the DSL's cubins carry no line table): the rule is per kind, and the counts of both sides are reported.
What a warp computes never changes: every lane's operation still runs (32 identical stores write C 32 times).
cp.async.bulk.global.shared (the bulk store, UBLKCP.G.S) is classified but not emulated (emu.ops_async has no handler).

Also read and reported, not charged: the R2UR / S2UR (moves from vector or special registers to uniform registers,
which wait for the vector register's value) in the innermost loop around each tcgen05.mma (UTC*MMA) and TMA load, i.e.
the MMA and producer k-loops (docs/design.md "Calibration and error band", item 3: codegen the PTX does not show, R2UR
among it, moved a public B200 point by -8.8% that the timed emulator did not see).

The tools: nvdisasm (on a cubin, or one a fatbinary holds uncompressed) else cuobjdump -sass (any module image), as
found by find_tool: $NVDISASM / $CUOBJDUMP, the pip wheels (nvidia-cuda-nvdisasm, nvidia-cuda-cuobjdump, the
nvidia-cuda-nvcc cu13 wheel) in this interpreter's environment, PATH, /usr/local/cuda/bin.
"""
from __future__ import annotations

import glob
import hashlib
import os
import re
import shutil
import subprocess
import sysconfig
import tempfile
from dataclasses import dataclass, field
from functools import lru_cache

from ..cubin import device_elves, has_function

# SASS opcode (its first dotted parts) -> the copy kind; the same kinds as ptx_kind below.
SASS_KINDS = {"UTMASTG": "tma_store", "UTMALDG": "tma_load", "UTMAPF": "tma_prefetch", "UBLKCP.S.G": "bulk_load",
              "UBLKCP.G.S": "bulk_store", "UBLKPF": "bulk_prefetch"}
KIND_NAMES = {"tma_store": "TMA store (cp.async.bulk.tensor global<-shared)",
              "tma_load": "TMA load (cp.async.bulk.tensor shared<-global)",
              "tma_prefetch": "TMA L2 prefetch (cp.async.bulk.prefetch.tensor)",
              "bulk_load": "bulk copy (cp.async.bulk shared<-global)",
              "bulk_store": "bulk store (cp.async.bulk global<-shared)",
              "bulk_prefetch": "bulk L2 prefetch (cp.async.bulk.prefetch)"}
MMA_OPCODES = ("UTCQMMA", "UTCHMMA", "UTCOMMA", "UTCIMMA", "UTCMMA")
SMALL_LOOP = 16  # a loop ptxas wraps around one copy (uniformising / per-lane) is a handful of instructions


def ptx_kind(ins) -> str | None:
    """The copy kind of a PTX instruction (None: not a copy the SASS rule is about)."""
    p = ins.parts
    if len(p) < 4 or p[0] != "cp" or p[1] != "async" or p[2] != "bulk":
        return None
    if p[3] == "tensor":
        return "tma_store" if len(p) > 5 and p[5] == "global" else "tma_load"
    if p[3] == "prefetch":
        return "tma_prefetch" if "tensor" in p else "bulk_prefetch"
    if p[3].startswith("shared"):
        return "bulk_load"
    if p[3] == "global":
        return "bulk_store"
    return None  # commit_group, wait_group


# ------------------------------------------------------------------ tools
def find_tool(name: str) -> dict | None:
    """{"path", "origin", "version"} of a CUDA binary tool (nvdisasm, cuobjdump, ptxas), or None: $NAME (upper case),
    then the pip wheels in this interpreter's environment (nvidia-cuda-nvcc, -cuobjdump, -nvdisasm: pinned by the
    project, so the same tool in CI and here), then PATH, then /usr/local/cuda. Looked up once per (name, $NAME)."""
    return _find_tool(name, os.environ.get(name.upper()))


@lru_cache(maxsize=None)
def _find_tool(name: str, override: str | None) -> dict | None:
    cands = []
    if override:
        cands.append((override, f"${name.upper()}"))
    for sp in sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}):
        for p in sorted(glob.glob(os.path.join(sp, "nvidia", "*", "bin", name))):
            cands.append((p, "pip wheel"))
    if shutil.which(name):
        cands.append((shutil.which(name), "PATH"))
    cands.append((f"/usr/local/cuda/bin/{name}", "/usr/local/cuda"))
    for path, origin in cands:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            try:
                out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout
            except (OSError, subprocess.SubprocessError):
                continue
            m = re.search(r"V(\d+\.\d+\.\d+)", out)
            return {"path": path, "origin": origin, "version": m.group(1) if m else "?"}
    return None


# ------------------------------------------------------------------ the listing
@dataclass
class SassIns:
    addr: int
    guard: str  # "" or the predicate, e.g. "@P0", "@!UP1"
    opcode: str  # dotted, e.g. "UTMASTG.3D", "BRA.U.ANY"
    operands: str
    target: int | None = None  # a branch's target address


INS_RE = re.compile(r"^\s*/\*([0-9a-fA-F]{4,})\*/\s+(.*?)\s*;")
LABEL_RE = re.compile(r"^\s*(\.L\w+):")
FUNC_NVDISASM = re.compile(r"^\s*\.section\s+\.text\.([^,\s]+)")
FUNC_CUOBJDUMP = re.compile(r"^\s*Function\s*:\s*(\S+)")
TARGET_RE = re.compile(r"`\((\.L\w+)\)|\b0x([0-9a-fA-F]+)\b")


def parse_listing(text: str) -> dict:
    """{function name: [SassIns]} of an nvdisasm -c or cuobjdump -sass listing (branch targets resolved: nvdisasm
    names them by label, cuobjdump by address)."""
    funcs, labels, cur, pending = {}, {}, None, []
    for line in text.splitlines():
        m = FUNC_NVDISASM.match(line) or FUNC_CUOBJDUMP.match(line)
        if m:
            cur, pending = funcs.setdefault(m.group(1), []), []
            labels.setdefault(m.group(1), {})
            name = m.group(1)
            continue
        m = LABEL_RE.match(line)
        if m and cur is not None:
            pending.append(m.group(1))
            continue
        m = INS_RE.match(line)
        if not m or cur is None:
            continue
        addr, body = int(m.group(1), 16), m.group(2).strip()
        for lab in pending:
            labels[name][lab] = addr
        pending = []
        guard = ""
        if body.startswith("@"):
            guard, _, body = body.partition(" ")
            body = body.strip()
        opcode, _, operands = body.partition(" ")
        cur.append(SassIns(addr, guard, opcode, operands.strip()))
    for name, ins in funcs.items():
        for i in ins:
            if i.opcode.split(".")[0] in ("BRA", "BRX", "JMP") and i.operands:
                t = TARGET_RE.search(i.operands)
                if t:
                    i.target = labels[name].get(t.group(1)) if t.group(1) else int(t.group(2), 16)
    return funcs


def kind_of(opcode: str) -> str | None:
    parts = opcode.split(".")
    return SASS_KINDS.get(parts[0]) or SASS_KINDS.get(".".join(parts[:3]))


def loops(ins: list) -> list[tuple[int, int, int]]:
    """(first index, branch index, branch address) of every backward branch's loop body."""
    at = {x.addr: i for i, x in enumerate(ins)}
    out = []
    for j, x in enumerate(ins):
        if x.target is not None and x.target <= x.addr and x.target in at:
            out.append((at[x.target], j, x.addr))
    return out


def innermost(body_loops: list, i: int):
    inside = [lp for lp in body_loops if lp[0] <= i <= lp[1]]
    return min(inside, key=lambda lp: lp[1] - lp[0]) if inside else None


def issue_mode(ins: list, body_loops: list, i: int) -> str:
    """How often the machine issues copy instruction ins[i] per warp-execution (see the module docstring)."""
    lp = innermost([x for x in body_loops if x[1] - x[0] <= SMALL_LOOP], i)
    if lp is None:
        return "warp"
    body = ins[lp[0]:lp[1] + 1]
    if any(x.opcode.startswith("ELECT") for x in body):
        return "per_lane"
    if any(x.opcode.startswith("R2UR") and (x.opcode.startswith("R2UR.OR") or re.match(r"U?P\d|UPT", x.operands))
           for x in body):
        return "per_value"
    return "warp"  # a small loop of the program's own: one issue per trip, as the PTX counts it


def hot_loops(ins: list) -> list[dict]:
    """The innermost loop around each MMA and each TMA load, with its R2UR / S2UR counts."""
    body_loops = loops(ins)
    seen, out = set(), []
    for i, x in enumerate(ins):
        role = "MMA" if x.opcode.split(".")[0] in MMA_OPCODES else "TMA load" if kind_of(x.opcode) in (
            "tma_load", "bulk_load") else None
        if role is None:
            continue
        lp = innermost(body_loops, i)
        if lp is None or (lp, role) in seen:
            continue
        seen.add((lp, role))
        body = ins[lp[0]:lp[1] + 1]
        out.append({"role": role, "from": f"{ins[lp[0]].addr:#06x}", "to": f"{lp[2]:#06x}", "instructions": len(body),
                    "R2UR": sum(b.opcode.startswith("R2UR") for b in body),
                    "S2UR": sum(b.opcode.startswith("S2UR") for b in body)})
    return out


# ------------------------------------------------------------------ the launch's cubin
@dataclass
class IssueRules:
    """What the SASS says about the launch: `merge` (the copy kinds whose identical lanes issue once), `corrections`
    (one line per decision, fallbacks included: never silent) and `report` (counts, per-kind modes, hot loops)."""

    merge: frozenset = frozenset()
    corrections: list = field(default_factory=list)
    report: dict = field(default_factory=dict)


def disassemble(image: bytes, kernel_name: str) -> tuple[list | None, str, str]:
    """(the kernel's SASS instructions or None, the tool that read them, why not)."""
    elves = [e for e in device_elves(image) if has_function(e, kernel_name)]
    tools = ([("nvdisasm", ["-c"], elves[0])] if elves else []) + [("cuobjdump", ["-sass"], image)]
    why = []
    for name, args, blob in tools:
        tool = find_tool(name)
        if tool is None:
            why.append(f"no {name}")
            continue
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "module.bin")
            with open(path, "wb") as f:
                f.write(blob)
            try:
                p = subprocess.run([tool["path"], *args, path], capture_output=True, text=True, timeout=120)
            except (OSError, subprocess.SubprocessError) as e:
                why.append(f"{name} failed: {e}")
                continue
        funcs = parse_listing(p.stdout)
        found = funcs.get(kernel_name) or (next(iter(funcs.values())) if len(funcs) == 1 else None)
        if p.returncode or not found:
            why.append(f"{name} rc {p.returncode}, {len(funcs)} functions, kernel {kernel_name[:60]} not among them")
            continue
        return found, f"{name} {tool['version']} ({tool['origin']})", ""
    return None, "", "; ".join(why)


_CACHE: dict = {}


def issue_rules(cap, kernel=None) -> IssueRules:
    """The SASS rule for this launch (see the module docstring). `kernel`: the parsed PTX (for its counts)."""
    image = getattr(cap, "cubin", b"") or b""
    ptx_counts = {}
    for ins in (kernel.instrs if kernel is not None else ()):
        k = ptx_kind(ins)
        if k:
            ptx_counts[k] = ptx_counts.get(k, 0) + 1
    if not image:
        return IssueRules(corrections=["PTX charge (per lane) for every copy: the launch record carries no cubin, so "
                                       "no SASS was read"], report={"status": "no cubin", "ptx": ptx_counts})
    key = (hashlib.sha256(image).hexdigest(), cap.kernel_name)
    if key not in _CACHE:
        try:
            _CACHE[key] = disassemble(image, cap.kernel_name)
        except Exception as e:  # noqa: BLE001  a listing this parser does not know: the PTX charge, said so
            _CACHE[key] = (None, "", f"{type(e).__name__}: {e}")
    ins, tool, why = _CACHE[key]
    if ins is None:
        return IssueRules(corrections=[f"PTX charge (per lane) for every copy: the SASS could not be read ({why})"],
                          report={"status": f"unreadable: {why}", "ptx": ptx_counts})
    body_loops = loops(ins)
    kinds = {}
    for i, x in enumerate(ins):
        k = kind_of(x.opcode)
        if k:
            modes = kinds.setdefault(k, {"warp": 0, "per_value": 0, "per_lane": 0})
            modes[issue_mode(ins, body_loops, i)] += 1
    merge, corrections = set(), []
    for k in sorted(set(kinds) | set(ptx_counts)):
        modes = kinds.get(k, {})
        n_sass = sum(modes.values())
        seen = ", ".join(f"{v} {m}" for m, v in modes.items() if v) or "none"
        counts = f"{ptx_counts.get(k, 0)} in the PTX, {n_sass} in the SASS ({seen})"
        if n_sass and not modes.get("per_lane"):
            merge.add(k)
            corrections.append(f"{KIND_NAMES[k]}: identical lanes of a warp issue once ({counts})")
        else:
            corrections.append(f"{KIND_NAMES[k]}: PTX charge, per lane ({counts})")
    loops_report = hot_loops(ins)
    report = {"status": "read", "tool": tool, "instructions": len(ins), "ptx": ptx_counts,
              "sass": {k: dict(v) for k, v in kinds.items()}, "merge": sorted(merge), "hot_loops": loops_report,
              "R2UR": sum(x.opcode.startswith("R2UR") for x in ins),
              "S2UR": sum(x.opcode.startswith("S2UR") for x in ins)}
    for lp in loops_report:
        corrections.append(f"reported, not charged: {lp['R2UR']} R2UR and {lp['S2UR']} S2UR in the {lp['role']} loop "
                           f"({lp['instructions']} SASS instructions at {lp['from']}-{lp['to']})")
    return IssueRules(frozenset(merge), corrections, report)
