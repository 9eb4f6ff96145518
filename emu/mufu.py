"""The special-function unit's approximations (MUFU): ex2.approx, rcp.approx and tanh.approx .f32 values.

What the PTX ISA promises ("Floating Point Instructions": ex2, rcp, tanh): ex2.approx.f32 max relative error 2^-22
(normal range), rcp.approx.f32 max relative error 2^-23, tanh.approx.f32 max relative error 2^-10.987 (subnormal
inputs supported). An emulator that drew tanh errors anywhere inside that bound would fail the hardware-verified
kernels that compute silu as 0.5x(1 + tanh(0.5x)): where tanh(0.5x) ~ -1 the sum cancels and the ISA's 4.9e-4
becomes 24-41% of C's elements out of the leaderboard's tolerance (issue 17). The hardware is far tighter.

The model, in two states:
- No measurement (no fixture): the exact value rounded once to f32, the canonical NaN, .ftz as asked. This is
  what a correct kernel must survive anyway; it says nothing about how far the hardware deviates.
- With a measurement (tests/data/mufu_<card>.npz, written on a lent GPU by `python -m calibration.mufu --gpu`;
  $EMU_MUFU_FIXTURE names another file, or "none" for no fixture): an input that the sweep measured gets the
  measured output word, bit for bit; any other input gets the exact-rounded value, and under a non-default
  schedule (a Machine seed other than 0) tanh.approx gets an error drawn uniformly within the largest error the
  hardware showed in that input's binade (per binade of |x|, absolute). ex2/rcp errors (<= 2 ulp measured on
  an H200, tests/calibration/test_alu.py) are not drawn.
The measurement is a Hopper card's (H100/H200): B200's MUFU is unmeasured and may differ.

Fixture format (one .npz): the swept inputs as parameters (`band_start`, `band_count`: every f32 bit pattern
from band_start on; `run_starts`, `run_len`: short runs of consecutive bit patterns spread over |x| < 32), and
per output column the raw words diff-encoded along the inputs' order (int8 steps plus escapes for larger ones),
which is lossless and needs no math library to decode.
"""
from __future__ import annotations

import functools
import glob
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
FIXTURE_GLOB = str(REPO / "tests" / "data" / "mufu_*.npz")

EXACT = {"tanh": np.tanh, "ex2": np.exp2, "rcp": lambda x: 1.0 / x}
LOG2E_NEG = np.uint32(0xBFB8AA3B).view(np.float32)  # -log2(e) as the kernels' PTX writes it (0fBFB8AA3B)

# Output columns of the probe kernel, per swept x (tests/data/mufu_probe.ptx):
#   tanh_half  tanh.approx(h), h = mul.f32(x, 0.5)          silu_tanh  fma.rn(h, tanh_half, h)
#   tanh       tanh.approx(x)    ex2  ex2.approx.ftz(x)      rcp        rcp.approx.ftz(x)
#   silu_ex2   x * rcp.approx.ftz(1 + ex2.approx.ftz(x * -log2 e))      (mul/add .ftz, as nvcc --use_fast_math)
BAND_COLUMNS = ("tanh_half", "silu_tanh")
DENSE_COLUMNS = ("tanh_half", "silu_tanh", "tanh", "ex2", "rcp", "silu_ex2")


# ----------------------------------------------------------------------------------------------- the sweep
def band_inputs(start: int, count: int) -> np.ndarray:
    """Every f32 from bit pattern `start` on, `count` of them (consecutive patterns: a contiguous range of values)."""
    return (np.uint32(start) + np.arange(count, dtype=np.uint32)).view(np.float32)


def run_inputs(starts: np.ndarray, run_len: int) -> np.ndarray:
    bits = np.asarray(starts, np.uint32)[:, None] + np.arange(run_len, dtype=np.uint32)[None, :]
    return bits.reshape(-1).view(np.float32)


# ----------------------------------------------------------------------------------------------- encoding
def encode_words(words: np.ndarray) -> dict:
    """Raw u32 words -> {steps (int8), esc_idx, esc_val}: consecutive differences, those outside int8 escaped."""
    d = np.diff(np.asarray(words, np.uint32).astype(np.int64), prepend=0)
    big = np.flatnonzero((d < -127) | (d > 127))
    steps = np.clip(d, -127, 127).astype(np.int8)
    steps[big] = 0
    return {"steps": steps, "esc_idx": big.astype(np.int64), "esc_val": d[big]}


def decode_words(steps: np.ndarray, esc_idx: np.ndarray, esc_val: np.ndarray) -> np.ndarray:
    d = steps.astype(np.int64)
    d[esc_idx] = esc_val
    return np.cumsum(d).astype(np.uint32)


@dataclass
class Sweep:
    """A decoded fixture: the inputs and the measured output words per column."""

    card: str
    band_x: np.ndarray
    dense_x: np.ndarray
    band: dict  # column -> u32 words
    dense: dict
    meta: dict


def load_sweep(path) -> Sweep:
    z = np.load(path, allow_pickle=False)
    band_x = band_inputs(int(z["band_start"]), int(z["band_count"]))
    dense_x = run_inputs(z["run_starts"], int(z["run_len"]))

    def cols(prefix, names, n):
        out = {}
        for c in names:
            w = decode_words(z[f"{prefix}_{c}_steps"], z[f"{prefix}_{c}_esc_idx"], z[f"{prefix}_{c}_esc_val"])
            if w.size != n:
                raise ValueError(f"{path}: column {prefix}_{c} has {w.size} words for {n} inputs")
            out[c] = w
        return out

    meta = {k: str(z[k]) for k in z.files if k.startswith("meta_")}
    return Sweep(str(z["card"]), band_x, dense_x, cols("band", BAND_COLUMNS, band_x.size),
                 cols("dense", DENSE_COLUMNS, dense_x.size), meta)


