"""Hide apache-tvm-ffi from this interpreter and every process it starts, as on a machine that never installed it.

    PYTHONPATH=tests/no_tvm_ffi .venv/bin/python -m pytest -q

Python imports this `sitecustomize` at start-up (the first one on sys.path wins); it puts a wrapper of the path finder
in its place that does not find the package: `import tvm_ffi` raises ModuleNotFoundError,
`importlib.util.find_spec("tvm_ffi")` returns None (the two tests submission.py and the CuTe DSL make; a stand-in
package that raises on import would still be found by find_spec, so the DSL would not take its no-TVM-FFI branch) and
importlib.metadata finds no apache-tvm-ffi distribution; every other module and distribution is found as before.
Children inherit PYTHONPATH, so the compile workers see the same environment."""
import importlib.machinery
import sys

HIDDEN_MODULE = "tvm_ffi"
HIDDEN_DISTRIBUTION = "apache_tvm_ffi"  # normalised (PEP 503, with underscores as importlib.metadata compares)


def _normalised(name: str) -> str:
    return name.lower().replace("-", "_").replace(".", "_")


class WithoutTvmFfi:
    """The path finder, blind to one package and its distribution."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == HIDDEN_MODULE or name.startswith(HIDDEN_MODULE + "."):
            return None
        return importlib.machinery.PathFinder.find_spec(name, path, target)

    @staticmethod
    def find_distributions(*args, **kwargs):
        return (d for d in importlib.machinery.PathFinder.find_distributions(*args, **kwargs)
                if _normalised(d.metadata["Name"] or "") != HIDDEN_DISTRIBUTION)

    @staticmethod
    def invalidate_caches():
        importlib.machinery.PathFinder.invalidate_caches()


sys.meta_path[:] = [WithoutTvmFfi if f is importlib.machinery.PathFinder else f for f in sys.meta_path]
