"""The host C++ toolchain of the native backend: find a compiler at run time, build a
shared library from generated source, keep it in a disk cache only this user can write,
and load it only after checking it.

Flags: -O3, no fast-math and no FMA contraction (each operation rounds as NumPy's does),
OpenMP when the compiler has it. The disk cache is keyed by the source, the compiler's
identity and the flags, so a second process pays a check and a dlopen, no compile.

Loading a library runs its code, so the cache is guarded (docs/reliability.md, "The native
kernel cache"). The directory must be owned by this user and writable by no one else (a
new one is created 0700), else it is refused. It is opened once and every file is read and
written relative to that descriptor, and libraries are loaded through it
(/proc/self/fd/N/NAME.so), so a parent directory renamed after the check changes nothing.
A library is compiled in a private temporary directory, then written into the cache as a
temporary file, fsync'ed and renamed, with the SHA-256 of its bytes beside it (NAME.sha256);
it is loaded only when it is a regular file of this user that no one else may write and
its bytes match that digest (else it is built again). The cache is bounded
($FUNCTRANS_CACHE_MAX_MB, default 256): the least recently used libraries go first, never
one this process has loaded.

Every failure (no compiler, a refused cache, a compile error, a timeout, empty output, a
cache that cannot be written, a library that does not load) is a ToolchainError, and the
first one is remembered: it gives one RuntimeWarning and turns native code off for the
process (for this compiler setting and cache directory), so jitted programs run NumPy code
and a hanging compiler costs its timeout once.
"""
from __future__ import annotations

import ctypes
import hashlib
import importlib.machinery
import importlib.util
import json
import os
import platform
import secrets
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
import warnings

from .. import identifier
from ...core.config import env_positive

# -fno-trapping-math: the code never reads the floating-point exception flags, and without
# it GCC keeps a select whose arm computes (a masked softmax's `m ? -inf : x * s`) a branch
# on CPUs without AVX-512's masked arithmetic: the whole loop stayed scalar on AVX2. It
# changes no value (IEEE results, NaN, infinities and signed zeros are kept).
BASE_FLAGS = ("-std=c++17", "-O3", "-fno-fast-math", "-ffp-contract=off", "-fno-math-errno",
              "-fno-trapping-math", "-fwrapv", "-fopenmp-simd", "-fPIC", "-shared")
OPENMP_FLAG = "-fopenmp"
MARCH_FLAG = "-march=native"    # the machine's vector width: ftmath.h's double-precision
                                # bit arithmetic vectorizes with AVX2/AVX-512, not SSE2
WIDE_FLAG = "-mprefer-vector-width=512"     # with it: GCC's AVX-512 code otherwise keeps
                                # to 256-bit vectors (its tuning for CPUs that slow their
                                # clock on 512-bit ones); the kernels' math is compute-bound:
                                # exact GELU's forward took 0.89 ms on 512K floats, 0.65 with it
CANDIDATES = ("c++", "g++", "clang++")
HERE = os.path.dirname(os.path.abspath(__file__))
_OMP_PROBE = "#include <omp.h>\nextern \"C\" int ft_probe(void) { return omp_get_max_threads(); }\n"

COMPILE_TIMEOUT_S = 120         # one compiler run; a hung compiler is killed with its children
CACHE_MAX_MB = 256              # default bound of the disk cache ($FUNCTRANS_CACHE_MAX_MB)
STALE_TMP_S = 3600              # a temporary file this old was left by a killed process


class ToolchainError(RuntimeError):
    """No working C++ compiler, a refused cache, or a build or load that failed (the
    message says which and why)."""


class Compiler:
    """A C++ compiler found on this machine: its command, identity and flags."""

    def __init__(self, argv, path, version, openmp, march):
        self.argv = tuple(argv)         # e.g. ("/usr/bin/c++",) or ("/usr/bin/cc", "-x", "c++")
        self.path = path
        self.version = version
        self.openmp = openmp
        self.flags = BASE_FLAGS + tuple(march) + \
            ((OPENMP_FLAG,) if openmp else ())

    def __repr__(self):
        return f"<Compiler {' '.join(self.argv)}: {self.version}{', OpenMP' if self.openmp else ''}>"


_dirs: dict = {}            # ($FUNCTRANS_CACHE_DIR, $HOME) -> cache_dir() (an absolute one)


