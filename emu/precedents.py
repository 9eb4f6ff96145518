"""The hardware-verified kernels that Notes (emu.state.Note) name as precedents: each survived, on a B200, a use the
PTX ISA or its memory model does not promise. A rule without an entry here stays a Hazard."""

ARSENI = "arseni_ivanov's CuTe DSL kernel (Ozamatash/nvfp4_gpumode@1dc9713 dual_gemm/others/arseni.py), B200-verified"
NOVUS = "novus677/nvfp4_dual_gemm@4670b254 kernel 9 (B200-verified)"
GAU_V2 = "gau-nernst/gpu-mode-kernels@aee9cda nvidia/nvfp4_dual_gemm/submission_v2.py (B200-verified)"

ARSENI_INIT_UNPUBLISHED = (ARSENI + ": its 2-CTA kernel fences the mbarrier inits but never publishes them with a "
                           "cluster barrier before the peer CTA's TMA loads signal them")
NOVUS_SHORT_K = NOVUS + " on the test shape 256x512x256: it loads all 4 pipeline stages though K/256 = 1"
TMEM_LANE_FROM_WARP = (NOVUS + " (lane field 0 or 16 from every epilogue warp) and " + GAU_V2
                       + " (the odd CTA of a pair at lane field 128 + 32w + 16m)")
ARSENI_C_STORE = (ARSENI + ": its epilogue writes the C tile to shared memory from every warp, warp 0 issues the TMA "
                  "store at once (no fence.proxy.async, no barrier first) and never waits for it")
ARSENI_TMEM_COLUMNS = (ARSENI + ": its 1-CTA 128x128 kernels allocate 256 tensor-memory columns and use 304 (two "
                       "128-column accumulators, then the SFA, SFB1, SFB2 columns); one CTA per SM, so nothing else "
                       "allocates them")
