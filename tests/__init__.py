"""The pytest suite; its folders mirror the layers (README "Layout"): emu/, harness/, calibration/, package/."""