def cache_dir() -> str:
    """Where compiled libraries live: $FUNCTRANS_CACHE_DIR, else ~/.cache/functrans/native
    (this user's). Remembered per value of the two variables unless relative to the working
    directory: each native kernel call outside programs asks it (through setting()), and
    expanduser and abspath took 4 us of its 7."""
    env = os.environ.get("FUNCTRANS_CACHE_DIR"), os.environ.get("HOME")
    d = _dirs.get(env)
    if d is None:
        d = env[0] or os.path.join(os.path.expanduser("~"), ".cache", "functrans", "native")
        if os.path.isabs(d):
            d = _dirs[env] = os.path.normpath(d)
        else:
            d = os.path.abspath(d)
    return d


def cache_limit() -> int:
    """The cache's bound in bytes: $FUNCTRANS_CACHE_MAX_MB (a number > 0), else 256 MB."""
    return int(env_positive("FUNCTRANS_CACHE_MAX_MB", CACHE_MAX_MB, "megabytes") * 1e6)


def clear_cache() -> int:
    """Delete every cached library, digest and source of the native backend; the number of
    files removed (libraries this process has loaded stay mapped)."""
    d = cache_dir()
    n = 0
    if os.path.isdir(d):
        for fn in os.listdir(d):
            if fn.endswith((".so", ".cpp", ".sha256", ".json", ".tmp")):
                try:
                    os.remove(os.path.join(d, fn))
                    n += 1
                except OSError:
                    pass
    return n


# ---------------------------------------------------------------------------
# the cache directory: checked, held open, read and written through its descriptor

def _foreign(st, what) -> str | None:
    """Why a file or directory with this stat must not be trusted (None: it may): another
    user owns it, or group or others may write it."""
    me = os.geteuid()
    if st.st_uid != me:
        return f"{what} is owned by uid {st.st_uid}, not by you (uid {me})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{what} is writable by group or others (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


class CacheDir:
    """The cache directory, checked and held open: ToolchainError when it is refused."""

    def __init__(self, path):
        self.path = path
        if not os.path.lexists(path):
            try:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                os.mkdir(path, 0o700)
                os.chmod(path, 0o700)       # exactly 0700, whatever the umask
            except FileExistsError:
                pass
            except OSError as e:
                raise ToolchainError(f"cannot create the native kernel cache {path}: "
                                     f"{e.strerror}") from None
        try:
            self.fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as e:
            raise ToolchainError(f"cannot open the native kernel cache {path}: "
                                 f"{e.strerror}") from None
        st = os.fstat(self.fd)
        self.ident = (st.st_dev, st.st_ino)
        try:
            self.check()
        except ToolchainError:
            os.close(self.fd)
            raise
        proc = f"/proc/self/fd/{self.fd}"
        self.via = proc if os.path.isdir(proc) else path

    def check(self):
        """ToolchainError when the directory is now another user's or others may write it."""
        why = _foreign(os.fstat(self.fd), "it")
        if why:
            raise ToolchainError(
                f"the native kernel cache {self.path} is refused: {why}, so another user "
                f"could place code there that functrans would run as you. Make it yours with "
                f"`chmod 700 {self.path}` (as its owner), or set FUNCTRANS_CACHE_DIR to a "
                "directory of your own; jitted programs run NumPy code meanwhile")

    def loadable(self, name) -> str:
        """The path dlopen gets for `name`: through the directory checked, where /proc has it."""
        return os.path.join(self.via, name)

    def read(self, name):
        """(bytes, None) of file `name`, or (None, why it is missing or not trusted); a
        symlink is not followed."""
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                         dir_fd=self.fd)
        except FileNotFoundError:
            return None, "it is missing"
        except OSError as e:
            return None, f"it cannot be opened ({e.strerror})"
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(fd)
            why = "it is not a regular file" if not stat.S_ISREG(st.st_mode) else \
                _foreign(st, "it")
            return (None, why) if why else (f.read(), None)

    def write(self, name, data: bytes):
        """Write `name` whole or not at all: a temporary file, fsync'ed, renamed into place."""
        tmp = f"{name}.{secrets.token_hex(6)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600, dir_fd=self.fd)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except BaseException:
            self.remove(tmp)
            raise

    def remove(self, name):
        try:
            os.unlink(name, dir_fd=self.fd)
        except OSError:
            pass

    def touch(self, name):
        """Mark `name` used now (least recently used goes first); a read-only cache is fine."""
        try:
            os.utime(name, dir_fd=self.fd, follow_symlinks=False)
        except OSError:
            pass

    def entries(self):
        """(name, bytes, mtime) of each file in the directory."""
        out = []
        with os.scandir(self.fd) as it:
            for e in it:
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                if not stat.S_ISDIR(st.st_mode):
                    out.append((e.name, st.st_size, st.st_mtime))
        return out


