"""Differential probe of the kernel's non-tcgen05, non-TMA PTX forms: a Hopper GPU against the emulator.

The module tests/data/emu_alu_probe.ptx (hand-written, .target sm_90a) holds four kernels; see its header.
The same parameter bytes, the same inputs and the same launch shapes go to both sides.

    python -m calibration.alu --gpu OUT.npz          # on a CUDA machine (ctypes on libcuda + CuPy memory)
    python -m calibration.alu --emulate FIXTURE.npz [--seed S ...]   # here: emulator vs the GPU's fixture

The fixture (tests/data/emu_alu_probe_h200.npz) holds the inputs, every kernel's raw output words from the GPU
and the card's name; tests/calibration/test_alu.py runs the emulator on it with several scheduler seeds.
"""
from __future__ import annotations

import argparse
import re
import struct
import sys
import types
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
PTX_PATH = REPO / "tests" / "data" / "emu_alu_probe.ptx"
FIXTURE = REPO / "tests" / "data" / "emu_alu_probe_h200.npz"

# ----------------------------------------------------------------------------------------------- inputs

ALU_GRID = (2, 2, 2)  # 8 CTAs of one warp: %ctaid.{x,y,z} and %nctaid.{x,y,z} all vary
ALU_BLOCK = (32, 1, 1)
ALU_THREADS = 256
ALU_SLOTS = 96  # u32 words a thread (384 bytes)
WARP_BLOCK = (192, 1, 1)
MBAR_BLOCK = (64, 1, 1)
CLUSTER_GRID = (4, 2, 2)
CLUSTER_BLOCK = (64, 1, 1)
PARAM_BYTES = bytes([0xFF, 0x80, 0x01, 0xFE, 0x78, 0x56, 0x34, 0x92])  # p_bytes: 0xFF / 0x80 test zero extension
PARAM_DWORD = 0x8123_4567_89AB_CDEF

INT_EDGES = [0, 1, 2, 3, 0xFFFFFFFF, 0x80000000, 0x7FFFFFFF, 0x80000001, 0xFFFFFFFE, 0xFFFF, 0x10000, 0x8000,
             0x7FFF, 31, 32, 0x12345678]
SHIFTS = [0, 1, 2, 3, 4, 7, 8, 15, 16, 17, 30, 31, 32, 33, 34, 47, 48, 62, 63, 64, 65, 66, 70, 100, 127, 128, 255,
          256, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0xFFFFFFE0]


def f32_bits(values) -> np.ndarray:
    return np.asarray(values, np.float32).view(np.uint32)


