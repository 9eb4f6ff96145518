"""Check, on any CUDA GPU, that the epilogue stores each accumulator element where C needs it.

The kernel's epilogue reads accumulator register i of a subtile from tensor memory through its tcgen05.ld
copy and stores it through the matching partition of C (`_epilogue_views`, `_c_tile`, the 16-byte store
atom, the persistent tile loop). Tensor memory needs SM100, so here each register is instead given what
it would hold: on tiles with an even tile_m + tile_n its row, i.e. the tensor-memory lane the thread
reads (a 32x32b load gives thread t of the four epilogue warps lane t: the lane offset is the hardware's,
it is not in the copy's source layout, which carries only the warp's 32-lane base); on the others its
column, from the same copy's source partition of an identity tensor. If the epilogue's C views agree with
what the accumulator registers hold, every element of C equals its own row (or column) in its tile.
The shape gives 320 tiles of 128x64 over 148 CTAs, so the persistent loop visits several tiles per CTA.
1-CTA configs only. Exit 0 and print "epilogue ok". Run by tests/package/test_submission.py in a subprocess.
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

M, N, K, L = 2048, 1280, 256, 1


class EpilogueProbe(DeviceStub):
    @cute.jit
    def body(self, args: KernelArgs):
        warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        tidx = cute.arch.thread_idx()[0]
        storage, ring, loads, k_tile_cnt, tCgC = self.ring_and_loads(args)
        tiled_mma = args.tiled_mma
        # The accumulator views as the kernel builds them (a tensor-memory layout; never read here).
        acc_shape = tiled_mma.partition_shape_C(self.mma_tiler[:2])
        tCtAcc_fake = tiled_mma.make_fragment_C(cute.append(acc_shape, 2 * self.num_acc_stage))
        if warp_idx < self.MMA_WARP:
            epi = self._epilogue_views(tidx, tCtAcc_fake, tCgC)
            # (T2R, T2R_M, T2R_N, EPI_M, EPI_N): the (row base of the warp, col) in the CTA tile of each register
            coords = epi.thr_copy_t2r.partition_S(
                cute.flat_divide(cute.make_identity_tensor(self.cta_tile_mn), self.epi_tile)
            )
            tTR_rC = cute.make_rmem_tensor(epi.fragment_shape, S.C_DTYPE)
            tile_sched, work_tile = self._first_work_tile(args.tile_sched_params)
            while work_tile.is_valid_tile:
                tile_m, tile_n, tile_l = self._mma_tile_coord(work_tile.tile_idx, tiled_mma)
                tTR_gC = self._c_tile(epi, tile_m, tile_n, tile_l)
                which = (tile_m + tile_n) % 2  # 0: write the row, 1: write the column
                for subtile in cutlass.range(cute.size(tTR_gC, mode=[3])):
                    sub_coords = coords[(None, None, None, 0, subtile)]
                    for i in cutlass.range_constexpr(cute.size(tTR_rC)):
                        col = sub_coords[i][1]
                        tTR_rC[i] = cutlass.Float16(cutlass.Float32(tidx + which * (col - tidx)))
                    cute.copy(epi.store, tTR_rC, tTR_gC[(None, None, None, subtile)])
                tile_sched.advance_to_next_work()
                work_tile = tile_sched.get_current_work()


def probe_inputs(device):
    """The probe's 7 inputs (reference.generate_input's list); C poisoned with NaN: every element must be written."""
    data = list(reference.generate_input(M, N, K, L, seed=13, device=device))
    data[9].fill_(float("nan"))
    return data


def check(config: S.KernelConfig):
    data = probe_inputs("cuda")
    run = cute.compile(EpilogueProbe(config), *S._fake_operands(), options="--enable-tvm-ffi")
    run(data[0], data[1], data[2], data[6], data[7], data[8], data[9])
    torch.cuda.synchronize()
    return compare(config, data)


def compare(config: S.KernelConfig, data):
    """Problems found in the C the probe wrote (data[9]); [] when every element holds its row (or column)."""
    device = data[9].device
    cta_m, cta_n = config.cta_tile_mn
    rows = torch.arange(M, device=device).view(M, 1) % cta_m
    cols = torch.arange(N, device=device).view(1, N) % cta_n
    odd_tile = (torch.arange(M, device=device).view(M, 1) // cta_m + torch.arange(N, device=device).view(1, N) // cta_n) % 2
    expected = torch.where(odd_tile == 1, cols, rows).to(torch.float16)
    got = data[9][:, :, 0]
    wrong = (got != expected) | got.isnan()
    if wrong.any():
        r, c = wrong.nonzero()[0].tolist()
        return [f"{config.name}: {int(wrong.sum())} of {M * N} elements of C misplaced or unwritten; first at "
                f"({r}, {c}): {got[r, c].item()}, expected {expected[r, c].item()}"]
    return []


def main():
    arch, _ = admit_this_gpu_for_host_side()
    problems = []
    for config in (S.KernelConfig(mma_tile_mn=(128, 64)), S.KernelConfig(mma_tile_mn=(128, 128)),
                   S.KernelConfig(mma_tile_mn=(128, 64), epi_tile_n=16)):
        problems += check(config)
    if problems:
        sys.exit("\n".join(problems))
    print(f"epilogue ok ({arch})")


if __name__ == "__main__":
    exit_unless_cuda_gpu("probes/epilogue.py", "a CUDA GPU (any arch)")
    main()