_dirs: dict = {}            # path -> CacheDir (descriptors stay open: their numbers are
_dirs_lock = threading.Lock()   # part of the names of loaded libraries)


def _cache(path=None) -> CacheDir:
    """The cache directory at path (default cache_dir()), checked now (its owner and mode);
    opened again when the directory there is not the one held (deleted and made again)."""
    path = path or cache_dir()
    with _dirs_lock:
        held = _dirs.get(path)
        try:
            st = os.stat(path)
            same = held is not None and (st.st_dev, st.st_ino) == held.ident
        except OSError:
            same = False
        if not same:
            held = _dirs[path] = CacheDir(path)
        else:
            held.check()
        return held


def cache_report() -> str:
    """The cache's place, size and state, for `python -m functrans`."""
    path = cache_dir()
    if not os.path.lexists(path):
        return f"{path}: not created yet (state: ok)"
    try:
        d = _cache(path)
    except ToolchainError as e:
        return f"{path}: refused ({e})"
    try:
        limit = f"{cache_limit() / 1e6:g} MB"
    except ValueError as e:
        return f"{path}: unusable ({e})"
    files = d.entries()
    libs = sum(1 for n, _, _ in files if n.endswith(".so"))
    size = sum(b for _, b, _ in files)
    return f"{path}: {libs} libraries, {size / 1e6:.1f} MB of {limit} (state: ok)"


# ---------------------------------------------------------------------------
# finding the compiler

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


def _run(argv):
    """Run a compiler: a CompletedProcess, or subprocess.TimeoutExpired after
    COMPILE_TIMEOUT_S, once the compiler and every process it started are killed (it runs
    in a session of its own: cc1plus, as and ld are its children). Ctrl-C, which does not
    reach that session, kills them too."""
    with subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, start_new_session=True) as p:
        try:
            out, err = p.communicate(timeout=COMPILE_TIMEOUT_S)
        except BaseException:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
            raise
    return subprocess.CompletedProcess(argv, p.returncode, out, err)


def _probe(argv, path, cache):
    """(version, openmp, march) of a compiler, cached on disk by the binary's identity;
    march: the flags of MARCH_FLAG and WIDE_FLAG it takes (() when not MARCH_FLAG: a
    compiler for another architecture may take -march=native but not the x86 WIDE_FLAG)."""
    ident = _identity(path)
    probed = " ".join((*argv, MARCH_FLAG, WIDE_FLAG))     # a probe of other flags is stale
    key = hashlib.sha256((ident + probed).encode()).hexdigest()[:24]
    name = f"probe-{key}.json"
    data, _ = cache.read(name)
    try:
        d = json.loads(data)
        cache.touch(name)
        return d["version"], d["openmp"], tuple(d["march"])
    except (TypeError, ValueError, KeyError):
        pass
    proc = _run([*argv, "--version"])
    if proc.returncode != 0:
        raise ToolchainError(f"{' '.join(argv)} --version failed: {proc.stderr.strip()}")
    version = (proc.stdout.strip().splitlines() or ["unknown"])[0]
    with tempfile.TemporaryDirectory(prefix="functrans-probe-") as td:
        src = os.path.join(td, "probe.cpp")
        with open(src, "w") as f:
            f.write(_OMP_PROBE)
        p = _run([*argv, *BASE_FLAGS, OPENMP_FLAG, src, "-o", os.path.join(td, "p.so")])
        openmp = p.returncode == 0
        with open(src, "w") as f:
            f.write('extern "C" int ft_probe(void) { return 0; }\n')
        march = ()
        for flags in ((MARCH_FLAG,), (MARCH_FLAG, WIDE_FLAG)):
            p = _run([*argv, *BASE_FLAGS, *flags, src, "-o", os.path.join(td, "p.so")])
            if p.returncode != 0:
                break
            march = flags
    try:
        cache.write(name, json.dumps({"version": version, "openmp": openmp,
                                      "march": list(march)}).encode())
    except OSError:
        pass                    # a read-only or full cache: probed again next time
    return version, openmp, march


_found: dict = {}           # (CXX, CC, PATH, cache dir) -> Compiler, or the ToolchainError
_warned: set = set()        # ... of those whose error was reported by a warning
_found_lock = threading.RLock()


