"""emu: tcgen05.mma .collector::a::{fill, use, lastuse, discard} (PTX ISA tcgen05.mma, .collector_usage;
emu.tcgen05 module docstring Q6).

Expected values come from the independent helpers of tests/emu/test_tcgen05.py (TMA SWIZZLE_128B placement,
torch e4m3 decoding, a float64 einsum), not from emu.tcgen05's own operand fetch.
"""
import numpy as np
import pytest

from emu.isa import decode_kernel
from emu.ptx import parse_module
from emu.state import Hazard, Unsupported
from emu.tcgen05 import mma, tmem_alloc, tmem_copy
from tests.emu.ptx_kit import kernel_text
from tests.emu.test_tcgen05 import (AB_DESC, IDESC_128x64, IDESC_256x64, SF_DESC, Stage, desc_at, load_cta,
                                    make_cluster, place_sw128_tile, random_sf, read_d, ref_product)

KB = 1  # the k-block every MMA here reads
KS, SS = slice(64 * KB, 64 * KB + 64), slice(4 * KB, 4 * KB + 4)


def _setup(ncta, n, seed):
    rng = np.random.default_rng(seed)
    ctas = make_cluster(ncta).ctas
    base = tmem_alloc(ctas, 512)
    a = rng.integers(0, 16, (128 * ncta, 256), dtype=np.uint8)
    b1 = rng.integers(0, 16, (n, 256), dtype=np.uint8)
    sfa, sfb = random_sf(rng, 128 * ncta), random_sf(rng, 128)
    half = n // ncta
    for v, cta in enumerate(ctas):
        load_cta(cta, a[128 * v:128 * v + 128], b1[half * v:half * v + half], sfa[128 * v:128 * v + 128], sfb)
    tmem_copy(ctas, base + 256, desc_at(SF_DESC, Stage.SFA_BASE + 512 * KB))
    tmem_copy(ctas, base + 260, desc_at(SF_DESC, Stage.SFB_BASE + 512 * KB))
    return rng, ctas, base, a, b1, sfa, sfb


def _mma(ctas, d_col, base, idesc, collector, b_base=Stage.B_BASE, accumulate=False):
    mma(ctas, d_col, desc_at(AB_DESC, Stage.A_BASE + 32 * KB), desc_at(AB_DESC, b_base + 32 * KB), idesc,
                     base + 256, base + 260, accumulate, "mxf4nvf4", collector=collector)


def _d(ctas, d_col, n):
    return np.concatenate([read_d(c, d_col, n) for c in ctas])