def make_inputs(seed: int = 20260521) -> dict:
    """The fixed input set: integer edge-value pairs first, then random words; float edge cases, then random."""
    rng = np.random.default_rng(seed)
    n = ALU_THREADS
    pairs = [(x, y) for x in INT_EDGES for y in INT_EDGES[:12]]  # 192 edge pairs
    a = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    b = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    a[:len(pairs)] = [p[0] for p in pairs]
    b[:len(pairs)] = [p[1] for p in pairs]
    c = np.array([SHIFTS[i % len(SHIFTS)] for i in range(n)], np.uint32)
    c[200:] = rng.integers(0, 1 << 32, n - 200, dtype=np.uint64).astype(np.uint32)
    # f: ex2 inputs (and the first operand of add/mul/cvt)
    f_edges = np.concatenate([
        f32_bits([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, 127.0, 127.5, 127.99, 128.0, 128.5, 129.0, 1000.0, -126.0,
                  -126.5, -127.0, -140.0, -149.0, -149.5, -150.0, -151.0, -1000.0, 1e-30, -1e-30, 1e-7, -1e-7,
                  0.1, -0.1, 65504.0, 65520.0, -65520.0, 6e-8, 3e-8, 1e-5, -2.9802322e-08]),
        np.array([0x00000001, 0x80000001, 0x007FFFFF, 0x807FFFFF, 0x00800000, 0x80800000, 0x7F800000, 0xFF800000,
                  0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FFFFFFF, 0x7F7FFFFF, 0xFF7FFFFF], np.uint32),
    ])
    f_rand = f32_bits(rng.uniform(-160.0, 160.0, 120).astype(np.float32))
    f_small = f32_bits((rng.uniform(-4.0, 4.0, 50)).astype(np.float32))
    f = np.concatenate([f_edges, f_rand, f_small])
    f = np.concatenate([f, rng.integers(0, 1 << 32, n - f.size, dtype=np.uint64).astype(np.uint32)])[:n]
    # g: rcp inputs (and the second operand of add/mul/cvt)
    g_edges = np.concatenate([
        f32_bits([0.0, -0.0, 1.0, -1.0, 3.0, -3.0, 0.1, 7.0, 1e-38, -1e-38, 2.0 ** 126, -(2.0 ** 126),
                  1.5 * 2.0 ** 126, 2.0 ** 127, -(2.0 ** 127), 2.0 ** -126, 2.0 ** -127, 65504.0, 65519.99,
                  65520.0, 1e5, -1e5, 6.1e-5, 6.0e-8, 2.0 ** -25, 2.0 ** -24, 1.0 + 2.0 ** -11, 1.0 + 2.0 ** -12,
                  1.0 + 3 * 2.0 ** -12]),
        np.array([0x00000001, 0x80000001, 0x007FFFFF, 0x807FFFFF, 0x00800000, 0x80800000, 0x00800001, 0x7E800000,
                  0x7E800001, 0x7EFFFFFF, 0x7F000000, 0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000,
                  0xFFC00000, 0x7F800001, 0x7FFFFFFF, 0x3F800001, 0x3FFFFFFF, 0x3F7FFFFF], np.uint32),
    ])
    mant = rng.integers(0, 1 << 23, 150, dtype=np.uint64).astype(np.uint32)
    expo = rng.integers(1, 255, 150, dtype=np.uint64).astype(np.uint32)
    sign = rng.integers(0, 2, 150, dtype=np.uint64).astype(np.uint32)
    g_rand = (sign << 31) | (expo << 23) | mant
    g = np.concatenate([g_edges, g_rand, f32_bits(rng.uniform(-10, 10, n).astype(np.float32))])[:n]
    warp_in = rng.integers(0, 1 << 32, WARP_BLOCK[0], dtype=np.uint64).astype(np.uint32)
    return {"a": a, "b": b, "c": c, "f": f.astype(np.uint32), "g": g.astype(np.uint32), "warp_in": warp_in}


# ----------------------------------------------------------------------------------------------- kernels

def kernel_texts(ptx: str) -> dict:
    """name -> a module text with that one .entry (the header before the first entry is shared)."""
    starts = [m.start() for m in re.finditer(r"^\.visible \.entry ", ptx, flags=re.M)]
    header = ptx[:starts[0]]
    out = {}
    for i, s in enumerate(starts):
        body = ptx[s:starts[i + 1] if i + 1 < len(starts) else len(ptx)]
        name = re.match(r"\.visible \.entry (\w+)", body).group(1)
        out[name] = header + body
    return out


def launches(inputs: dict) -> list:
    """Per kernel: (name, grid, block, cluster, dynamic smem, [(param kind, value)], output words)."""
    return [
        ("probe_alu", ALU_GRID, ALU_BLOCK, (1, 1, 1), 0,
         [("out", None), ("arr", inputs["a"]), ("arr", inputs["b"]), ("arr", inputs["c"]), ("arr", inputs["f"]),
          ("arr", inputs["g"]), ("raw", PARAM_BYTES), ("raw", struct.pack("<Q", PARAM_DWORD))],
         ALU_THREADS * ALU_SLOTS),
        ("probe_warp", (1, 1, 1), WARP_BLOCK, (1, 1, 1), 1024, [("out", None), ("arr", inputs["warp_in"])],
         WARP_BLOCK[0] * 16),
        ("probe_mbar", (1, 1, 1), MBAR_BLOCK, (1, 1, 1), 1024, [("out", None)], 16),
        ("probe_cluster", CLUSTER_GRID, CLUSTER_BLOCK, (2, 1, 1), 1024, [("out", None)],
         int(np.prod(CLUSTER_GRID)) * CLUSTER_BLOCK[0] * 16),
    ]