def setting():
    """What a found compiler (or a remembered failure) is keyed by: $CXX, $CC, $PATH and
    the cache directory."""
    return (os.environ.get("CXX"), os.environ.get("CC"), os.environ.get("PATH"), cache_dir())


def find_compiler() -> Compiler:
    """The compiler to use (found once per setting); ToolchainError says why none: no
    compiler, a refused cache, or an earlier build or load failure in this process."""
    key = setting()
    with _found_lock:
        hit = _found.get(key)
        if hit is None:
            try:
                hit = _find()
            except ToolchainError as e:
                hit = e
            _found[key] = hit
    if isinstance(hit, ToolchainError):
        raise hit
    return hit


def unavailable() -> str | None:
    """Why native code cannot run now (the error's first line), or None when it can. The
    first time a setting has no toolchain, a RuntimeWarning says why (once per process)."""
    try:
        find_compiler()
    except ToolchainError as e:
        _warn_once(setting(), e)
        return str(e).splitlines()[0]
    return None


def _warn_once(key, e):
    with _found_lock:
        if key in _warned:
            return
        _warned.add(key)
    warnings.warn(f"functrans: {e}\nThe native CPU backend is off for this process: jitted "
                  "programs run NumPy code.", RuntimeWarning, stacklevel=4)


def _failed(e: ToolchainError) -> ToolchainError:
    """Remember e as this setting's toolchain (native code off for the process), warn once."""
    key = setting()
    with _found_lock:
        if not isinstance(_found.get(key), ToolchainError):
            _found[key] = e
    _warn_once(key, e)
    return e


def reset():
    """Forget the compilers found and the failures remembered (tests; after fixing a
    toolchain in a running process)."""
    with _found_lock:
        _found.clear()
        _warned.clear()


def _find():
    cache = _cache()
    cands, tried = _candidates()
    errors = []
    for argv, path in cands:
        if path is None:
            errors.append(f"{argv[0]}: not found")
            continue
        try:
            version, openmp, march = _probe(argv, path, cache)
        except (OSError, subprocess.SubprocessError, ToolchainError) as e:
            errors.append(f"{argv[0]}: {e}")
            continue
        return Compiler((path,) + tuple(argv[1:]), path, version, openmp, march)
    why = "; ".join(errors)
    raise ToolchainError(f"no C++ compiler found (tried {tried}): {why}. Install g++ or "
                         "clang++, or set $CXX; functrans runs the NumPy backend meanwhile")


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


# ---------------------------------------------------------------------------
# building and loading

def _guarded(fn):
    """fn as a toolchain step: every failure a ToolchainError, remembered (_failed)."""
    def step(*args, **kw):
        try:
            return fn(*args, **kw)
        except ToolchainError as e:
            raise _failed(e) from None
        except (OSError, ImportError, ValueError, subprocess.SubprocessError) as e:
            raise _failed(ToolchainError(
                f"{fn.__name__}: {type(e).__name__}: {e}")) from e
    step.__name__, step.__doc__ = fn.__name__, fn.__doc__
    return step


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


def _digest_name(lib):
    return lib[:-3] + ".sha256"


def _why_not_intact(cache, lib) -> str | None:
    """Why library `lib` of the cache must not be loaded (None: it may): missing, not a
    regular file of this user that no one else may write, or its bytes not those whose
    digest was stored when it was built (a truncated file crashes the process with SIGBUS
    when loaded)."""
    data, why = cache.read(lib)
    if why:
        return why
    digest, why = cache.read(_digest_name(lib))
    if why:
        return f"its digest ({_digest_name(lib)}): {why}"
    if hashlib.sha256(data).hexdigest() != digest.decode("ascii", "replace").strip():
        return "its bytes do not match the digest written when it was built (damaged)"
    return None


