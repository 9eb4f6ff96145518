"""A machine without apache-tvm-ffi for the test run: PYTHONPATH=tests/no_tvm_ffi (sitecustomize.py says how)."""
