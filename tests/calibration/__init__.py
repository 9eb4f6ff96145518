"""The emulator judged against hardware fixtures and public kernels (calibration/)."""
