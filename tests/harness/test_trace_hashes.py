"""The schedules the emulator runs on CONFIG_TABLE's configs, to the instruction: every (CTA, warp, PC) issued, every
asynchronous completion and the C each schedule leaves, over every scheduling policy, as recorded in
tests/data/trace_hashes.json (tools/emulator_bench.py hashes). A change to the emulator's speed must leave them all
unchanged; a kernel change that changes the PTX re-records them (`tools/emulator_bench.py hashes --write`) with an
emulator whose schedules are trusted.

CI's time: the two three-pair K splits run one schedule each here (late_wake, their shortest: the A collector and the
three-way reduce-scatter covered), every policy on the other two configs; `tools/emulator_bench.py hashes` compares
all seven schedules of all four (about 4 min of CPU), as a change to the emulator's speed must before it lands."""
import json

import pytest

from tools.emulator_bench import FIXTURE, compare, config_hashes

RECORDED = json.loads(FIXTURE.read_text())["configs"]
IN_CI = {"m256n128_c2x1_e16_ac_sk3_rs": ["late_wake:3"], "m256n128_c2x1_e16_sk3_rs": ["late_wake:3"]}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(RECORDED))
def test_schedules_are_the_recorded_ones(name):
    schedules = IN_CI.get(name)
    assert compare(name, RECORDED[name], config_hashes(name, schedules), schedules) == []
