#!/usr/bin/env python3
"""The special-function unit (MUFU) on hardware vs the emulator's model (emu/mufu.py), and what it means for SiLU.

    python3 -m calibration.mufu --gpu OUT.npz|DIR  # on a lent H100/H200 (any sm_90+ GPU; a B200 too);
                                                        # DIR: writes DIR/mufu_<card>.npz, e.g. mufu_h100.npz
    python -m calibration.mufu --check FIXTURE.npz  # here: the fixture's errors, and the emulator on a sample
    python -m calibration.mufu --silu [--bound measured|isa|facts_h100]   # silu-via-tanh vs ex2/rcp on C

--gpu needs: python3 with numpy, torch with CUDA (it only allocates device memory and names the card) and the driver's
libcuda.so.1 (the probe is PTX, .target sm_90, loaded with cuModuleLoadDataEx and launched with cuLaunchKernel through
ctypes). No CuPy, no nvcc. It runs the PROBE_PTX kernel once over the sweep (emu.mufu: every f32 x in [-9, -8), i.e.
tanh's argument 0.5x in [-4.5, -4) where 0.5x(1 + tanh(0.5x)) cancels, plus 1024 runs of 128 consecutive f32 spread
over |x| < 32) and writes the output words of six columns per x (emu.mufu.DENSE_COLUMNS) to OUT.npz, about 1 MB.
Copy it to tests/data/mufu_<card>.npz: from then on the emulator returns the measured word for every swept input and
draws tanh errors within the measured bound under non-default schedules (emu/mufu.py), and tests/emu/test_mufu.py and
tests/calibration/test_mufu.py check the model against it. The card is Hopper: B200's MUFU may differ (nothing here measures a B200).

--silu evaluates C = silu(acc1) * acc2 computed the way the kernels do (fp32 steps, MUFU values, fp16 result) against
reference.ref_kernel, under the leaderboard's rule |out - ref| <= 1e-3 + 1e-3 |ref|, on both input generators and on
strict data whose B2 scales are multiplied by 2^s (wide scale: |acc2| in the hundreds), for each SiLU form:
  ex2_rcp      x * rcp(1 + ex2(-x log2 e))           (this package's kernel, novus677's exact form)
  ex2poly_rcp  x * rcp(1 + p2(-x log2 e))            (KernelConfig.silu_ex2_poly: 2^t by submission.ex2_poly, the
                                                     FMA-pipe polynomial, for every element; rcp on MUFU)
  tanh         fma(h, tanh(h), h), h = x / 2          (novus677 silu_fast; arseni_ivanov's even elements)
  tanh_49995   fma(h, tanh(0.49995 x), h)            (novus677 silu_fast2)
  tanh_bias    fma(h, tanh(h + 0.0002), h)           (arseni_ivanov's odd elements: "additive bias")
and for each MUFU value model: exact (rounded once), measured (the fixture's words where it has them, else exact), and
worst (each MUFU result moved by its bound, the sign that hurts most, per element). `silu_error_report()` is the
function the kernel-knob work calls. Every number it prints is "modeled" (MUFU values from a model or a Hopper card),
never a B200 measurement.
"""
from __future__ import annotations

import argparse
import ctypes
import struct
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from emu import mufu  # noqa: E402

BAND = (np.float32(-8.0).view(np.uint32), 1 << 20)  # every f32 in [-9, -8): bit patterns grow with |x|
RUNS, RUN_LEN = 512, 128  # per sign, spread evenly over the bit patterns of |x| < 32
THREADS = 256

