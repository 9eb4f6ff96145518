"""The MUFU model (emu/mufu.py).

Without a measurement the emulator's ex2/rcp/tanh .approx are the exact values rounded once. With a fixture (the
sweep calibration/mufu.py writes) every swept input returns the measured word, and tanh errors are drawn within the
measured bound under non-default schedules. The tests use a synthetic fixture (exact values plus a deterministic
few-ulp jitter), written as `python3 -m calibration.mufu --gpu` writes the GPU's words, to check that machinery. The
probe and the real fixture: tests/calibration/test_mufu.py.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

from emu import mufu
from calibration import mufu as probe


def _jitter(arg) -> np.ndarray:
    b = np.asarray(arg, np.float32).view(np.uint32).astype(np.uint64)
    return (((b * np.uint64(2654435761)) >> np.uint64(7)) % np.uint64(7)).astype(np.int64) - 3


def _synthetic_words(x: np.ndarray) -> np.ndarray:
    """[len(x), 6] words: the exact columns, the four MUFU ones moved by a deterministic jitter of their argument."""
    x = x.astype(np.float32)
    h = (x * np.float32(0.5)).astype(np.float32)
    with np.errstate(all="ignore"):
        xf = mufu.flush_subnormal(x).astype(np.float64)
        cols = [np.tanh(h.astype(np.float64)), None, np.tanh(x.astype(np.float64)), np.exp2(xf), 1.0 / xf, x * 0]
        words = np.zeros((x.size, 6), np.int64)
        for i, (c, arg) in enumerate(zip(cols, (h, None, x, x, x, x))):
            if c is not None:
                f = c.astype(np.float32)
                words[:, i] = f.view(np.uint32).astype(np.int64) + np.where(np.isfinite(f) & (i < 5), _jitter(arg), 0)
        t = words[:, 0].astype(np.uint32).view(np.float32)
        words[:, 1] = (h.astype(np.float64) * t + h).astype(np.float32).view(np.uint32)
    return words.astype(np.uint32)


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    params = probe.sweep_parameters()
    band_x, dense_x = probe.sweep_inputs(params)
    words = _synthetic_words(np.concatenate([band_x, dense_x]))
    path = tmp_path_factory.mktemp("mufu") / "mufu_synthetic.npz"
    probe.write_fixture(str(path), params, words, {"card": "synthetic"})  # what --gpu does with the GPU's words
    return path, band_x, dense_x, words


@pytest.fixture
def installed(synthetic, monkeypatch):
    monkeypatch.setenv("EMU_MUFU_FIXTURE", str(synthetic[0]))
    yield synthetic
    monkeypatch.setenv("EMU_MUFU_FIXTURE", "none")
    assert mufu.table("tanh") is None


def test_word_encoding_is_lossless():
    rng = np.random.default_rng(0)
    w = np.concatenate([rng.integers(0, 1 << 32, 1000, dtype=np.uint64), np.arange(5000) + 7 * 10 ** 8])
    w = w.astype(np.uint32)
    assert np.array_equal(mufu.decode_words(**mufu.encode_words(w)), w)


def test_fixture_round_trip_and_size(synthetic):
    path, band_x, dense_x, words = synthetic
    s = mufu.load_sweep(path)
    assert s.card == "synthetic" and np.array_equal(s.band_x, band_x) and np.array_equal(s.dense_x, dense_x)
    assert np.array_equal(s.band["silu_tanh"], words[:band_x.size, 1])
    assert np.array_equal(s.dense["rcp"], words[band_x.size:, 4])
    assert os.path.getsize(path) < 2 << 20  # "compact": a few-ulp error pattern costs ~1 bit per word


def test_without_a_measurement_values_are_exact_rounded(monkeypatch):
    monkeypatch.setenv("EMU_MUFU_FIXTURE", "none")
    x = np.linspace(-20, 20, 4001, dtype=np.float32)
    assert np.array_equal(mufu.evaluate("tanh", x, False, np.random.default_rng(1)),
                          np.tanh(x.astype(np.float64)).astype(np.float32))  # no measurement: no draws either
    assert np.array_equal(mufu.evaluate("ex2", np.float32([1e-40, 3.0]), True), np.float32([1.0, 8.0]))


def test_measured_words_are_returned_for_swept_inputs(installed):
    _, band_x, dense_x, words = installed
    h = (band_x * np.float32(0.5)).astype(np.float32)
    assert np.array_equal(mufu.evaluate("tanh", h, False).view(np.uint32), words[:band_x.size, 0])
    assert np.array_equal(mufu.evaluate("ex2", dense_x, True).view(np.uint32), words[band_x.size:, 3])
    off = np.float32([0.123456789, -7.7654321])  # not swept: exact-rounded
    assert np.array_equal(mufu.evaluate("tanh", off, False), np.tanh(off.astype(np.float64)).astype(np.float32))


def test_tanh_draws_stay_within_the_measured_bound(installed):
    rng = np.random.default_rng(3)
    x = rng.uniform(-12, 12, 200_000).astype(np.float32)
    got = mufu.evaluate("tanh", x, False, rng).astype(np.float64)
    exact = np.tanh(x.astype(np.float64))
    bound = mufu.table("tanh").binade_bound[(x.view(np.uint32) >> 23) & 0xFF]
    assert np.all(np.abs(got - exact) <= bound + 2.0 ** -24)  # within the bound (plus the final f32 rounding)
    assert np.mean(got != exact.astype(np.float32)) > 0.5  # and the draws do move the values
