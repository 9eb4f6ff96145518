"""Hide apache-tvm-ffi from this interpreter and every process it starts, as on a machine that never installed it.

    PYTHONPATH=tests/no_tvm_ffi .venv/bin/python -m pytest -q

Python imports this `sitecustomize` at start-up (the first one on sys.path wins); it wraps the path finder so that
`tvm_ffi` and its submodules are not found: `import tvm_ffi` raises ModuleNotFoundError and
`importlib.util.find_spec("tvm_ffi")` returns None, the two tests submission.py and the CuTe DSL make (a stand-in
package that raises on import would still be found by find_spec, so the DSL would not take its no-TVM-FFI branch).
Children inherit PYTHONPATH, so the compile workers see the same environment."""
import importlib.machinery
import sys

HIDDEN = "tvm_ffi"


class _WithoutTvmFfi:
    """The path finder, blind to one top-level package."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == HIDDEN or name.startswith(HIDDEN + "."):
            return None
        return importlib.machinery.PathFinder.find_spec(name, path, target)

    @staticmethod
    def invalidate_caches():
        importlib.machinery.PathFinder.invalidate_caches()


sys.meta_path[:] = [_WithoutTvmFfi if f is importlib.machinery.PathFinder else f for f in sys.meta_path]