SENTINEL = 0xDEADBEEF  # output words start as this on both sides


# ----------------------------------------------------------------------------------------------- GPU side

def run_gpu(out_path: str) -> None:
    import ctypes

    import cupy as cp

    cp.zeros(1)  # the primary context, current on this thread
    cuda = ctypes.CDLL("libcuda.so.1")
    name = cp.cuda.runtime.getDeviceProperties(0)["name"]
    name = name.decode() if isinstance(name, bytes) else name
    inputs = make_inputs()
    texts = kernel_texts(PTX_PATH.read_text())
    result = {f"in_{k}": v for k, v in inputs.items()}
    result["card"] = np.array(name)
    for kname, grid, block, cluster, smem, params, nwords in launches(inputs):
        mod = ctypes.c_void_p()
        log = ctypes.create_string_buffer(1 << 14)
        # CU_JIT_ERROR_LOG_BUFFER (5), CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES (6)
        opts = (ctypes.c_int * 2)(5, 6)
        vals = (ctypes.c_void_p * 2)(ctypes.cast(log, ctypes.c_void_p), ctypes.c_void_p(1 << 14))
        rc = cuda.cuModuleLoadDataEx(ctypes.byref(mod), ctypes.c_char_p(texts[kname].encode() + b"\0"), 2, opts, vals)
        if rc:
            raise RuntimeError(f"{kname}: cuModuleLoadDataEx rc {rc}: {log.value.decode(errors='replace')}")
        fn = ctypes.c_void_p()
        rc = cuda.cuModuleGetFunction(ctypes.byref(fn), mod, kname.encode())
        assert rc == 0, rc
        keep = []
        out = cp.full(nwords, SENTINEL, dtype=cp.uint32)
        raw_params = []
        for kind, value in params:
            if kind == "out":
                raw_params.append(struct.pack("<Q", int(out.data.ptr)))
            elif kind == "arr":
                d = cp.asarray(value)
                keep.append(d)
                raw_params.append(struct.pack("<Q", int(d.data.ptr)))
            else:
                raw_params.append(bytes(value))
        bufs = [ctypes.create_string_buffer(p, len(p)) for p in raw_params]
        argv = (ctypes.c_void_p * len(bufs))(*[ctypes.cast(b, ctypes.c_void_p) for b in bufs])
        rc = cuda.cuLaunchKernel(fn, ctypes.c_uint(grid[0]), ctypes.c_uint(grid[1]), ctypes.c_uint(grid[2]),
                                 ctypes.c_uint(block[0]), ctypes.c_uint(block[1]), ctypes.c_uint(block[2]),
                                 ctypes.c_uint(smem), ctypes.c_void_p(0), argv, ctypes.c_void_p(0))
        if rc:
            raise RuntimeError(f"{kname}: cuLaunchKernel rc {rc}")
        cp.cuda.Device(0).synchronize()
        result[f"out_{kname}"] = cp.asnumpy(out)
        print(f"{kname}: {nwords} words, {int((cp.asnumpy(out) == SENTINEL).sum())} untouched", flush=True)
        cuda.cuModuleUnload(mod)
    result["param_offsets"] = np.array([0, 8, 16, 24, 32, 40, 48, 56], np.int64)
    np.savez_compressed(out_path, **result)
    print(f"wrote {out_path} ({Path(out_path).stat().st_size} bytes) on {name}")


# ----------------------------------------------------------------------------------------------- emulator side

