"""Check, on any GPU with TMA (sm_90+), that the kernel's TMA loads fetch the right bytes.

The real host side (DualGemmKernel._launch: operand views, TMA atoms, smem layouts, scheduler grid) and
the kernel's own `_ring_and_loads` and `_load_rows` run unchanged; only the device body differs: every
CTA loads k-tile K_TILE_INDEX of its first tile into stage 0 with the kernel's TmaLoad list, and the CTA
on TILE dumps that stage's raw bytes into C's memory. On the host, each operand's dump must hold exactly
the bytes of the tile the kernel should have fetched, compared as a multiset of 16-byte chunks (row by
row for A/B1/B2), so the check does not depend on the smem swizzle.

Which loads run depends on the GPU: the FP4 operands' tensor maps use sub-byte TMA element types that
only SM100 has (on an H200 their first UTMALDG is an illegal instruction: measured), so below SM100 only
the three scale loads (SFA, SFB1, SFB2: byte types) are checked. 1-CTA configs only (a 2-CTA TMA op
cannot be built for a non-SM100 arch). Exit 0 and print "tma ok". Run by tests/package/test_submission.py.
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import torch  # noqa: E402

import cutlass  # noqa: E402
import cutlass.cute as cute  # noqa: E402

import reference  # noqa: E402
import submission as S  # noqa: E402
from probes.device_stub import DeviceStub, KernelArgs, admit_this_gpu_for_host_side, exit_unless_cuda_gpu  # noqa: E402

M, N, K, L = 256, 512, 512, 1
K_TILE_INDEX = 1  # the second k-tile: a wrong K offset shows
TILE = (1, 3)  # (M tile, N tile): odd N tile, so a 64-wide tile reads the upper half of its SFB atoms
NAMES = ("A", "B1", "B2", "SFA", "SFB1", "SFB2")  # ring order, as in TmaLoad


class TmaProbe(DeviceStub):
    @cute.jit
    def body(self, args: KernelArgs):
        warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        tidx = cute.arch.thread_idx()[0]
        storage, ring, loads, k_tile_cnt, tCgC = self.ring_and_loads(args)
        tiled_mma, mC_mnl = args.tiled_mma, args.mC_mnl
        tile_sched, work_tile = self._first_work_tile(args.tile_sched_params)
        tile_m, tile_n, tile_l = self._mma_tile_coord(work_tile.tile_idx, tiled_mma)
        row_tiles = self._load_rows(tile_m, tile_n)
        # Every CTA loads its first tile's k-tile into stage 0; the CTA on TILE dumps it.
        barrier = storage.ab_full_mbar.data_ptr()
        if tidx == 0:
            cute.arch.mbarrier_init(barrier, 1)
        cute.arch.mbarrier_init_fence()
        cute.arch.barrier()
        if tidx == 0:
            cute.arch.mbarrier_arrive_and_expect_tx(barrier, sum(self.operand_stage_bytes[i] for i in self.checked))
        if warp_idx == self.TMA_WARP:
            for load in (loads[i] for i in self.checked):
                cute.copy(
                    load.atom,
                    load.gmem[(None, row_tiles[load.rows], K_TILE_INDEX, tile_l)],
                    load.smem[(None, 0)],
                    tma_bar_ptr=barrier,
                    mcast_mask=load.mcast_mask,
                    cache_policy=load.cache_policy,
                )
        cute.arch.mbarrier_wait(barrier, 0)
        # Stage 0 of each buffer, in ring order, as raw bytes into C's memory.
        out = cute.make_tensor(cute.recast_ptr(mC_mnl.iterator, dtype=cutlass.Uint8), cute.make_layout(1 << 20))
        buffers = (storage.sA, storage.sB1, storage.sB2, storage.sSFA, storage.sSFB1, storage.sSFB2)
        dumps, offset = [], 0
        for i in self.checked:
            nbytes = self.operand_stage_bytes[i]
            src = cute.make_tensor(cute.recast_ptr(buffers[i].data_ptr(), dtype=cutlass.Uint8), cute.make_layout(nbytes))
            dumps.append((src, offset, nbytes))
            offset += nbytes
        if tile_m == TILE[0] and tile_n == TILE[1]:
            for src, start, nbytes in dumps:
                for i in range(tidx, nbytes, self.THREADS_PER_CTA):
                    out[start + i] = src[i]


def chunks(t: torch.Tensor):
    """Sorted 16-byte chunks of a uint8 tensor (a multiset, independent of their order)."""
    rows = t.reshape(-1, 16).cpu()
    return sorted(bytes(r.tolist()) for r in rows)


def stage_sizes(config: S.KernelConfig):
    """Bytes of one stage per operand: 128 bytes of FP4 per row, 16 scale bytes per row (K tile 256)."""
    cta_m, cta_n = config.cta_tile_mn
    sfb_rows = -(-cta_n // 128) * 128  # SFB moves in whole 128-row atoms
    return (cta_m * 128, cta_n * 128, cta_n * 128, cta_m * 16, sfb_rows * 16, sfb_rows * 16)


def probe_kernel(config: S.KernelConfig, checked):
    kernel = TmaProbe(config)
    kernel.checked = checked
    plan = kernel.plan()
    sizes = stage_sizes(config)
    assert sum(sizes) == plan["stage_bytes"], (sizes, plan["stage_bytes"])
    kernel.operand_stage_bytes = sizes
    return kernel


def probe_inputs(device):
    """The probe's 7 inputs (reference.generate_input's list); C zeroed, it receives the dumps."""
    data = list(reference.generate_input(M, N, K, L, seed=11, mode="strict", device=device))
    data[9].zero_()
    return data


def check(config: S.KernelConfig, checked):
    kernel = probe_kernel(config, checked)
    data = probe_inputs("cuda")
    run = cute.compile(kernel, *S._fake_operands(), options="--enable-tvm-ffi")
    run(data[0], data[1], data[2], data[6], data[7], data[8], data[9])
    torch.cuda.synchronize()
    return compare(config, checked, data)


def compare(config: S.KernelConfig, checked, data):
    """Problems found in the stage-0 dumps the probe left in C (data[9]); [] when every checked load is right."""
    cta_m, cta_n = config.cta_tile_mn
    sizes = stage_sizes(config)
    dump = data[9].permute(2, 0, 1).view(torch.uint8).reshape(-1)  # C's memory: (L, M, N) contiguous

    def expected(tile, k_tile):
        """Per operand: (bytes the kernel should load for MMA tile `tile` at `k_tile`, compare by row?)."""
        tm, tn = tile
        kb = slice(k_tile * 128, (k_tile + 1) * 128)  # 256 FP4 = 128 bytes of each row

        def rows_of(t, r0, rows):
            return t[:, :, 0].view(torch.uint8)[r0:r0 + rows, kb]

        def scale_atoms(permuted, rest_mn):
            # memory (l, rest_mn, rest_k, 512-byte atom): the 4 atoms of this k-tile's 16 scale columns
            raw = permuted.permute(5, 2, 4, 0, 1, 3).contiguous().view(torch.uint8)
            return raw.reshape(L, raw.shape[1], raw.shape[2], 512)[0, rest_mn, k_tile * 4:(k_tile + 1) * 4]

        sfb_tile = tn // 2 if cta_n == 64 else tn  # a 64-wide tile's scales sit in a 128-row atom tile
        return (
            (rows_of(data[0], tm * cta_m, cta_m), True),
            (rows_of(data[1], tn * cta_n, cta_n), True),
            (rows_of(data[2], tn * cta_n, cta_n), True),
            (scale_atoms(data[6], tm), False),
            (scale_atoms(data[7], sfb_tile), False),
            (scale_atoms(data[8], sfb_tile), False),
        )

    def matches(got, want, by_row):
        if by_row:  # each 128-byte smem row holds the chunks of one global row (the swizzle permutes chunks)
            got_rows = got.reshape(-1, 128)
            return all(chunks(got_rows[r]) == chunks(want[r]) for r in range(want.shape[0]))
        return chunks(got) == chunks(want)

    right = expected(TILE, K_TILE_INDEX)
    # Controls: the same comparison must reject the previous k-tile and another N tile (two back, so that
    # a 64-wide tile's scales come from another 128-row atom tile too).
    controls = (expected(TILE, K_TILE_INDEX - 1), expected((TILE[0], TILE[1] - 2), K_TILE_INDEX))
    offset, problems = 0, []
    for i in checked:
        nbytes, name = sizes[i], NAMES[i]
        got = dump[offset:offset + nbytes]
        offset += nbytes
        if not matches(got, *right[i]):
            problems.append(f"{config.name}: {name} stage-0 bytes are not the expected tile's")
        if matches(got, *controls[0][i]) or (i != 0 and i != 3 and matches(got, *controls[1][i])):
            problems.append(f"{config.name}: {name}: the comparison cannot tell tiles apart (control matched)")
    return problems


def main():
    arch, families = admit_this_gpu_for_host_side()
    on_sm100 = torch.cuda.get_device_capability()[0] >= 10
    checked = tuple(range(6)) if on_sm100 else (3, 4, 5)
    problems = []
    for config in (S.KernelConfig(mma_tile_mn=(128, 64)), S.KernelConfig(mma_tile_mn=(128, 128))):
        problems += check(config, checked)
    if problems:
        sys.exit("\n".join(problems))
    print(f"tma ok: {', '.join(NAMES[i] for i in checked)} ({arch})")


if __name__ == "__main__":
    exit_unless_cuda_gpu("probes/tma_loads.py", "a GPU with TMA (sm_90 or newer)", min_major=9)
    main()