@_guarded
def build(source: str, name: str, compiler: Compiler | None = None, include=()) -> str:
    """The path of the shared library compiled from `source` (C++; it may include the
    headers beside this file and those of the `include` directories), from the disk cache
    when an intact copy is there. Two processes may build the same source at once: each
    writes its own temporary file and renames it into place."""
    cache, limit = _cache(), cache_limit()
    cc = compiler or find_compiler()
    out = library_path(source, name, cc, include)
    lib = os.path.basename(out)
    stem = lib[:-3]
    if _why_not_intact(cache, lib) is None:
        cache.touch(lib)
        return out
    cache.write(stem + ".cpp", source.encode())       # kept beside it, for reading
    with tempfile.TemporaryDirectory(prefix="functrans-build-") as td:
        src, tmp = os.path.join(td, stem + ".cpp"), os.path.join(td, lib)
        with open(src, "w") as f:
            f.write(source)
        inc = [a for d in (HERE, *include) for a in ("-I", d)]
        what = f"compiling {name} with {' '.join(cc.argv)}"
        try:
            proc = _run([*cc.argv, *cc.flags, *inc, src, "-o", tmp])
        except subprocess.TimeoutExpired:
            raise ToolchainError(f"{what} took over {COMPILE_TIMEOUT_S:g} s (killed); "
                                 f"source: {stem}.cpp in {cache.path}") from None
        if proc.returncode != 0:
            raise ToolchainError(f"{what} failed (exit {proc.returncode}); source: "
                                 f"{cache.path}/{stem}.cpp\n{proc.stderr.strip()[-4000:]}")
        try:
            with open(tmp, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            data = b""
        if not data:
            raise ToolchainError(f"{what} exited 0 but wrote no library (nothing cached); "
                                 f"source: {cache.path}/{stem}.cpp")
    cache.write(_digest_name(lib), hashlib.sha256(data).hexdigest().encode())
    cache.write(lib, data)
    _evict(cache, limit, keep=stem)
    return out


def _evict(cache, limit, keep):
    """Remove the least recently used libraries (with their source and digest) until the
    cache holds at most `limit` bytes; never one loaded in this process, nor `keep`.
    Temporary files older than STALE_TMP_S (left by killed processes) go too."""
    now = time.time()
    groups, total = {}, 0
    for fn, size, mtime in cache.entries():
        if fn.endswith(".tmp"):
            if now - mtime > STALE_TMP_S:
                cache.remove(fn)
                continue
        total += size
        g = groups.setdefault(fn.split(".", 1)[0], [0.0, []])
        g[0] = max(g[0], mtime)
        g[1].append((fn, size))
    if total <= limit:
        return
    with _loaded_lock:
        mapped = {os.path.basename(p)[:-3] for p in _loaded
                  if os.path.dirname(p) == cache.path}
    for stem, (_, files) in sorted(groups.items(), key=lambda kv: kv[1][0]):
        if stem == keep or stem in mapped or any(fn.endswith(".tmp") for fn, _ in files):
            continue
        for fn, size in files:
            cache.remove(fn)
            total -= size
        if total <= limit:
            return


_loaded: dict = {}          # path -> the CDLL or extension module loaded from it
_loaded_lock = threading.Lock()


def _checked(path) -> str:
    """The path to hand dlopen for the cached library at `path`, after checking it (owner,
    mode, digest): through the checked directory's descriptor."""
    cache = _cache(os.path.dirname(path))
    lib = os.path.basename(path)
    why = _why_not_intact(cache, lib)
    if why:
        raise ToolchainError(f"{path} is not loaded: {why}")
    cache.touch(lib)
    return cache.loadable(lib)


def _loading(path, open_it):
    """The object open_it(checked path) made for the library at path, once per process;
    a library that fails to load is removed from the cache (the next process builds it
    again)."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    with _loaded_lock:
        hit = _loaded.get(path)
        if hit is None:
            checked = _checked(path)
            try:
                hit = _loaded[path] = open_it(checked)
            except (OSError, ImportError) as e:
                _cache(os.path.dirname(path)).remove(os.path.basename(path))
                raise ToolchainError(f"loading {path} failed ({type(e).__name__}: {e}); "
                                     "removed from the cache") from None
        return hit


@_guarded
def load(path: str) -> ctypes.CDLL:
    """The library `build` made at `path`, checked and loaded once per process. Before the
    first load (which loads the OpenMP runtime), OMP_WAIT_POLICY defaults to PASSIVE: idle
    OpenMP threads sleep instead of spinning, which on a machine with busy cores slowed
    small groups 300-fold."""
    return _loading(path, ctypes.CDLL)


@_guarded
def load_extension(path: str, module: str):
    """The Python extension module `module` that `build` made at `path`, checked as `load`
    checks a library, imported once per process."""
    def open_it(checked):
        loader = importlib.machinery.ExtensionFileLoader(module, checked)
        spec = importlib.util.spec_from_file_location(module, checked, loader=loader)
        mod = importlib.util.module_from_spec(spec)
        loader.exec_module(mod)
        return mod
    return _loading(path, open_it)