def run_emulator(inputs: dict, seed: int = 0, kernels=None) -> dict:
    """Every kernel of the probe in the emulator; name -> output words (uint32)."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from emu import ptx as ptx_mod
    from emu.machine import Machine
    from emu.state import GlobalMemory

    texts = kernel_texts(PTX_PATH.read_text())
    outs = {}
    for kname, grid, block, cluster, smem, params, nwords in launches(inputs):
        if kernels is not None and kname not in kernels:
            continue
        kernel = ptx_mod.parse_module(texts[kname])
        gmem = GlobalMemory()
        out_addr = gmem.alloc_array(np.full(nwords, SENTINEL, np.uint32))
        raw_params = []
        for kind, value in params:
            if kind == "out":
                raw_params.append(struct.pack("<Q", out_addr))
            elif kind == "arr":
                raw_params.append(struct.pack("<Q", gmem.alloc_array(np.ascontiguousarray(value, np.uint32))))
            else:
                raw_params.append(bytes(value))
        launch = types.SimpleNamespace(grid=grid, block=block, cluster=cluster, dynamic_smem=smem, params=raw_params)
        m = Machine(kernel, launch, gmem, seed=seed)
        m.run()
        outs[kname] = gmem.read(out_addr, nwords * 4).view(np.uint32).copy()
        outs[f"{kname}.param_base"] = m.param_base
    return outs


# ----------------------------------------------------------------------------------------------- comparison

# ALU slot map: name -> (first slot, words). Words of 64-bit results: low word first.
ALU = {
    "t": (0, 1), "tid.x": (1, 1), "ctaid.x": (2, 1), "ctaid.y": (3, 1), "ctaid.z": (4, 1), "nctaid.x": (5, 1),
    "nctaid.y": (6, 1), "nctaid.z": (7, 1),
    "add.s32": (8, 1), "sub.s32": (9, 1), "mul.lo.s32": (10, 1), "mul.hi.u32": (11, 1), "mul.wide.s32": (12, 2),
    "mul.wide.s32 imm": (14, 2), "shr.u32": (16, 1), "shr.s32": (17, 1), "shl.b32": (18, 1), "shl.b64": (19, 2),
    "shr.u32 imm": (21, 1), "shl.b32 imm": (22, 1), "shr.s32 imm": (23, 1), "and.b32": (24, 1), "or.b32": (25, 1),
    "xor.b32": (26, 1), "and.b32 imm": (27, 1), "add.s64": (28, 2), "mad.lo.s64": (30, 2), "or.b64 imm": (32, 2),
    "shl.b64 imm": (34, 2), "setp.ne.b32": (36, 1), "setp.eq.b32": (37, 1), "setp.gt.s32": (38, 1),
    "setp.lt.s32": (39, 1), "setp.le.s32": (40, 1), "setp.eq.b32 imm": (41, 1), "setp.gt.s32 imm": (42, 1),
    "setp.lt.s32 imm": (43, 1), "setp.ne.b16": (44, 1), "setp.ne.b16 imm": (45, 1), "and.pred": (46, 1),
    "or.pred": (47, 1), "not.pred": (48, 1), "mov.pred -1": (49, 1), "mov.pred 0": (50, 1), "mov.pred p": (51, 1),
    "selp.b32": (52, 1), "selp.b32 imm": (53, 1), "selp.b32 imm,reg": (54, 1), "cvt.u32.u16(cvt.u16.u32)": (55, 1),
    "and.b16": (56, 1), "and.b16 mov.b16": (57, 1), "cvt.u64.u32": (58, 2), "cvt.s64.s32": (60, 2),
    "cvt.u32.u64": (62, 1), "mov.b64 {_,hi}": (63, 1), "mov.b64 {lo,_}": (64, 1), "mov.b32 imm": (65, 1),
    "mov.u32": (66, 1), "add.f32": (67, 1), "mul.f32": (68, 1), "mul.f32 imm": (69, 1), "add.f32 imm": (70, 1),
    "ex2(f)": (71, 1), "rcp(g)": (72, 1), "ex2(g)": (73, 1), "rcp(f)": (74, 1), "cvt.rn.f16x2.f32 f,g": (75, 1),
    "cvt.rn.f16x2.f32 g,f": (76, 1), "ld.param.b8": (77, 1), "ld.param.v2.b8": (78, 2), "ld.param.b32": (80, 1),
    "ld.param.b64": (81, 2), "cvta.param p_bytes": (83, 2), "cvta.param p_dword": (85, 2),
    "st.global.v4.b32": (88, 4), "mad.lo.s32": (92, 1), "add.s32 imm": (93, 1), "ld.param.b8 0x80": (94, 1),
}
APPROX = {"ex2(f)": ("ex2", "f"), "ex2(g)": ("ex2", "g"), "rcp(g)": ("rcp", "g"), "rcp(f)": ("rcp", "f")}
ULP = {"ex2": 2, "rcp": 1}
F32_EXACT = ("add.f32", "mul.f32", "mul.f32 imm", "add.f32 imm", "cvt.rn.f16x2.f32 f,g", "cvt.rn.f16x2.f32 g,f")


def alu_rows(words: np.ndarray) -> np.ndarray:
    return words.reshape(ALU_THREADS, ALU_SLOTS)


def _field(rows, name):
    s, n = ALU[name]
    return rows[:, s:s + n]


def _ordered(bits: np.ndarray) -> np.ndarray:
    """f32 bits -> integers ordered like the floats (for ulp distances)."""
    b = bits.astype(np.int64)
    return np.where(b & 0x80000000, -(b & 0x7FFFFFFF), b)


def _is_nan32(bits):
    return ((bits & 0x7F800000) == 0x7F800000) & ((bits & 0x007FFFFF) != 0)


def _exact(op: str, x_bits: np.ndarray) -> np.ndarray:
    """The exact result in float64 of an ftz transcendental (denormal inputs flushed to signed zero)."""
    with np.errstate(all="ignore"):
        x = x_bits.view(np.float32).astype(np.float64)
        denorm = (x_bits & 0x7F800000) == 0
        x = np.where(denorm, np.copysign(0.0, x), x)
        return np.exp2(x) if op == "ex2" else 1.0 / x


def compare_alu(gpu: np.ndarray, emu: np.ndarray, inputs: dict, names=None) -> list:
    """Mismatches between GPU and emulator rows of probe_alu, as readable strings (empty: all agree).

    Every field bit-exact (NaN payloads too: the GPU returns the canonical NaN), except ex2/rcp.approx: there
    zeros, infinities and NaNs exact, other results within ULP[op] units in the last place of the GPU's."""
    g, e = alu_rows(gpu), alu_rows(emu)
    bad = []

    def report(name, idx, extra=""):
        for i in idx[:3]:
            bad.append(f"{name}: thread {i} a={inputs['a'][i]:#x} b={inputs['b'][i]:#x} c={inputs['c'][i]:#x} "
                       f"f={inputs['f'][i]:#010x} g={inputs['g'][i]:#010x}: gpu {[hex(v) for v in _field(g, name)[i]]} "
                       f"emu {[hex(v) for v in _field(e, name)[i]]}{extra}")
        if len(idx) > 3:
            bad.append(f"{name}: ... {len(idx)} threads differ")

    for name in (ALU if names is None else names):
        gv, ev = _field(g, name), _field(e, name)
        if name.startswith("cvta.param"):
            continue  # addresses: the emulator's own window (checked in compare_cvta_param)
        if name in APPROX:
            op, src = APPROX[name]
            gb, eb = gv[:, 0].astype(np.int64), ev[:, 0].astype(np.int64)
            gnan, enan = _is_nan32(gb), _is_nan32(eb)
            special = gnan | enan | ((gb & 0x7FFFFFFF) == 0) | ((eb & 0x7FFFFFFF) == 0) | \
                ((gb & 0x7FFFFFFF) == 0x7F800000) | ((eb & 0x7FFFFFFF) == 0x7F800000)
            # zeros, infinities and NaNs (ftz in, ftz out, overflow, 1/0): the same class and sign
            cls_bad = special & (gb != eb)
            report(name, np.flatnonzero(cls_bad), " (special values must agree exactly)")
            dist = np.abs(_ordered(gb) - _ordered(eb))
            ulp_bad = ~special & (dist > ULP[op])
            report(name, np.flatnonzero(ulp_bad), f" (more than {ULP[op]} ulp apart)")
            continue
        report(name, np.flatnonzero(~(gv == ev).all(1)))
    return bad