PROBE_PTX = r"""
.version 8.0
.target sm_90
.address_size 64

// One thread per x: the six columns of emu.mufu.DENSE_COLUMNS.
.visible .entry mufu_probe(.param .u64 px, .param .u64 pout, .param .u32 pn)
{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .reg .f32 %f<16>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [px];
    ld.param.u64 %rd2, [pout];
    ld.param.u32 %r1, [pn];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra DONE;
    mul.wide.u32 %rd3, %r5, 4;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.f32 %f1, [%rd4];
    mul.f32 %f2, %f1, 0f3F000000;
    tanh.approx.f32 %f3, %f2;
    fma.rn.f32 %f4, %f2, %f3, %f2;
    tanh.approx.f32 %f5, %f1;
    ex2.approx.ftz.f32 %f6, %f1;
    rcp.approx.ftz.f32 %f7, %f1;
    mul.ftz.f32 %f8, %f1, 0fBFB8AA3B;
    ex2.approx.ftz.f32 %f9, %f8;
    add.ftz.f32 %f10, %f9, 0f3F800000;
    rcp.approx.ftz.f32 %f11, %f10;
    mul.ftz.f32 %f12, %f1, %f11;
    mul.wide.u32 %rd5, %r5, 24;
    add.s64 %rd6, %rd2, %rd5;
    st.global.f32 [%rd6], %f3;
    st.global.f32 [%rd6+4], %f4;
    st.global.f32 [%rd6+8], %f5;
    st.global.f32 [%rd6+12], %f6;
    st.global.f32 [%rd6+16], %f7;
    st.global.f32 [%rd6+20], %f12;
DONE:
    ret;
}
"""


