"""A functional SM100 (B200) emulator for the PTX of this package's kernel.

Modules, one concern each:
  ptx        the parser: PTX text -> Kernel with decoded instructions
  state      machine state: global memory, CTAs (shared and tensor memory), clusters, errors
  simt       warps: lanes, divergence, typed registers
  isa        the opcode table (decode once, execute per warp)
  ops_alu, ops_control, ops_memory, ops_async   one small function per opcode family
  mbarrier   mbarrier phase / arrival / tx-count semantics, happens-before of their initialisation
  ordering   tcgen05 ordering and proxy fences the ISA requires (notes where hardware-verified kernels rely on more)
  tma        tensor-map decode and tile fetch (swizzle, FP4 packing, multicast)
  tcgen05    tensor memory, descriptors, block-scaled MMA, tcgen05.cp/ld
  mufu       ex2/rcp/tanh .approx values: exact-rounded, or a hardware measurement where one exists
  precedents the hardware-verified kernels that verdict notes name (a model violation they survive)
  lint       the kernel-wide static pass over the PTX (cta_group, mbarrier state spaces, alloc pairing, alignment)
  machine    clusters, the seeded scheduler and its policies, the asynchronous engine, deadlock reports
  launch     capture of the real host-side launch (grid, cluster, smem, parameter bytes); the B200's launch limits
  run        inputs -> emulated kernel -> C, compared with reference.py
"""
from . import ops_alu, ops_async, ops_control, ops_memory  # noqa: F401  (fill the opcode table)