def approx_error_vs_exact(rows: np.ndarray, inputs: dict) -> dict:
    """Per approximate field: the largest relative error against the exact result, over normal finite results."""
    out = {}
    for name, (op, src) in APPROX.items():
        bits = _field(rows, name)[:, 0]
        got = bits.view(np.float32).astype(np.float64)
        want = _exact(op, inputs[src])
        normal = np.isfinite(want) & (np.abs(want) >= 2.0 ** -126) & (np.abs(want) < 2.0 ** 128) & \
            ((bits & 0x7F800000) != 0) & ((bits & 0x7F800000) != 0x7F800000)
        rel = np.abs(got[normal] - want[normal]) / np.abs(want[normal])
        out[name] = float(rel.max()) if rel.size else 0.0
    return out


def compare_cvta_param(gpu: np.ndarray, emu: np.ndarray) -> list:
    """cvta.param: one generic address per parameter, the same in every thread, 8 bytes apart (p_bytes at 48,
    p_dword at 56) on both sides."""
    bad = []
    for side, words in (("gpu", gpu), ("emu", emu)):
        r = alu_rows(words)
        pb = _field(r, "cvta.param p_bytes").astype(np.uint64)
        pd = _field(r, "cvta.param p_dword").astype(np.uint64)
        pb = pb[:, 0] | (pb[:, 1] << np.uint64(32))
        pd = pd[:, 0] | (pd[:, 1] << np.uint64(32))
        if len(set(pb.tolist())) != 1 or len(set(pd.tolist())) != 1:
            bad.append(f"{side}: cvta.param differs between threads")
        elif int(pd[0]) - int(pb[0]) != 8:
            bad.append(f"{side}: cvta.param(p_dword) - cvta.param(p_bytes) = {int(pd[0]) - int(pb[0])}, want 8")
    return bad


