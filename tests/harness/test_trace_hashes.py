"""The schedules the emulator runs on CONFIG_TABLE's configs, to the instruction: every (CTA, warp, PC) issued, every
asynchronous completion and the C each schedule leaves, over every scheduling policy, as recorded in
tests/data/trace_hashes.json (tools/emulator_bench.py hashes). A change to the emulator's speed must leave them all
unchanged; a kernel change that changes the PTX re-records them (`tools/emulator_bench.py hashes --write`) with an
emulator whose schedules are trusted."""
import json

import pytest

from tools.emulator_bench import FIXTURE, compare, config_hashes

RECORDED = json.loads(FIXTURE.read_text())["configs"]


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(RECORDED))
def test_schedules_are_the_recorded_ones(name):
    assert compare(name, RECORDED[name], config_hashes(name)) == []
