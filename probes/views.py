"""Check, on any CUDA GPU, that the kernel's operand views address the leaderboard's bytes.

A small device kernel (no tcgen05 code, so any arch runs it) receives the tensors through the same TVM-FFI
fake operands as custom_kernel and reports: the FP4 operand's shape and strides as the kernel sees them
(K must count elements: TVM-FFI maps float4_e2m1fn_x2 bytes to FP4 pairs), and every scale byte read
through submission.scale_view, which must equal the plain [rows, K/16, L] scales the reference uses.
Exit 0 and print "views ok" when both hold. Run by tests/package/test_submission.py in a subprocess.
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import torch  # noqa: E402

import cutlass  # noqa: E402
import cutlass.cute as cute  # noqa: E402
from cutlass.cute.runtime import make_fake_compact_tensor  # noqa: E402

import reference  # noqa: E402
import submission as S  # noqa: E402
from probes.device_stub import exit_unless_cuda_gpu  # noqa: E402

M, N, K, L = 256, 128, 512, 1
SF_K = K // S.SF_VEC_SIZE


@cute.kernel
def probe(a: cute.Tensor, sfa: cute.Tensor, seen: cute.Tensor, dims: cute.Tensor):
    tidx = cute.arch.thread_idx()[0]
    if tidx == 0:
        for i, extent in enumerate((a.shape[0], a.shape[1], a.stride[0], a.stride[1])):
            dims[i] = cutlass.Int32(extent)
    scales = S.scale_view(sfa.iterator, a.shape, dtype=cutlass.Uint8)
    for j in range(SF_K):
        seen[tidx, j] = cutlass.Int32(scales[(tidx, j * S.SF_VEC_SIZE, 0)])


@cute.jit
def host(a: cute.Tensor, sfa: cute.Tensor, seen: cute.Tensor, dims: cute.Tensor):
    probe(a, sfa, seen, dims).launch(grid=[1, 1, 1], block=[M, 1, 1])


def main():
    data = reference.generate_input(M, N, K, L, seed=3, mode="strict", device="cuda")
    seen = torch.full((M, SF_K), -1, dtype=torch.int32, device="cuda")
    dims = torch.zeros(8, dtype=torch.int32, device="cuda")
    fakes = S._fake_operands()
    sym = cute.sym_int
    fake_seen = make_fake_compact_tensor(cutlass.Int32, (sym(), sym()), stride_order=(1, 0))
    fake_dims = make_fake_compact_tensor(cutlass.Int32, (sym(),))
    run = cute.compile(host, fakes[0], fakes[3], fake_seen, fake_dims, options="--enable-tvm-ffi")
    run(data[0], data[6], seen, dims)
    torch.cuda.synchronize()
    got_dims = dims[:4].tolist()
    if got_dims != [M, K, K, 1]:
        sys.exit(f"FP4 operand seen as shape ({got_dims[0]}, {got_dims[1]}) strides ({got_dims[2]}, {got_dims[3]}); "
                 f"expected ({M}, {K}) and ({K}, 1) in FP4 elements")
    expected = data[3][:, :, 0].view(torch.uint8).to(torch.int32)
    bad = (seen != expected).nonzero()
    if len(bad):
        i, j = bad[0].tolist()
        sys.exit(f"scale_view mismatch at {len(bad)} of {seen.numel()} scales; first (row {i}, block {j}): "
                 f"read {seen[i, j].item()}, reference {expected[i, j].item()}")
    print("views ok")


if __name__ == "__main__":
    exit_unless_cuda_gpu("probes/views.py", "a CUDA GPU (any arch)")
    main()
