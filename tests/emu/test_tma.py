"""emu/tma.py against the PTX ISA's swizzle rule computed by hand, its element types, out-of-bound fill and alignment
rules, TMA stores, bulk async-groups, and the shared-memory alignment of tensor copies on the machine. Against ground
truth from a real GPU (an H200's driver encodings and tile loads): tests/calibration/test_tma_gpu.py."""
from types import SimpleNamespace

import numpy as np
import pytest

from emu import ops_async, tma
from emu.isa import BLOCK
from emu.ptx import Imm
from emu.state import GlobalMemory, Hazard
from tests.emu.ptx_kit import WAIT, kernel_text, run_ptx, static_pass


def pattern(n):
    """The probe's global data (calibration/tma_gpu.py): byte i of its allocation."""
    i = np.arange(n, dtype=np.uint64)
    return ((i * 131 + (i >> 8) * 7 + (i >> 16) * 3 + 17) & 0xFF).astype(np.uint8)


def _identity_global(size):
    g = (np.arange(size) % 251).astype(np.uint8)
    base = 0x7F00_0000_0000
    return base, g, (lambda a, n: g[a - base:a - base + n].copy())


@pytest.mark.parametrize("swizzle,mask", [(1, 1), (2, 3), (3, 7)])
def test_swizzle_rule_by_hand(swizzle, mask):
    """PTX ISA "Tensor-map swizzling modes": the 16-byte chunk index (address bits [4:6]) XOR address bits
    [7:9], limited to 1/2/3 bits for 32B/64B/128B. Rows of span bytes, destinations only 128-aligned."""
    span = {1: 32, 2: 64, 3: 128}[swizzle]
    rows = 16
    base, g, read = _identity_global(span * rows)
    raw = tma.encode_tensor_map(base, 0, [span, rows], [span], [span, rows], swizzle=swizzle)
    t = tma.decode_tensor_map(raw)
    for smem_addr in (0, 128, 384, 1024 + 640):
        out = tma.tile_bytes(t, [0, 0], read, smem_addr)
        for r in range(rows):
            for chunk in range(span // 16):
                logical = r * span + chunk * 16  # byte offset of this chunk in the unswizzled box
                addr = smem_addr + logical
                phys = addr ^ (((addr >> 7) & mask) << 4)
                assert (out[phys - smem_addr:phys - smem_addr + 16] == g[logical:logical + 16]).all()


def test_fp4_packed_type_counts_elements_and_copies_bytes():
    """16U4_ALIGN8B (hardware code 11, what the CuTe DSL encodes for Float4E2M1FN): dims, box and coordinates in
    4-bit elements; the bytes (two values each, low nibble first as stored) are copied unchanged."""
    k, rows = 1024, 8  # K elements per row: 512 bytes
    base, g, read = _identity_global(k // 2 * rows)
    t = tma.decode_tensor_map(tma.encode_tensor_map(base, 11, [k, rows], [k // 2], [256, 4], swizzle=0))
    assert t.elem_bits == 4 and tma.box_bytes(t) == 128 * 4
    out = tma.tile_bytes(t, [512, 2], read, 0)
    for r in range(4):
        assert (out[r * 128:(r + 1) * 128] == g[(2 + r) * 512 + 256:(2 + r) * 512 + 384]).all()
    with pytest.raises(Hazard):
        tma.tile_bytes(t, [3, 0], read, 0)  # an odd 4-bit coordinate splits a byte


def test_oob_rows_and_columns_fill_zero():
    base, g, read = _identity_global(64 * 4)
    t = tma.decode_tensor_map(tma.encode_tensor_map(base, 0, [48, 4], [64], [32, 4], swizzle=0))
    out = tma.tile_bytes(t, [32, 2], read, 0).reshape(4, 32)
    assert (out[:2, :16] == np.stack([g[2 * 64 + 32:2 * 64 + 48], g[3 * 64 + 32:3 * 64 + 48]])).all()
    assert (out[:, 16:] == 0).all() and (out[2:] == 0).all()


def test_alignment_rules():
    base, g, read = _identity_global(4096)
    t = tma.decode_tensor_map(tma.encode_tensor_map(base, 0, [128, 8], [128], [128, 8], swizzle=3))
    with pytest.raises(Hazard):
        tma.tile_bytes(t, [0, 0], read, 16)  # measured on the H200: a 16-byte aligned destination faults
    wide = tma.decode_tensor_map(tma.encode_tensor_map(base, 6, [256, 8], [512], [128, 8], swizzle=3))
    with pytest.raises(Hazard):
        tma.tile_bytes(wide, [0, 0], read, 0)  # 256-byte rows exceed the 128B swizzle span
    with pytest.raises(Hazard):
        tma.tile_bytes(t, [0], read, 0)  # wrong number of coordinates


def test_str_is_readable():
    t = tma.decode_tensor_map(tma.encode_tensor_map(0x1000, 11, [512, 256, 1], [256, 65536], [256, 128, 1],
                                                    swizzle=3, l2_promotion=2, flags=2))
    s = str(t)
    assert "16U4_ALIGN8B" in s and "dims=[512, 256, 1]" in s and "128B" in s


# ------------------------------------------------------------------ TMA stores and bulk async-groups
class _FakeWarp:
    def read(self, op, ty, ex=None):
        return np.full(32, op.value, np.int64)


class _FakeIns:
    operands = (Imm(2, False),)


def _token(done):
    return SimpleNamespace(done=done)  # an operation's completion flag, all a group holds of it


def test_bulk_wait_group_needs_every_older_group_complete():
    """PTX ISA cp.async.bulk.wait_group N: wait until at most the N most recent bulk async-groups are pending and
    every earlier group is complete. A complete recent group does not let an older pending one slip into the N."""
    w, mask = _FakeWarp(), np.zeros(32, bool)
    mask[3] = True
    old = _token(False)
    w.async_groups = {"bulk": ({}, {3: [[old], [_token(True)], [_token(True)]]})}
    assert ops_async.BulkWaitGroup.execute(None, w, _FakeIns, mask) is BLOCK
    old.done = True
    assert ops_async.BulkWaitGroup.execute(None, w, _FakeIns, mask) is None
    w.async_groups = {"bulk": ({}, {3: [[_token(True)], [_token(False)], [_token(False)]]})}
    assert ops_async.BulkWaitGroup.execute(None, w, _FakeIns, mask) is None  # the 2 pending are the 2 most recent


@pytest.mark.parametrize("swizzle", [0, 1, 2, 3])
def test_tma_store_inverts_the_load(swizzle):
    """tile_store writes back exactly what tile_writes loaded (same box, same address swizzle); out-of-bound box
    elements are not written."""
    g = GlobalMemory()
    rows, cols = 100, 96  # fp16, row pitch 192 bytes
    src = np.random.default_rng(1).integers(0, 256, rows * cols * 2, dtype=np.uint8)
    a = g.alloc_array(src)
    inner = {0: 32, 1: 16, 2: 32, 3: 64}[swizzle]  # elements; inner box bytes <= the swizzle span
    raw = tma.encode_tensor_map(a, 6, [cols, rows], [cols * 2], [inner, 64], swizzle=swizzle)
    tm = tma.decode_tensor_map(raw)
    for coords in ([0, 0], [cols - inner, 64], [32, 60]):  # the last two run past row 99
        smem, written = tma.tile_writes(tm, coords, g.read, 1024)
        b = g.alloc(rows * cols * 2, fill=0xAB)
        tm_b = tma.decode_tensor_map(tma.encode_tensor_map(b, 6, [cols, rows], [cols * 2], [inner, 64], swizzle=swizzle))
        tma.tile_store(tm_b, coords, smem, 1024, g.write)
        got = g.read(b, rows * cols * 2).reshape(rows, cols * 2)
        want = np.full((rows, cols * 2), 0xAB, np.uint8)
        r0, c0 = coords[1], coords[0]
        r1 = min(r0 + 64, rows)
        want[r0:r1, 2 * c0:2 * (c0 + inner)] = src.reshape(rows, cols * 2)[r0:r1, 2 * c0:2 * (c0 + inner)]
        assert (got == want).all(), (swizzle, coords)


# ------------------------------------------------------------------ shared-memory alignment of tensor copies
# The rule (emu.tma.SMEM_ALIGN): 128 bytes for every swizzle mode, per the CUDA C++ Programming Guide's TMA tables;
# NVIDIA/cutlass PR #1870 saw the fault on hardware. Hand-written PTX on the machine: lane 0 of one warp copies one
# 8 x 128-byte SW128 box between global memory and smem + 1024 + off. With `off` a kernel parameter the static pass
# cannot judge the address, so the check at issue does; with `off` an immediate the static pass does.
ALIGN_PROLOGUE = """
    ld.param.u64 %rd1, [out];
    mov.u64 %rd5, tmap;
    mov.u32 %r1, %tid.x;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra DONE_ALL;
    mov.u32 %r9, smem;
    {offset}
    add.s32 %r5, %r9, 1024;
    add.s32 %r3, %r5, %r2;
    mov.b32 %r7, 0;
"""
ALIGN_LOAD = """
    mov.b32 %r4, 1;
    mbarrier.init.shared.b64 [%r9], %r4;
    mov.b32 %r4, 1024;
    mbarrier.arrive.expect_tx.shared.b64 _, [%r9], %r4;
    cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes [%r3], [%rd5, {%r7, %r7}], [%r9];
""" + WAIT + """    ld.shared.v4.u32 {%r10, %r11, %r12, %r13}, [%r3];
    st.global.v4.u32 [%rd1], {%r10, %r11, %r12, %r13};
    st.global.u32 [%rd1+16], %r3;
"""
ALIGN_STORE = """
    cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%rd5, {%r7, %r7}], [%r3];
    cp.async.bulk.commit_group;
    cp.async.bulk.wait_group 0;
"""
DYNAMIC_OFFSET = "ld.param.u32 %r2, [off];"


def align_kernel(copy: str, offset: str) -> str:
    return kernel_text(f"{ALIGN_PROLOGUE.replace('{offset}', offset)}{copy}DONE_ALL:\n    ret;",
                       ".param .u64 out, .param .u32 off, .param .align 64 .b8 tmap[128]")


def align_run(copy: str, off: int):
    """(out bytes, the global tensor) after one run with smem + 1024 + off as the copy's shared-memory address."""
    tensor = pattern(1024)

    def tmap(gmem, out):
        base = out if copy is ALIGN_STORE else gmem.alloc_array(tensor)
        return tma.encode_tensor_map(base, 0, dims=[128, 8], strides=[128], box=[128, 8], swizzle=3)

    return run_ptx(align_kernel(copy, DYNAMIC_OFFSET), [off, tmap], out_words=256).raw, tensor


@pytest.mark.parametrize("copy,role", [(ALIGN_LOAD, "destination"), (ALIGN_STORE, "source")], ids=["load", "store"])
def test_tensor_copy_shared_address_64_aligned_is_a_hazard_at_issue(copy, role):
    with pytest.raises(Hazard) as e:
        align_run(copy, 64)
    msg = str(e.value)
    assert f"its {role}" in msg and "cp.async.bulk.tensor.2d" in msg and "PTX line" in msg
    assert "not 128-byte aligned" in msg and "Programming Guide" in msg


def test_tensor_load_to_a_128_aligned_destination_lands_swizzled_by_address():
    out, g = align_run(ALIGN_LOAD, 128)
    addr = int(out[16:20].view(np.uint32)[0])
    assert addr % 128 == 0 and addr % 1024 == 128  # 128-aligned only: the 128B pattern starts one row in
    image = tma.tile_bytes(tma.decode_tensor_map(tma.encode_tensor_map(0, 0, [128, 8], [128], [128, 8], swizzle=3)),
                           [0, 0], lambda a, n: g[a:a + n].copy(), addr & 0xFFFFFF)
    assert (out[:16] == image[:16]).all() and (image[:16] == g[16:32]).all()  # chunk 0 of row 0 holds bytes 16..31


def test_tensor_store_from_a_128_aligned_source_is_no_hazard():
    out, _ = align_run(ALIGN_STORE, 128)
    assert out.size == 1024  # the store ran (its bytes are smem's zeros; the hazard test is the point)


@pytest.mark.parametrize("copy,role", [(ALIGN_LOAD, "destination"), (ALIGN_STORE, "source")], ids=["load", "store"])
def test_static_pass_flags_a_tensor_copy_shared_address_it_can_prove_misaligned(copy, role):
    assert static_pass(align_kernel(copy, "mov.b32 %r2, 128;")) == ""
    found = static_pass(align_kernel(copy, "mov.b32 %r2, 64;"))
    assert "[alignment]" in found and f"tensor copy's shared-memory {role}" in found and "not a multiple of 128" in found
