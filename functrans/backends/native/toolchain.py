"""The host C++ toolchain of the native backend: find a compiler at run time, build a
shared library from generated source (cached on disk, safe across processes), load it.

Flags: -O3, no fast-math and no FMA contraction (each operation rounds as NumPy's does),
OpenMP when the compiler has it. The disk cache is keyed by the source, the compiler's
identity and the flags, so a second process pays a stat and a dlopen, no compile.
"""
from __future__ import annotations

import ctypes
import hashlib
import json
import os
import platform
import shutil
import subprocess
import tempfile
import threading

from .. import identifier

BASE_FLAGS = ("-std=c++17", "-O3", "-fno-fast-math", "-ffp-contract=off", "-fno-math-errno",
              "-fwrapv", "-fopenmp-simd", "-fPIC", "-shared")
OPENMP_FLAG = "-fopenmp"
MARCH_FLAG = "-march=native"    # the machine's vector width: ftmath.h's double-precision
                                # bit arithmetic vectorizes with AVX2/AVX-512, not SSE2
CANDIDATES = ("c++", "g++", "clang++")
HERE = os.path.dirname(os.path.abspath(__file__))
_OMP_PROBE = "#include <omp.h>\nextern \"C\" int ft_probe(void) { return omp_get_max_threads(); }\n"


class ToolchainError(RuntimeError):
    """No working C++ compiler, or a compile failed (the message says which and why)."""


class Compiler:
    """A C++ compiler found on this machine: its command, identity and flags."""

    def __init__(self, argv, path, version, openmp, march):
        self.argv = tuple(argv)         # e.g. ("/usr/bin/c++",) or ("/usr/bin/cc", "-x", "c++")
        self.path = path
        self.version = version
        self.openmp = openmp
        self.flags = BASE_FLAGS + ((MARCH_FLAG,) if march else ()) + \
            ((OPENMP_FLAG,) if openmp else ())

    def __repr__(self):
        return f"<Compiler {' '.join(self.argv)}: {self.version}{', OpenMP' if self.openmp else ''}>"


def cache_dir() -> str:
    """Where compiled libraries live: $FUNCTRANS_CACHE_DIR, else ~/.cache/functrans/native."""
    d = os.environ.get("FUNCTRANS_CACHE_DIR")
    if not d:
        d = os.path.join(os.path.expanduser("~"), ".cache", "functrans", "native")
    return d


def clear_cache() -> int:
    """Delete every cached library and source of the native backend; the number removed."""
    d = cache_dir()
    n = 0
    if os.path.isdir(d):
        for fn in os.listdir(d):
            if fn.endswith((".so", ".cpp", ".json", ".tmp")):
                try:
                    os.remove(os.path.join(d, fn))
                    n += 1
                except OSError:
                    pass
    return n


def _candidates():
    """(argv, path) of each compiler to try, in order; an explicit $CXX is the only one."""
    cxx = os.environ.get("CXX")
    if cxx:
        return [((cxx,), shutil.which(cxx))], f"$CXX={cxx!r}"
    out = [((c,), shutil.which(c)) for c in CANDIDATES]
    cc = os.environ.get("CC")
    if cc:
        out.append(((cc, "-x", "c++"), shutil.which(cc)))
    return out, "c++, g++, clang++" + (f", $CC={cc!r}" if cc else "")


def _identity(path):
    st = os.stat(path)
    return f"{os.path.realpath(path)}:{st.st_size}:{st.st_mtime_ns}"


COMPILE_TIMEOUT_S = 120


def _run(argv, **kw):
    return subprocess.run(argv, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S, **kw)


def _probe(argv, path):
    """(version, openmp, march) of a compiler, cached on disk by the binary's identity."""
    ident = _identity(path)
    key = hashlib.sha256((ident + " ".join(argv)).encode()).hexdigest()[:24]
    fn = os.path.join(cache_dir(), f"probe-{key}.json")
    try:
        with open(fn) as f:
            d = json.load(f)
        return d["version"], d["openmp"], d["march"]
    except (OSError, ValueError, KeyError):
        pass
    proc = _run([*argv, "--version"])
    if proc.returncode != 0:
        raise ToolchainError(f"{' '.join(argv)} --version failed: {proc.stderr.strip()}")
    version = (proc.stdout.strip().splitlines() or ["unknown"])[0]
    with tempfile.TemporaryDirectory() as td:
        src = os.path.join(td, "probe.cpp")
        with open(src, "w") as f:
            f.write(_OMP_PROBE)
        p = _run([*argv, *BASE_FLAGS, OPENMP_FLAG, src, "-o", os.path.join(td, "p.so")])
        openmp = p.returncode == 0
        with open(src, "w") as f:
            f.write('extern "C" int ft_probe(void) { return 0; }\n')
        p = _run([*argv, *BASE_FLAGS, MARCH_FLAG, src, "-o", os.path.join(td, "p.so")])
        march = p.returncode == 0
    _write_atomic(fn, json.dumps({"version": version, "openmp": openmp,
                                  "march": march}).encode())
    return version, openmp, march