@pytest.mark.parametrize("ncta,idesc", [(1, IDESC_128x64), (2, IDESC_256x64)])
def test_fill_then_lastuse_equals_two_smem_reads(ncta, idesc):
    """B1 product with fill, B2 product with lastuse: each equals the product of A as shared memory holds it."""
    n = 64
    rng, ctas, base, a, b1, sfa, sfb = _setup(ncta, n, 20 + ncta)
    b2 = rng.integers(0, 16, (n, 256), dtype=np.uint8)
    b2_base = Stage.B_BASE + 16 * 1024
    for v, cta in enumerate(ctas):
        place_sw128_tile(cta.smem, b2_base, b2[v * n // ncta:(v + 1) * n // ncta])
    _mma(ctas, base, base, idesc, "fill")
    assert all(c.a_collector is not None for c in ctas)
    _mma(ctas, base + 64, base, idesc, "lastuse", b_base=b2_base)
    assert all(c.a_collector is None for c in ctas)
    np.testing.assert_allclose(_d(ctas, base, n), ref_product(a[:, KS], sfa[:, SS], b1[:, KS], sfb[:n, SS]), rtol=2e-7)
    np.testing.assert_allclose(_d(ctas, base + 64, n), ref_product(a[:, KS], sfa[:, SS], b2[:, KS], sfb[:n, SS]), rtol=2e-7)


@pytest.mark.parametrize("ncta,idesc", [(1, IDESC_128x64), (2, IDESC_256x64)])
def test_use_reads_the_collector_not_shared_memory(ncta, idesc):
    """A rewritten in shared memory between fill and use/lastuse: the use still multiplies the filled A
    (each CTA of a pair its own rows); a discard MMA afterwards reads the new A."""
    n = 64
    rng, ctas, base, a, b1, sfa, sfb = _setup(ncta, n, 30 + ncta)
    _mma(ctas, base, base, idesc, "fill")
    a_new = rng.integers(0, 16, a.shape, dtype=np.uint8)
    for v, cta in enumerate(ctas):
        place_sw128_tile(cta.smem, Stage.A_BASE, a_new[128 * v:128 * v + 128])
    old = ref_product(a[:, KS], sfa[:, SS], b1[:, KS], sfb[:n, SS])
    new = ref_product(a_new[:, KS], sfa[:, SS], b1[:, KS], sfb[:n, SS])
    assert not np.allclose(old, new)
    _mma(ctas, base + 64, base, idesc, "use")
    np.testing.assert_allclose(_d(ctas, base + 64, n), old, rtol=2e-7)
    assert all(c.a_collector is not None for c in ctas)  # use keeps the collector
    _mma(ctas, base + 128, base, idesc, "lastuse")
    np.testing.assert_allclose(_d(ctas, base + 128, n), old, rtol=2e-7)
    _mma(ctas, base + 192, base, idesc, "discard")
    np.testing.assert_allclose(_d(ctas, base + 192, n), new, rtol=2e-7)


@pytest.mark.parametrize("collector", ["use", "lastuse"])
def test_use_of_an_empty_collector_is_a_hazard(collector):
    _, ctas, base, *_ = _setup(1, 64, 40)
    with pytest.raises(Hazard, match="collector is empty"):
        _mma(ctas, base, base, IDESC_128x64, collector)  # never filled
    _mma(ctas, base, base, IDESC_128x64, "fill")
    _mma(ctas, base, base, IDESC_128x64, "lastuse")
    with pytest.raises(Hazard, match="collector is empty"):
        _mma(ctas, base, base, IDESC_128x64, collector)  # emptied by lastuse
    _mma(ctas, base, base, IDESC_128x64, "fill")
    _mma(ctas, base, base, IDESC_128x64, "discard")
    with pytest.raises(Hazard, match="collector is empty"):
        _mma(ctas, base, base, IDESC_128x64, collector)  # emptied by discard


def test_collectors_are_per_cta():
    """cta_group::2 fills both CTAs of the pair; a cta_group::1 MMA of one CTA empties only its own."""
    _, ctas, base, *_ = _setup(2, 64, 50)
    _mma(ctas, base, base, IDESC_256x64, "fill")
    _mma(ctas[1:], base, base, IDESC_128x64, "discard")
    assert ctas[0].a_collector is not None and ctas[1].a_collector is None
    with pytest.raises(Hazard, match="collector is empty"):
        _mma(ctas, base, base, IDESC_256x64, "lastuse")


def test_unknown_collector_op():
    _, ctas, base, *_ = _setup(1, 64, 60)
    with pytest.raises(Unsupported):
        _mma(ctas, base, base, IDESC_128x64, "keep")


PTX = kernel_text("""
  tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.scale_vec::4X.collector::a::fill [%r1], %rd1, %rd2, %r2, [%r3], [%r4], %p1;
  tcgen05.mma.cta_group::2.kind::mxf4nvf4.block_scale.block16.collector::a::use [%r1], %rd1, %rd2, %r2, [%r3], [%r4], %p1;
  tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.block16.collector::a::lastuse [%r1], %rd1, %rd2, %r2, [%r3], [%r4], %p1;
  tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.block16.collector::a::discard [%r1], %rd1, %rd2, %r2, [%r3], [%r4], %p1;
  tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.block16 [%r1], %rd1, %rd2, %r2, [%r3], [%r4], %p1;
  ret;""", params="", decls="  .reg .pred %p<3>;\n  .reg .b32 %r<8>;\n  .reg .b64 %rd<4>;", smem=False)


def test_decode_collector_qualifiers():
    k = parse_module(PTX)
    decode_kernel(k)
    mmas = [i for i in k.instrs if i.opcode.startswith("tcgen05.mma")]
    # (block16 is scale_vec::4X: K 64 / 16 scales a row)
    assert [i.info for i in mmas] == [("mma", n, "mxf4nvf4", 4, usage) for n, usage in (
        (1, "fill"), (2, "use"), (1, "lastuse"), (1, "discard"), (1, "discard"))]


@pytest.mark.parametrize("mods", [".collector::a::fill.collector::a::lastuse", ".collector::b0::fill",
                                  ".collector::a::keep"])
def test_decode_rejects_bad_collector_qualifiers(mods):
    bad = PTX.replace(".collector::a::fill [", mods + " [")
    with pytest.raises(Unsupported):
        decode_kernel(parse_module(bad))