# ----------------------------------------------------------------------------------------------- the model
@dataclass
class Table:
    """One function's measured values: sorted input bits, output bits, and the largest absolute error against
    the exact value per binade of the input (index: the 8-bit exponent field of |x|)."""

    keys: np.ndarray
    values: np.ndarray
    binade_bound: np.ndarray

    def lookup(self, x: np.ndarray):
        bits = np.asarray(x, np.float32).view(np.uint32)
        i = np.minimum(np.searchsorted(self.keys, bits), self.keys.size - 1)
        hit = self.keys[i] == bits
        return hit, self.values[i].view(np.float32)


TABLE_SOURCES = {"tanh": (("band", "tanh_half", True), ("dense", "tanh_half", True), ("dense", "tanh", False)),
                 "ex2": (("dense", "ex2", False),), "rcp": (("dense", "rcp", False),)}


def table_from_sweep(s: Sweep, name: str) -> Table:
    """One function's Table: each probe column that measured it, keyed by the argument the probe passed (x, or
    h = mul.rn.f32(x, 0.5) for the tanh_half column, as the probe computes it)."""
    keys, vals = [], []
    for prefix, column, halved in TABLE_SOURCES[name]:
        x = s.band_x if prefix == "band" else s.dense_x
        arg = (x * np.float32(0.5)).astype(np.float32) if halved else np.asarray(x, np.float32)
        keys.append(arg.view(np.uint32))
        vals.append((s.band if prefix == "band" else s.dense)[column])
    keys, vals = np.concatenate(keys), np.concatenate(vals)
    order = np.argsort(keys, kind="stable")
    keys, vals = keys[order], vals[order]
    first = np.concatenate([[True], keys[1:] != keys[:-1]])
    if not np.array_equal(vals[first][np.cumsum(first) - 1], vals):
        raise ValueError(f"{name}: the sweep measured two different outputs for one input")
    keys, vals = keys[first], vals[first]
    with np.errstate(all="ignore"):
        x = keys.view(np.float32).astype(np.float64)
        y = vals.view(np.float32).astype(np.float64)
        err = np.abs(y - EXACT[name](x))
    ok = np.isfinite(err)
    bound = np.zeros(256)
    np.maximum.at(bound, ((keys[ok] >> 23) & 0xFF).astype(np.int64), err[ok])
    return Table(keys, vals, bound)


def tables_from_sweep(s: Sweep) -> dict:
    return {name: table_from_sweep(s, name) for name in TABLE_SOURCES}


_STATE: dict = {}


def fixture_path() -> Path | None:
    env = os.environ.get("EMU_MUFU_FIXTURE")
    if env:
        return None if env.lower() == "none" else Path(env)
    return _committed_fixture()


@functools.lru_cache(maxsize=1)
def _committed_fixture() -> Path | None:
    """The committed fixture (tests/data), looked for once per process: every MUFU instruction asks (a directory scan
    each time was a tenth of an epilogue-heavy emulation)."""
    found = sorted(glob.glob(FIXTURE_GLOB))
    return Path(found[0]) if found else None


def table(name: str) -> Table | None:
    """The measured Table of one function, or None without a measurement. The fixture is decoded once per process
    and path, each function's table built when first needed (this package's kernel needs only ex2 and rcp)."""
    path = fixture_path()
    if _STATE.get("path", ()) != path:
        _STATE.clear()
        _STATE.update(path=path, sweep=load_sweep(path) if path else None, tables={})
    if _STATE["sweep"] is None:
        return None
    if name not in _STATE["tables"]:
        _STATE["tables"][name] = table_from_sweep(_STATE["sweep"], name)
    return _STATE["tables"][name]


def evaluate(name: str, x: np.ndarray, ftz: bool, rng=None) -> np.ndarray:
    """The f32 results of `name`.approx{.ftz}.f32 on f32 inputs x (before .ftz): measured words where the sweep
    has the input, else the exact value rounded once (subnormal inputs and results flushed under ftz), plus, when
    rng is given and the function is tanh, an error drawn uniformly within the measured bound of x's binade."""
    x = np.asarray(x, np.float32)
    xin = flush_subnormal(x) if ftz else x
    exact64 = EXACT[name](xin.astype(np.float64))  # (inf, 0 and NaN as IEEE gives them: no warnings in a run)
    r = exact64.astype(np.float32)
    measured = table(name)
    if measured is None:
        return flush_subnormal(r) if ftz else r
    if rng is not None and name == "tanh":
        bound = measured.binade_bound[(x.view(np.uint32) >> 23) & 0xFF]
        drawn = exact64 + rng.uniform(-1.0, 1.0, x.shape) * bound
        r = np.where(np.isfinite(drawn), np.clip(drawn, -1.0, 1.0), exact64).astype(np.float32)
    hit, words = measured.lookup(x)
    return np.where(hit, words, flush_subnormal(r) if ftz else r)


def flush_subnormal(x: np.ndarray) -> np.ndarray:
    """f32 subnormals -> sign-preserving zero (.ftz, PTX ISA 9.7.3). x itself when it holds none (callers do not
    change the result in place)."""
    x = np.asarray(x, np.float32)
    tiny = np.abs(x) < np.float32(1.1754944e-38)
    if not np.count_nonzero(tiny):  # (the usual case: nothing to flush, and no copy to make)
        return x
    x = x.copy()
    x[tiny] = np.copysign(np.float32(0), x[tiny])
    return x
