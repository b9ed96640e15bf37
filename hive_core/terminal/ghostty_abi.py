"""pyghostty's `ffi` and `lib` in milliseconds instead of about 0.35 s.

`import pyghostty` has cffi parse libghostty-vt's whole C header (0.2 s on these
machines), and cffi parses the header's typedefs again for each type name first used
(10-20 ms each; a pane's emulator uses twenty): the app's first frame waited for both.
cffi's out-of-line ABI mode keeps the parsed declarations as a generated Python module
whose types resolve in C. That module is made from pyghostty's own header text once per
header and cffi version, kept in the user's cache, and imported from there. The library
file and every call are pyghostty's.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import os
import tempfile
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType
from typing import Any

import cffi
from cffi.recompiler import make_py_source

# pyghostty's _ffi.py declares this layout twin of GhosttyPoint (a union, which cffi's ABI
# mode cannot pass by value); the emulator calls ghostty_terminal_grid_ref through it.
_TWINS = """
typedef struct { uint16_t x; uint32_t y; uint64_t _pad; } GhosttyPointValueS;
typedef struct { GhosttyPointTag tag; GhosttyPointValueS value; } GhosttyPointS;
"""
_LIBRARY_NAMES = ("libghostty-vt.dylib", "libghostty-vt.so", "libghostty-vt.dll")


def _package() -> Path:
    """pyghostty's folder, found without importing it: its __init__ imports _ffi, which
    is the parse this module avoids."""
    spec = importlib.util.find_spec("pyghostty")
    assert spec is not None and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations)))


def _library() -> str:
    """pyghostty's rule: PYGHOSTTY_LIB, else its bundled build."""
    if path := os.environ.get("PYGHOSTTY_LIB"):
        return path
    bundled = _package() / "_lib"
    for name in _LIBRARY_NAMES:
        if (bundled / name).exists():
            return str(bundled / name)
    raise OSError(f"libghostty-vt not found in {bundled}; reinstall pyghostty")


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "hive-office"


def _generate(name: str) -> str:
    builder = cffi.FFI()
    builder.cdef(_import("_pyghostty_cdef", _package() / "_cdef.py").CDEF + _TWINS)
    text = io.StringIO()
    make_py_source(builder, name, text)
    return text.getvalue()


def _import(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert isinstance(spec, ModuleSpec) and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _trusted(path: Path) -> bool:
    """Ours and writable by us alone: the cached module is run as code."""
    try:
        st = path.stat()
    except OSError:
        return False
    return st.st_uid == os.getuid() and not st.st_mode & 0o022


def _abi_module() -> ModuleType:
    header = (_package() / "_cdef.py").read_bytes()
    digest = hashlib.sha256(f"{cffi.__version__}\0{_TWINS}\0".encode() + header).hexdigest()
    name = f"ghostty_abi_{digest[:20]}"
    path = cache_dir() / f"{name}.py"
    if _trusted(path) and _trusted(path.parent):
        return _import(name, path)
    text = _generate(name)
    if not os.path.lexists(path):  # one someone else may write to is left alone
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            # Written whole then renamed: two offices starting at once never read half a file.
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{name}.", suffix=".tmp")
            try:
                with os.fdopen(fd, "w") as f:
                    f.write(text)
                os.replace(tmp, path)
            except OSError:
                Path(tmp).unlink(missing_ok=True)
                raise
            if _trusted(path.parent):
                return _import(name, path)
        except OSError:
            pass
    # No cache this run can trust or write (a read-only home): it pays the parse, and works.
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / f"{name}.py").write_text(text)
        return _import(name, Path(d) / f"{name}.py")


ffi: Any = _abi_module().ffi
lib: Any = ffi.dlopen(_library())
