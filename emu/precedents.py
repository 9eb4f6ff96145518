"""The hardware-verified kernels that Notes (emu.state.Note) name as precedents: each survived, on a B200, a use the
PTX ISA or its memory model does not promise. A rule without an entry here stays a Hazard."""

ARSENI = "arseni_ivanov's CuTe DSL kernel (Ozamatash/nvfp4_gpumode@1dc9713 dual_gemm/others/arseni.py), B200-verified"
NOVUS = "novus677/nvfp4_dual_gemm@4670b254 kernel 9 (B200-verified)"
GAU_V2 = "gau-nernst/gpu-mode-kernels@aee9cda nvidia/nvfp4_dual_gemm/submission_v2.py (B200-verified)"

ARSENI_INIT_UNPUBLISHED = (ARSENI + ": its 2-CTA kernel fences the mbarrier inits but never publishes them with a "
                           "cluster barrier before the peer CTA's TMA loads signal them")
ARSENI_INIT_UNORDERED = (ARSENI + ": its pipelines are created with defer_sync=True and never synchronised, so its TMA "
                         "warp waits on and signals mbarriers that warp 0 initialised with no barrier between the two")
NOVUS_SHORT_K = NOVUS + " on the test shape 256x512x256: it loads all 4 pipeline stages though K/256 = 1"
TMEM_LANE_FROM_WARP = (NOVUS + " (lane field 0 or 16 from every epilogue warp) and " + GAU_V2
                       + " (the odd CTA of a pair at lane field 128 + 32w + 16m)")
ARSENI_C_STORE = (ARSENI + ": its epilogue writes the C tile to shared memory from every warp, warp 0 issues the TMA "
                  "store at once (no fence.proxy.async, no barrier first) and never waits for it")
ARSENI_TMEM_COLUMNS = (ARSENI + ": its 1-CTA 128x128 kernels allocate 256 tensor-memory columns and use 304 (two "
                       "128-column accumulators, then the SFA, SFB1, SFB2 columns); one CTA per SM, so nothing else "
                       "allocates them")
DSL435_TMEM_REINIT = ("NVIDIA CuTe DSL 4.3.5 TmemAllocator with is_two_cta (cutlass/utils/tmem_allocator.py: "
                      "__new_from_mlir_values__ re-runs __init__, which initialises the dealloc mbarrier again each "
                      "time the allocator crosses a control-flow region), as used by NVIDIA's 2-CTA Blackwell DSL "
                      "examples on B200 under that release; 4.8.1 no longer does it")
TCGEN05_MMA_THEN_CP = ("gau-nernst/gpu-mode-kernels nvidia/nvfp4_dual_gemm submission_v1b.py and submission_v2.py "
                       "(B200-verified: tcgen05.cp of the next k-tile's scales right after the MMAs that read the same "
                       "columns) and NVIDIA's CuTe DSL dense_blockscaled_gemm_persistent.py (single-buffered scale "
                       "columns); emulated, both trip this rule")
TCGEN05_FENCE_AFTER = ("NVIDIA's CuTe DSL dense_blockscaled_gemm_persistent.py (B200-verified): its PipelineUmmaAsync "
                       "(cutlass/pipeline/sm100.py, DSL 4.3.5 and 4.8.1) emits no tcgen05.fence, so its epilogue "
                       "loads tensor memory right after the accumulator-full wait; emulated, it trips this rule")
TCGEN05_FENCE_BEFORE = ("NVIDIA's CuTe DSL dense_blockscaled_gemm_persistent.py (accumulator-empty arrive after "
                        "tcgen05.wait::ld, no fence) and gau-nernst's submission_v1b.py / submission_v2.py (tcgen05."
                        "dealloc after the epilogue warps' loads and a barrier, no fence), all B200-verified; emulated, "
                        "all trip this rule")
TCGEN05_LD_UNWAITED = ("NVIDIA's CuTe DSL dense_blockscaled_gemm_persistent.py (B200-verified): with two accumulator "
                       "stages its epilogue converts the tcgen05.ld results (ptxas's scoreboard waits for them) and "
                       "arrives on the accumulator-empty barrier, and its PTX (DSL 4.8.1) holds no tcgen05.wait::ld; "
                       "emulated, its persistent configs trip this rule")
TEEL = ("teelaitila/nvfp4_gpumode dual_gemm/submission.py (CuTe DSL; its versions' GPU MODE B200 benchmark runs, which "
        "check every output first, are published in dual_gemm/benchmarks.md @ 754dd17d)")
TMEM_SERIALISED = (TEEL + " @ 1a18fbab: 1-CTA clusters, no programmatic dependent launch, 512 tensor-memory columns per "
                   "CTA, and two CTAs fit one SM by threads, registers and shared memory")
NAREG = ("NaregAmirianMegan/NVFP4_Kernels@126cb76 nvfp4_dual_gemm/submission_ptx.py (CUDA; run on a Modal B200 by its "
         "author, 18.6 / 18.6 / 14.4 / 18.5 us published)")
TMEM_DEALLOC_WHILE_READ = (NAREG + ": its warp 0 frees the accumulator columns right after its own epilogue loads, the "
                           "named barrier before the tcgen05.dealloc commented out, while warps 1-3 may still read them")
JIAB = ("jIab-b/nvfp4_gemm (CUDA with inline PTX; each commit pairs the kernel with the GPU MODE B200 runner's output, "
        "whose benchmark mode checks all 50 outputs of each shape first: \"Benchmarking successful\")")
JIAB_SFA_PER_QUADRANT = (JIAB + " @ 9d1caaf5 sub_tc2.py (out_tc2.txt changed in the same commit): warp w writes SFA "
                         "rows 32w..32w+31 with tcgen05.st.32x32b into column base + w of its own lane quadrant only")
JIAB_ALLOC_136 = (JIAB + " @ 784f0189 s_128.py (\"tmem cols -> 136\": the kernel and out_128.txt changed together): "
                  "tcgen05.alloc and tcgen05.dealloc of 136 columns")
JIAB_ST_THEN_MMA = (JIAB + " @ 9d1caaf5 sub_tc2.py and @ 8ae2f9d0 s_128.py (each with its runner output in the same "
                    "commit): every warp copies its scale words from shared memory with ld.shared + tcgen05.st + "
                    "tcgen05.wait::st and thread 0 issues the MMA that reads them with no barrier in between; the same "
                    "hand-off with the words loaded from global memory (@ 5a340df5 sub_tcgen5.py) got 76263 of 524288 "
                    "elements wrong on the B200")