def sweep_parameters() -> dict:
    """The inputs, as stored in the fixture: the band and the run starts (both signs)."""
    top = int(np.float32(32.0).view(np.uint32))
    pos = (np.arange(RUNS, dtype=np.int64) * (top // RUNS)).astype(np.uint32)
    starts = np.concatenate([pos, pos | np.uint32(0x80000000)])
    return {"band_start": np.uint32(BAND[0]), "band_count": np.int64(BAND[1]), "run_starts": starts,
            "run_len": np.int64(RUN_LEN)}


def sweep_inputs(params: dict) -> tuple[np.ndarray, np.ndarray]:
    return (mufu.band_inputs(int(params["band_start"]), int(params["band_count"])),
            mufu.run_inputs(params["run_starts"], int(params["run_len"])))


def fixture_arrays(params: dict, band_words: np.ndarray, dense_words: np.ndarray, meta: dict) -> dict:
    """The .npz contents: parameters, per column the diff-encoded words (emu.mufu.encode_words), metadata."""
    out = dict(params)
    for prefix, names, words in (("band", mufu.BAND_COLUMNS, band_words), ("dense", mufu.DENSE_COLUMNS, dense_words)):
        for c in names:
            enc = mufu.encode_words(words[:, mufu.DENSE_COLUMNS.index(c)])
            for k, v in enc.items():
                out[f"{prefix}_{c}_{k}"] = v
    out["card"] = np.array(meta.pop("card"))
    for k, v in meta.items():
        out[f"meta_{k}"] = np.array(str(v))
    return out


# ============================================================================ GPU side (run on the device machine)
def card_slug(name: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'h100': the fixture's file name part."""
    import re

    m = re.search(r"\b([A-Z]+\d{2,4}[A-Z]?)\b", name.replace("NVIDIA", ""))
    return (m.group(1) if m else re.sub(r"\W+", "_", name)).lower()


def run_gpu(out_path: str) -> None:
    import torch

    from calibration.ptx_launch import launch_ptx

    if not torch.cuda.is_available():
        raise SystemExit("--gpu needs torch with a visible CUDA GPU")
    if Path(out_path).is_dir():
        out_path = str(Path(out_path) / f"mufu_{card_slug(torch.cuda.get_device_name())}.npz")
    params = sweep_parameters()
    band_x, dense_x = sweep_inputs(params)
    x = np.concatenate([band_x, dense_x])
    xd = torch.from_numpy(x.view(np.int32).copy()).cuda()
    od = torch.full((x.size * 6,), -1, dtype=torch.int32, device="cuda")
    launch_ptx(PROBE_PTX, "mufu_probe", (x.size + THREADS - 1) // THREADS, THREADS,
               [struct.pack("<Q", xd.data_ptr()), struct.pack("<Q", od.data_ptr()), struct.pack("<I", x.size)])
    words = od.cpu().numpy().view(np.uint32).reshape(x.size, 6)
    if (words == 0xFFFFFFFF).all(axis=1).any():
        raise RuntimeError("some threads wrote nothing")
    driver = ctypes.c_int()
    ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(ctypes.byref(driver))
    cc = torch.cuda.get_device_capability()
    meta = {"card": torch.cuda.get_device_name(), "driver": driver.value, "cc": f"{cc[0]}.{cc[1]}",
            "torch": torch.__version__, "label": "measured"}
    write_fixture(out_path, params, words, meta)


def write_fixture(out_path: str, params: dict, words: np.ndarray, meta: dict) -> mufu.Sweep:
    """Save [inputs, 6] output words (band first) as the fixture, check it decodes to the same words, summarize."""
    n_band = int(params["band_count"])
    np.savez_compressed(out_path, **fixture_arrays(params, words[:n_band], words[n_band:], dict(meta)))
    sweep = mufu.load_sweep(out_path)
    for got, rows in ((sweep.band, words[:n_band]), (sweep.dense, words[n_band:])):
        for c, w in got.items():
            if not np.array_equal(w, rows[:, mufu.DENSE_COLUMNS.index(c)]):
                raise RuntimeError(f"{out_path}: column {c} does not decode to the measured words")
    print(f"wrote {out_path} ({Path(out_path).stat().st_size} bytes) on {meta['card']} (cc {meta.get('cc')}, driver "
          f"{meta.get('driver')}): {words.shape[0]} inputs x 6 columns")
    for line in error_summary(sweep):
        print(line)
    return sweep


# ============================================================================ the measurement, summarized
def error_summary(sweep: mufu.Sweep) -> list[str]:
    """Max absolute / relative error of each measured function against the exact value, by input range."""
    lines = []
    tables = mufu.tables_from_sweep(sweep)
    for name, t in tables.items():
        with np.errstate(all="ignore"):
            x = t.keys.view(np.float32).astype(np.float64)
            y = t.values.view(np.float32).astype(np.float64)
            exact = mufu.EXACT[name](x)
            err = np.abs(y - exact)
            rel = err / np.abs(exact)
        ok = np.isfinite(err) & np.isfinite(exact) & (np.abs(x) >= 2.0 ** -30)
        for lo, hi in ((0, 2), (2, 8), (8, 32)):
            sel = ok & (np.abs(x) >= lo) & (np.abs(x) < hi)
            if sel.any():
                lines.append(f"measured {name}.approx |x| in [{lo}, {hi}): max abs error {err[sel].max():.3g}, max rel "
                             f"{np.nanmax(rel[sel]):.3g} ({int(sel.sum())} inputs)")
    for prefix, xs, cols in (("band", sweep.band_x, sweep.band), ("dense", sweep.dense_x, sweep.dense)):
        x = xs.astype(np.float64)
        for c, form in (("silu_tanh", "fma(h, tanh(h), h)"), ("silu_ex2", "x rcp(1 + ex2(-x log2 e))")):
            if c not in cols:
                continue
            y = cols[c].view(np.float32).astype(np.float64)
            exact = x / (1 + np.exp(-x))
            err = np.abs(y - exact)
            sel = np.isfinite(err) & (np.abs(x) < 32)
            lines.append(f"measured silu as {form} on the {prefix} inputs: max abs error {err[sel].max():.3g}")
    return lines


# ============================================================================ emulator side
def emulate_probe(x: np.ndarray, seed: int = 0) -> np.ndarray:
    """The probe kernel run in the emulator on inputs x: [len(x), 6] u32 words."""
    from types import SimpleNamespace

    from emu.machine import Machine
    from emu.ptx import parse_module
    from emu.state import GlobalMemory

    gmem = GlobalMemory()
    px = gmem.alloc_array(np.asarray(x, np.float32))
    pout = gmem.alloc(x.size * 24, fill=0xFF)
    launch = SimpleNamespace(grid=((x.size + THREADS - 1) // THREADS, 1, 1), block=(THREADS, 1, 1), cluster=(1, 1, 1),
                             dynamic_smem=0, launch_attrs=[],
                             params=[struct.pack("<Q", px), struct.pack("<Q", pout), struct.pack("<I", x.size)])
    Machine(parse_module(PROBE_PTX), launch, gmem, seed=seed).run()
    return gmem.read(pout, x.size * 24).view(np.uint32).reshape(x.size, 6)


def check_fixture(path: str, sample: int = 4096) -> int:
    """Decode the fixture, print its error summary, and run the emulator on a sample of its inputs with the fixture
    installed: the raw MUFU columns must come back bit for bit, the composites within the measured bound."""
    import os

    sweep = mufu.load_sweep(path)
    print(f"{path}: card {sweep.card}, {sweep.band_x.size} band + {sweep.dense_x.size} dense inputs, {sweep.meta}")
    for line in error_summary(sweep):
        print(line)
    os.environ["EMU_MUFU_FIXTURE"] = str(path)
    rng = np.random.default_rng(0)
    pick = rng.choice(sweep.dense_x.size, size=min(sample, sweep.dense_x.size), replace=False)
    got = emulate_probe(sweep.dense_x[pick])
    bad = 0
    for i, c in enumerate(mufu.DENSE_COLUMNS):
        want = sweep.dense[c][pick]
        same = got[:, i] == want
        print(f"emulated vs measured, {c}: {int(same.sum())} of {same.size} words identical")
        if c in ("tanh_half", "tanh", "ex2", "rcp", "silu_tanh"):
            bad += int((~same).sum())
    return 0 if bad == 0 else 1


# ============================================================================ SiLU forms on C
FORMS = ("ex2_rcp", "ex2poly_rcp", "tanh", "tanh_49995", "tanh_bias")
MUFU_MODELS = ("exact", "measured", "worst")
ISA_REL = {"tanh": 2.0 ** -10.987, "ex2": 2.0 ** -22, "rcp": 2.0 ** -23}  # PTX ISA max relative errors
FACTS_H100_TANH_ABS = 8.0e-6  # measured (H100, issue 17's earlier sweep): tanh.approx max abs error, every f32 |x| < 32


def _f32(v):
    return np.asarray(v, np.float64).astype(np.float32)


def _bound(name: str, x: np.ndarray, exact: np.ndarray, source: str) -> np.ndarray:
    """Largest |MUFU(x) - exact| the bound source allows, per element (float64)."""
    if source == "measured":
        table = mufu.table(name)
        if table is None:
            raise SystemExit("--bound measured needs the fixture (tests/data/mufu_*.npz or $EMU_MUFU_FIXTURE)")
        return table.binade_bound[(np.asarray(x, np.float32).view(np.uint32) >> 23) & 0xFF]
    if source == "facts_h100" and name == "tanh":
        return np.full(np.shape(x), FACTS_H100_TANH_ABS)
    return np.abs(exact) * ISA_REL[name]


def mufu_value(name: str, x: np.ndarray, model: str, shift: float, source: str) -> np.ndarray:
    """f32 results: exact-rounded / measured where swept / exact moved by shift x bound (shift in {-1, +1})."""
    x = _f32(x)
    ftz = name != "tanh"
    if model == "measured":
        return mufu.evaluate(name, x, ftz)
    with np.errstate(all="ignore"):
        exact = mufu.EXACT[name](mufu.flush_subnormal(x).astype(np.float64) if ftz else x.astype(np.float64))
    if model == "exact":
        return _f32(exact)
    return _f32(exact + shift * _bound(name, x, exact, source))


def ex2_poly_f32(t: np.ndarray) -> np.ndarray:
    """2^t as submission.ex2_poly computes it on the FMA/ALU pipes (KernelConfig.silu_ex2_poly; the PTX is
    submission.EX2_POLY_PTX, after FlashAttention-4's ex2_emulation), step by step in f32: t clamped to [-127, 128]
    by max.ftz / min.ftz (a NaN gives -127), floor and fraction (exact: the add.rm of 1.5 * 2^23 and both
    subtractions are), Horner's four fma.rn with the degree-4 coefficients, floor(t) added into the exponent field.
    Each fma is rounded from float64 (a*b is exact there; rounding the sum twice can differ from the fused result by
    one f32 ulp at a tie, 6e-8 relative: negligible next to the polynomial's 3.0e-6). tests/harness/
    test_silu_ex2_poly.py runs the kernel's own PTX in the emulator."""
    t = mufu.flush_subnormal(_f32(t))
    lo, hi = EX2_POLY_CLAMP
    with np.errstate(invalid="ignore"):
        tc = np.where(np.isnan(t), np.float32(lo), np.minimum(np.maximum(t, np.float32(lo)), np.float32(hi)))
    n = np.floor(tc.astype(np.float64))
    f = _f32(tc.astype(np.float64) - n)
    p = np.full(f.shape, np.float32(EX2_POLY_COEFFS[-1]))
    for c in EX2_POLY_COEFFS[-2::-1]:
        p = _f32(p.astype(np.float64) * f.astype(np.float64) + c)
    bits = (p.view(np.uint32).astype(np.int64) + (n.astype(np.int64) << 23)) & 0xFFFFFFFF
    return bits.astype(np.uint32).view(np.float32)


# submission.py's constants (EX2_POLY_COEFFS, EX2_POLY_CLAMP), restated here: calibration does not import the kernel;
# tests/calibration/test_mufu.py checks that they agree.
EX2_POLY_COEFFS = (1.0, 0.693042695522308349609375, 0.2412912547588348388671875, 5.2225358784198760986328125e-2,
                   1.3434938155114650726318359375e-2)
EX2_POLY_CLAMP = (-127.0, 128.0)


def silu_times(form: str, acc1: np.ndarray, acc2: np.ndarray, model: str, shifts=(0.0, 0.0), source="isa"):
    """fp16 C from fp32 accumulators, each step in f32 as the kernels' PTX does it."""
    x, y = _f32(acc1), _f32(acc2)
    with np.errstate(all="ignore"):
        if form in ("ex2_rcp", "ex2poly_rcp"):
            t = _f32(x * np.float32(mufu.LOG2E_NEG))
            e = mufu_value("ex2", t, model, shifts[0], source) if form == "ex2_rcp" else ex2_poly_f32(t)
            r = mufu_value("rcp", _f32(e + np.float32(1.0)), model, shifts[1], source)
            s = _f32(x * r)
        else:
            h = _f32(x * np.float32(0.5))
            arg = {"tanh": h, "tanh_49995": _f32(x * np.float32(0.49995)),
                   "tanh_bias": _f32(h + np.float32(0.0002))}[form]
            t = mufu_value("tanh", arg, model, shifts[0], source)
            s = _f32(h.astype(np.float64) * t + h)  # fma.rn: one rounding
        return _f32(s * y).astype(np.float16)


def _tolerance_ratio(out: np.ndarray, ref: np.ndarray) -> np.ndarray:
    o, r = out.astype(np.float64), ref.astype(np.float64)
    return np.abs(o - r) / (1e-3 + 1e-3 * np.abs(r))


def silu_error_report(m: int = 256, n: int = 256, k: int = 1024, seeds=(1, 2), wide_shifts=(4, 6),
                      forms=FORMS, models=MUFU_MODELS, bound: str = "isa") -> list[dict]:
    """Per (data, form, MUFU model): the worst |out - ref| / (1e-3 + 1e-3 |ref|) over C (> 1 fails the
    leaderboard's check) and how many elements fail. Data: reference.generate_input in "leaderboard" and "strict"
    modes, and strict with the B2 scales times 2^s for s in wide_shifts ("wide", |acc2| ~ 12 * 2^s). Accumulators
    are the exact float64 dot products rounded to fp32 (the MMA's result up to its summation order)."""
    import torch

    import reference

    datasets = []
    for seed in seeds:
        for mode in ("leaderboard", "strict"):
            data = reference.generate_input(m, n, k, 1, seed, mode=mode, device="cpu")
            datasets.append((f"{mode} seed {seed}", data))
        for s in wide_shifts:
            d = list(reference.generate_input(m, n, k, 1, seed, mode="strict", device="cpu"))
            sfb2 = (d[5].float() * 2.0 ** s).clamp(max=448.0).to(torch.float8_e4m3fn)
            d[5] = sfb2
            d[8] = reference.permute_scales(sfb2)
            datasets.append((f"strict x2^{s} on B2 seed {seed}", tuple(d)))
    rows = []
    for label, data in datasets:
        a, b1, b2, sfa, sfb1, sfb2 = data[:6]
        with torch.no_grad():
            da = reference.dequantize(a[:, :, 0], sfa[:, :, 0]).double()
            acc1 = (da @ reference.dequantize(b1[:, :, 0], sfb1[:, :, 0]).double().T).float().numpy()
            acc2 = (da @ reference.dequantize(b2[:, :, 0], sfb2[:, :, 0]).double().T).float().numpy()
        ref = reference.ref_kernel(data)[:, :, 0].float().numpy()
        for form in forms:
            for model in models:
                if model == "measured" and mufu.table("tanh") is None:
                    continue
                if model == "worst":  # every sign combination of the MUFU errors, the worst per element
                    signs = [(a_, b_) for a_ in (-1.0, 1.0)
                             for b_ in ((-1.0, 1.0) if form.startswith("ex2") else (0.0,))]
                    ratio = np.max([_tolerance_ratio(silu_times(form, acc1, acc2, model, sg, bound), ref)
                                    for sg in signs], axis=0)
                else:
                    ratio = _tolerance_ratio(silu_times(form, acc1, acc2, model), ref)
                rows.append({"data": label, "form": form, "mufu": model if model != "worst" else f"worst ({bound})",
                             "max_ratio": float(np.nanmax(ratio)), "fail": int((ratio > 1).sum()),
                             "elements": int(ratio.size), "max_abs_acc2": float(np.abs(acc2).max())})
    return rows


# ============================================================================ CLI
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--gpu", metavar="OUT", help="run the probe on this machine's GPU and write the fixture "
                   "(a .npz path, or a folder for mufu_<card>.npz)")
    g.add_argument("--check", metavar="FIXTURE.npz", help="summarize a fixture and check the emulator against it")
    g.add_argument("--silu", action="store_true", help="the SiLU forms' error on C against the leaderboard's tolerance")
    ap.add_argument("--bound", default="isa", choices=("isa", "measured", "facts_h100"),
                    help="the MUFU error bound the 'worst' model uses")
    ap.add_argument("--shape", default="256,256,1024")
    args = ap.parse_args(argv)
    if args.gpu:
        run_gpu(args.gpu)
        return 0
    if args.check:
        return check_fixture(args.check)
    m, n, k = (int(v) for v in args.shape.split(","))
    rows = silu_error_report(m, n, k, bound=args.bound)
    print(f"modeled: C = silu(acc1) * acc2 per SiLU form and MUFU model vs reference.ref_kernel, {m}x{n}x{k}; "
          "ratio = max |out - ref| / (1e-3 + 1e-3 |ref|), > 1 fails")
    print(f"{'data':<30} {'form':<11} {'mufu':<22} {'max ratio':>10} {'failing':>9}  max|acc2|")
    for r in rows:
        print(f"{r['data']:<30} {r['form']:<11} {r['mufu']:<22} {r['max_ratio']:>10.3g} {r['fail']:>9}  "
              f"{r['max_abs_acc2']:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