_found: dict = {}
_found_lock = threading.Lock()


def find_compiler() -> Compiler:
    """The compiler to use (found once per environment); ToolchainError says why none."""
    env = (os.environ.get("CXX"), os.environ.get("CC"), os.environ.get("PATH"), cache_dir())
    with _found_lock:
        hit = _found.get(env)
        if hit is None:
            try:
                hit = _find()
            except ToolchainError as e:
                hit = e
            _found[env] = hit
    if isinstance(hit, ToolchainError):
        raise hit
    return hit


def _find():
    cands, tried = _candidates()
    errors = []
    for argv, path in cands:
        if path is None:
            errors.append(f"{argv[0]}: not found")
            continue
        try:
            version, openmp, march = _probe(argv, path)
        except (OSError, subprocess.SubprocessError, ToolchainError) as e:
            errors.append(f"{argv[0]}: {e}")
            continue
        return Compiler((path,) + tuple(argv[1:]), path, version, openmp, march)
    why = "; ".join(errors)
    raise ToolchainError(f"no C++ compiler found (tried {tried}): {why}. Install g++ or "
                         "clang++, or set $CXX; functrans runs the NumPy backend meanwhile")


def _write_atomic(fn, data: bytes):
    os.makedirs(os.path.dirname(fn), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(fn), suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, fn)
    except BaseException:
        _remove(tmp)
        raise


def _remove(fn):
    try:
        os.remove(fn)
    except OSError:
        pass


_headers: list = []
_machine: list = []


def _machine_digest():
    """The CPU's identity (-march=native code runs only on a CPU with its features)."""
    if not _machine:
        text = f"{platform.machine()} {platform.processor()}"
        try:
            with open("/proc/cpuinfo") as f:
                text += "".join(ln for ln in f if ln.startswith(("model name", "flags")))
        except OSError:
            pass
        _machine.append(hashlib.sha256(text.encode()).hexdigest())
    return _machine[0]



def _headers_digest():
    """A digest of the headers beside this file (generated sources include them)."""
    if not _headers:
        h = hashlib.sha256()
        for fn in sorted(os.listdir(HERE)):
            if fn.endswith(".h"):
                with open(os.path.join(HERE, fn), "rb") as f:
                    h.update(fn.encode() + b"\0" + f.read())
        _headers.append(h.hexdigest())
    return _headers[0]


def library_path(source: str, name: str, compiler: Compiler | None = None,
                 include=()) -> str:
    """Where the library of this source lives in the disk cache (built or not)."""
    cc = compiler or find_compiler()
    h = hashlib.sha256()
    for part in (source, _identity(cc.path), cc.version, " ".join(cc.argv), " ".join(cc.flags),
                 _headers_digest(), _machine_digest(), " ".join(include)):
        h.update(part.encode())
        h.update(b"\0")
    safe = identifier(name)[:40] or "lib"
    return os.path.join(cache_dir(), f"{safe}-{h.hexdigest()[:32]}.so")


def build(source: str, name: str, compiler: Compiler | None = None, include=()) -> str:
    """The path of the shared library compiled from `source` (C++; it may include the
    headers beside this file and those of the `include` directories), from the disk cache
    when present. Two processes may build the same source at once: each compiles to its own
    temporary name in the cache directory and renames it into place."""
    cc = compiler or find_compiler()
    out = library_path(source, name, cc, include)
    if os.path.exists(out):
        return out
    d = os.path.dirname(out)
    os.makedirs(d, exist_ok=True)
    stem = out[:-3]
    _write_atomic(stem + ".cpp", source.encode())      # kept beside it, for reading
    fd, tmp = tempfile.mkstemp(dir=d, prefix=os.path.basename(stem) + "-", suffix=".tmp")
    os.close(fd)
    try:
        inc = [a for d in (HERE, *include) for a in ("-I", d)]
        try:
            proc = _run([*cc.argv, *cc.flags, *inc, stem + ".cpp", "-o", tmp])
        except subprocess.TimeoutExpired:
            raise ToolchainError(f"compiling {name} with {' '.join(cc.argv)} took over "
                                 f"{COMPILE_TIMEOUT_S} s; source: {stem}.cpp") from None
        if proc.returncode != 0:
            raise ToolchainError(
                f"compiling {name} with {' '.join(cc.argv)} failed (exit {proc.returncode}); "
                f"source: {stem}.cpp\n{proc.stderr.strip()[-4000:]}")
        os.replace(tmp, out)
    finally:
        _remove(tmp)
    return out


_loaded: dict = {}
_loaded_lock = threading.Lock()


def load(path: str) -> ctypes.CDLL:
    """The library at `path`, loaded once per process. Before the first load (which loads
    the OpenMP runtime), OMP_WAIT_POLICY defaults to PASSIVE: idle OpenMP threads sleep
    instead of spinning, which on a machine with busy cores slowed small groups 300-fold."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    with _loaded_lock:
        lib = _loaded.get(path)
        if lib is None:
            lib = _loaded[path] = ctypes.CDLL(path)
        return lib