def check_warp(words: np.ndarray, inputs: dict, gpu: np.ndarray | None = None) -> list:
    """probe_warp's semantics (elect: one leader of the members; shfl/bar/ld.shared: exact), and equality with
    the GPU's words for every deterministic slot."""
    rows = words.reshape(WARP_BLOCK[0], 16)
    v = inputs["warp_in"].astype(np.int64)
    bad = []
    lane = np.arange(32)
    for wi in range(WARP_BLOCK[0] // 32):
        r = rows[wi * 32:(wi + 1) * 32]
        vin = v[wi * 32:(wi + 1) * 32]
        # elect.sync -1
        leaders = np.flatnonzero(r[:, 1] == 1)
        if len(leaders) != 1 or not (r[:, 1] <= 1).all():
            bad.append(f"warp {wi}: elect.sync -1 elected lanes {leaders.tolist()}")
        elif not (r[:, 0] == leaders[0]).all():
            bad.append(f"warp {wi}: elect.sync -1 leader {leaders[0]}, lanes report {r[:, 0].tolist()}")
        # elect.sync 0xF0F0F0F0 executed by its members
        member = ((0xF0F0F0F0 >> lane) & 1).astype(bool)
        if not ((r[~member, 2] == 0xEEEEEEEE).all() and (r[~member, 3] == 0xEEEEEEEE).all()):
            bad.append(f"warp {wi}: non-members of elect.sync 0xF0F0F0F0 wrote results")
        leaders = np.flatnonzero(member & (r[:, 3] == 1))
        if len(leaders) != 1 or not np.isin(r[member, 3], (0, 1)).all():
            bad.append(f"warp {wi}: elect.sync 0xF0F0F0F0 elected lanes {leaders.tolist()}")
        elif not (r[member, 2] == leaders[0]).all():
            bad.append(f"warp {wi}: elect.sync 0xF0F0F0F0 leader {leaders[0]}, members report {r[member, 2].tolist()}")
        # shfl.sync.idx (PTX ISA: j from b and c; out of [minLane, maxLane]: the lane's own value)
        want = {
            4: vin[np.zeros(32, int)],
            5: vin[lane ^ 5],
            6: vin[np.full(32, 5)],
            7: vin[(lane & ~7) | 3],
            8: np.where(((lane + 3) & 31) <= 15, vin[(lane + 3) & 31], vin),
            9: np.where(lane < 16, vin[np.clip(15 - lane, 0, 31)], 0xEEEEEEEE),
        }
        for slot, w in want.items():
            if not (r[:, slot] == (w & 0xFFFFFFFF)).all():
                bad.append(f"warp {wi}: shfl slot {slot}: got {r[:4, slot].tolist()}.., want {(w[:4] & 0xFFFFFFFF).tolist()}..")
    # bar.sync 2,160 exchanges between warps 0..4, bar.sync 1,32 for warp 5
    tid = np.arange(WARP_BLOCK[0])
    src1 = np.where(tid < 160, (tid + 32) % 160, tid)
    want10 = (v[src1] ^ 0x5A5A5A5A) & 0xFFFFFFFF
    want11 = np.where(tid < 160, (v[(tid + 64) % 160] + 1) & 0xFFFFFFFF, 0)
    for slot, w in ((10, want10), (11, want11)):
        idx = np.flatnonzero(rows[:, slot] != w)
        if idx.size:
            bad.append(f"bar.sync/ld.shared slot {slot}: threads {idx[:8].tolist()} got "
                       f"{[hex(x) for x in rows[idx[:4], slot]]} want {[hex(x) for x in w[idx[:4]]]}")
    want_v4 = np.stack([tid, tid % 32, tid // 32, v & 0xFFFFFFFF], 1)
    if not (rows[:, 12:16] == want_v4).all():
        bad.append("st.global.v4.b32: the four words differ from {tid, lane, warp, v}")
    if gpu is not None:
        g = gpu.reshape(WARP_BLOCK[0], 16)
        det = [4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]
        diff = np.argwhere(g[:, det] != rows[:, det])
        if diff.size:
            t, s = diff[0]
            bad.append(f"probe_warp differs from the GPU in {len(diff)} words; first thread {t} slot {det[s]}")
    return bad


# step results of probe_mbar: try_wait.parity answers in program order, then the constant 7
MBAR_EXPECTED = np.array([
    0,  # A fresh, parity 0: incomplete
    1,  # A fresh, parity 1: the phase before the first is complete
    0,  # A after 1 of 2 arrivals
    1,  # A after arrive.expect_tx(0): phase 0 complete
    1,  # same, acquire.cta form
    0,  # A phase 1 after arrive.expect_tx(128): incomplete
    0,  # A phase 1 after the second arrival: 128 tx bytes outstanding, incomplete
    1,  # A parity 0 (acquire.cta form) still complete
    1, 0,  # B (count 1) after one arrival: parity 0 complete, parity 1 not
    0, 1,  # B after two arrivals: parity 0 names the current phase 2 (incomplete), parity 1 complete
    1,  # C (count 32) after the 32 lanes of warp 1 arrived
    0,  # D (count 3) before its arrival
    1,  # D after one arrive with count 3
    7,
], np.uint32)


def check_mbar(words: np.ndarray, gpu: np.ndarray | None = None) -> list:
    bad = []
    if not (words == MBAR_EXPECTED).all():
        bad.append(f"probe_mbar: {words.tolist()} != expected {MBAR_EXPECTED.tolist()}")
    if gpu is not None and not (words == gpu).all():
        bad.append(f"probe_mbar: {words.tolist()} != gpu {gpu.tolist()}")
    return bad


def check_cluster(words: np.ndarray, gpu: np.ndarray | None = None) -> list:
    gx, gy, gz = CLUSTER_GRID
    nt = CLUSTER_BLOCK[0]
    rows = words.reshape(-1, nt, 16)
    bad = []
    for L in range(rows.shape[0]):
        x, y, z = L % gx, (L // gx) % gy, L // (gx * gy)
        rank = x % 2
        peer = L ^ 1
        r = rows[L]
        tid = np.arange(nt)
        want = np.zeros((nt, 12), np.int64)
        want[:, 0:4] = [rank, x, y, z]
        want[:, 4:8] = [L, gx, gy, gz]
        want[:, 8] = 1  # cvta round trip
        want[:, 9] = 0xC0000000 | (peer << 8) | ((tid + 1) % nt)  # the peer's word through mapa
        want[:, 10] = 0xC0000000 | (L << 8) | tid  # the own word through mapa to the own rank
        want[:, 11] = np.where(tid == 0, 1, 0)  # the remote arrival completed the own barrier's phase 0
        idx = np.argwhere(r[:, :12] != want)
        if idx.size:
            t, s = idx[0]
            bad.append(f"probe_cluster CTA {L}: {len(idx)} words differ; first thread {t} slot {s}: "
                       f"got {r[t, s]:#x} want {want[t, s]:#x}")
        if not (r[:, 12:] == SENTINEL).all():
            bad.append(f"probe_cluster CTA {L}: slots 12..15 written")
    if gpu is not None and not (words == gpu).all():
        bad.append(f"probe_cluster differs from the GPU in {int((words != gpu).sum())} words")
    return bad


def load_fixture(path=FIXTURE) -> tuple[dict, dict]:
    z = np.load(path)
    inputs = {k[3:]: z[k] for k in z.files if k.startswith("in_")}
    outs = {k[4:]: z[k] for k in z.files if k.startswith("out_")}
    outs["card"] = str(z["card"])
    return inputs, outs


def compare_all(inputs: dict, gpu: dict, emu: dict) -> list:
    bad = []
    bad += compare_alu(gpu["probe_alu"], emu["probe_alu"], inputs)
    bad += compare_cvta_param(gpu["probe_alu"], emu["probe_alu"])
    bad += check_warp(emu["probe_warp"], inputs, gpu["probe_warp"])
    bad += [f"(gpu) {m}" for m in check_warp(gpu["probe_warp"], inputs)]
    bad += check_mbar(emu["probe_mbar"], gpu["probe_mbar"])
    bad += check_cluster(emu["probe_cluster"], gpu["probe_cluster"])
    return bad


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--gpu", metavar="OUT.npz")
    g.add_argument("--emulate", metavar="FIXTURE.npz")
    ap.add_argument("--seed", type=int, nargs="*", default=[0])
    a = ap.parse_args(argv)
    if a.gpu:
        run_gpu(a.gpu)
        inputs, gpu = load_fixture(a.gpu)
        for name, err in approx_error_vs_exact(alu_rows(gpu["probe_alu"]), inputs).items():
            print(f"gpu {name}: max relative error {err:.3g} ({err * 2 ** 23:.2f} x 2^-23)")
        print("gpu self-checks:", check_warp(gpu["probe_warp"], inputs) + check_mbar(gpu["probe_mbar"])
              + check_cluster(gpu["probe_cluster"]) or "all pass")
        return 0
    inputs, gpu = load_fixture(a.emulate)
    print(f"fixture from {gpu['card']}")
    status = 0
    for s in a.seed:
        emu = run_emulator(inputs, seed=s)
        bad = compare_all(inputs, gpu, emu)
        print(f"seed {s}: {'PASS' if not bad else f'{len(bad)} mismatches'}")
        for line in bad:
            print("  " + line)
        status |= bool(bad)
    return status


if __name__ == "__main__":
    sys.exit(main())
