"""Planted single-line bugs in copies of submission.py: the emulator must report every one.

Each mutant names the exact line it changes (it must occur exactly once in submission.py, so a
refactor that moves the line makes the mutant fail loudly instead of silently testing nothing), the
config and shape that exercise it, and the outcomes that count as caught.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mutant:
    name: str
    kind: str  # what class of bug it stands for
    old: str
    new: str
    config: str
    shape: tuple
    sm_count: int | None = None
    caught_by: tuple = ("mismatch", "deadlock", "hazard")

    def source(self, text: str) -> str:
        count = text.count(self.old)
        if count != 1:
            raise ValueError(f"mutant {self.name}: the line to change occurs {count} times in submission.py "
                             f"(expected once): {self.old.strip()!r}")
        return text.replace(self.old, self.new)

    def write(self, directory: Path, text: str | None = None) -> Path:
        text = (REPO / "submission.py").read_text() if text is None else text
        path = Path(directory) / f"submission_{self.name}.py"
        path.write_text(self.source(text))
        return path


C1 = "m128n64_c1x1_e32"
C2 = "m256n64_c2x1_e32"
C2_128 = "m256n128_c2x1_e32"
C_AC = "m128n64_c1x1_e32_ac"
C2_AC = "m256n64_c2x1_e32_ac"
C_TAIL = "m256n64_c2x1_e32_ac_t2"
C_SPLIT = "m256n128_c2x1_e16_sk2"
C_PAIR = "m128n128_c1x1_e32_ppc"

MUTANTS = (
    Mutant("expect_tx_short", "wrong expect-tx bytes",
           "tx_count=self.num_tma_load_bytes,", "tx_count=self.num_tma_load_bytes - 512,", C1, (128, 256, 512, 1)),
    Mutant("expect_tx_long", "wrong expect-tx bytes",
           "tx_count=self.num_tma_load_bytes,", "tx_count=self.num_tma_load_bytes + 16,", C2, (256, 256, 512, 1)),
    Mutant("missing_release", "missing consumer release",
           "\n                        ab_pipeline.consumer_release(ab_consumer_state)\n",
           "\n                        pass\n", C1, (128, 256, 512, 1)),
    Mutant("double_release", "doubled consumer release",
           "\n                        ab_pipeline.consumer_release(ab_consumer_state)\n",
           "\n                        ab_pipeline.consumer_release(ab_consumer_state)\n"
           "                        ab_pipeline.consumer_release(ab_consumer_state)\n", C1, (128, 256, 1536, 1)),
    Mutant("swap_b", "B1/B2 swapped",
           "products = ((tCtAcc1, tCrB1, tCtSFB1_mma), (tCtAcc2, tCrB2, tCtSFB2_mma))",
           "products = ((tCtAcc1, tCrB2, tCtSFB1_mma), (tCtAcc2, tCrB1, tCtSFB2_mma))", C1, (128, 256, 512, 1)),
    Mutant("swap_sfb", "SFB1/SFB2 swapped",
           "products = ((tCtAcc1, tCrB1, tCtSFB1_mma), (tCtAcc2, tCrB2, tCtSFB2_mma))",
           "products = ((tCtAcc1, tCrB1, tCtSFB2_mma), (tCtAcc2, tCrB2, tCtSFB1_mma))", C2, (256, 256, 512, 1)),
    Mutant("sfb_half_shift", "64-wide-N scale shift wrong",
           "shift = cutlass.Int32((tile_n % 2) * 2)", "shift = cutlass.Int32(((tile_n + 1) % 2) * 2)", C1, (128, 256, 512, 1)),
    Mutant("stage_off_by_one", "stage index off by one",
           "load.smem[(None, producer_state.index)],",
           "load.smem[(None, (producer_state.index + 1) % load.smem.shape[1])],", C1, (128, 256, 512, 1)),
    Mutant("missing_cluster_sync", "missing fence/cluster synchronisation after mbarrier init",
           "        pipeline_init_wait(cluster_shape_mn=self.launch_cluster_mn)\n", "", C2, (256, 256, 512, 1)),
    Mutant("acc_phase", "accumulator stage phase wrong",
           "acc_consumer_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.num_acc_stage)",
           "acc_consumer_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.num_acc_stage)",
           C1, (128, 256, 512, 1)),
    Mutant("peer_c_coords", "wrong C coordinates for the peer CTA of a pair",
           "tCgC = thr_mma.partition_C(gC_mnl)", "tCgC = tiled_mma.get_slice(0).partition_C(gC_mnl)", C2_128,
           (256, 256, 512, 1)),
    Mutant("pdl_no_wait_before_loads", "global memory touched before griddepcontrol.wait under PDL",
           "                cute.arch.griddepcontrol_wait()  # the previous kernel's writes are complete and visible\n",
           "                pass\n", C1, (128, 256, 512, 1)),
    Mutant("collector_not_filled", "A collector used without a fill (collector::a::fill missing)",
           'f"@e {mma}.collector::a::fill [$0], ad, bd1, id, [$5], [$6], p;\\n"',
           'f"@e {mma}.collector::a::discard [$0], ad, bd1, id, [$5], [$6], p;\\n"', C_AC, (128, 256, 512, 1)),
    Mutant("collector_lastuse_first", "A collector: lastuse on the B1 MMA (no fill before it)",
           'f"@e {mma}.collector::a::fill [$0], ad, bd1, id, [$5], [$6], p;\\n"',
           'f"@e {mma}.collector::a::lastuse [$0], ad, bd1, id, [$5], [$6], p;\\n"', C2_AC, (256, 256, 512, 1)),
    Mutant("accumulate_not_reset", "accumulator not cleared between tiles",
           "                tiled_mma.set(tcgen05.Field.ACCUMULATE, False)\n", "", C1, (128, 512, 512, 1), sm_count=2),
    # the tail (tail_k_tiles): acc1's own barrier, the held stages, acc2's first MMA when the tail is all of K
    Mutant("tail_acc1_not_awaited", "tail: acc1 read before its barrier",
           "        acc1_pipeline.consumer_wait(acc_state)\n", "", C_TAIL, (256, 128, 1024, 1)),
    Mutant("tail_b2_pass_wrong_stages", "tail: A@B2 reads the stages after the held ones",
           "self._tail_k_tile(tiled_mma, tail_start.index, (s2t_sfa, s2t_sfb2)",
           "self._tail_k_tile(tiled_mma, ab_consumer_state.index, (s2t_sfa, s2t_sfb2)", C_TAIL, (256, 256, 1024, 1),
           sm_count=2),
    Mutant("tail_acc2_not_cleared", "tail: A@B2 not cleared when the tail is all of K",
           "                    tiled_mma.set(tcgen05.Field.ACCUMULATE, both_k_tiles > 0)\n", "", C_TAIL,
           (256, 128, 512, 1)),
    # the exchange through distributed shared memory (split_k, product_per_cta)
    Mutant("exchange_read_before_full", "exchange: slot read before its full barrier",
           "        cute.arch.mbarrier_wait(xring.full + slots.index, slots.phase ^ 1)\n", "        pass\n", C_PAIR,
           (128, 128, 512, 1)),
    Mutant("exchange_slot_not_freed", "exchange: receiver never frees a slot",
           "        cute.arch.mbarrier_arrive(xring.empty + slots.index, sender_rank)\n", "        pass\n", C_PAIR,
           (128, 128, 512, 1)),
    Mutant("exchange_expect_tx_short", "exchange: expect-tx bytes short",
           "len(fragments) * self.epi_tile_n * 4, dst_rank)", "len(fragments) * self.epi_tile_n * 4 - 16, dst_rank)",
           C_SPLIT, (256, 128, 512, 1)),
    # split_k: the reduction and the K slices
    Mutant("split_k_partial_dropped", "split-K: a slice's partial sums not added",
           "                for sender in cutlass.range_constexpr(1, self.config.split_k):\n"
           "                    for a in cutlass.range_constexpr(2):\n",
           "                for sender in cutlass.range_constexpr(2, self.config.split_k):\n"
           "                    for a in cutlass.range_constexpr(2):\n", C_SPLIT, (256, 128, 512, 1)),
    Mutant("split_k_slices_overlap", "split-K: K slices overlap",
           "            k_tile_cnt = (part + 1) * k_tile_cnt // self.config.split_k - k_first\n",
           "            k_tile_cnt = k_tile_cnt - k_first\n", C_SPLIT, (256, 128, 512, 1)),
    # product_per_cta: which half goes to the peer, which product each CTA loads
    Mutant("pair_sends_own_half", "product pair: a CTA sends the half it stores itself",
           "tTR_tAcc[(None, None, None, (1 - part) * half + i)], other)",
           "tTR_tAcc[(None, None, None, part * half + i)], other)", C_PAIR, (128, 128, 512, 1)),
    Mutant("pair_products_swapped", "product pair: each CTA loads the other product's B",
           "                            if part == load.product:\n",
           "                            if part != load.product:\n",
           C_PAIR, (128, 128, 512, 1)),
)
