"""The native kernel cache under faults (issue 32): a directory or library another user could
write is never loaded; a damaged library is built again, never loaded (a truncated one
crashed the process with SIGBUS); every build and load failure falls back to the NumPy
code with one warning, remembered for the process; a hung compiler is killed with its
children; the cache is bounded with least-recently-used eviction; `python -m functrans`
reports its place, size and state. Compilers that fail are faked by a shell script."""
from __future__ import annotations

import errno
import hashlib
import os
import re
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pytest

import functrans as ft
import functrans.numpy as fnp
from functrans import __main__ as ft_main
from functrans.backends.native import toolchain

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = 'extern "C" double ft_twice(double x) { return 2.0 * x; }\n'

FAKE_CXX = r"""#!/bin/sh
# A compiler whose builds do what $FAKE_CXX_MODE says; it answers --version and fails the
# toolchain's probes (no OpenMP, no -march), and logs each build to $FAKE_CXX_LOG.
case " $* " in *" --version "*) echo "fakecc 1.0"; exit 0;; esac
case " $* " in *probe.cpp*) exit 1;; esac
out=""; prev=""
for a in "$@"; do [ "$prev" = "-o" ] && out="$a"; prev="$a"; done
echo build >> "$FAKE_CXX_LOG"
case "$FAKE_CXX_MODE" in
  hang) sleep 30 & echo $! > "$FAKE_CXX_CHILD"; sleep 30;;
  nothing) exit 0;;
  empty) : > "$out"; exit 0;;
  garbage) echo "not a shared library" > "$out"; exit 0;;
  fail) echo "boom" >&2; exit 1;;
esac
"""


def _compiler_or_skip():
    try:
        return toolchain.find_compiler()
    except toolchain.ToolchainError as e:
        pytest.skip(str(e))


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A cache directory of this test (created 0700 by the toolchain)."""
    d = tmp_path / "cache"
    monkeypatch.setenv("FUNCTRANS_CACHE_DIR", str(d))
    return d


@pytest.fixture
def fake_cxx(tmp_path, cache, monkeypatch):
    """fake_cxx(mode) makes $CXX the fake compiler in that mode; .builds() counts its builds."""
    script = tmp_path / "fakecc"
    script.write_text(FAKE_CXX)
    script.chmod(0o755)
    log = tmp_path / "builds.log"

    class Fake:
        child = tmp_path / "child.pid"

        def __call__(self, mode):
            monkeypatch.setenv("CXX", str(script))
            monkeypatch.setenv("FAKE_CXX_MODE", mode)
            monkeypatch.setenv("FAKE_CXX_LOG", str(log))
            monkeypatch.setenv("FAKE_CXX_CHILD", str(self.child))
            return self

        @staticmethod
        def builds():
            return len(log.read_text().splitlines()) if log.exists() else 0
    return Fake()


def _programs():
    """Two jitted programs that each have a native fusion group (cpu_backend='native')."""
    return (ft.jit(lambda x: fnp.exp(fnp.sin(x) * 2.0 + 1.0) - fnp.cos(x) * 0.5),
            ft.jit(lambda x: fnp.tanh(x * 3.0 - 1.0) * fnp.sin(x) + 2.0))


def _run_programs_and_collect_warnings():
    """Run both programs (values checked against NumPy); the RuntimeWarnings that came."""
    x = np.linspace(0, 1, 64, dtype=np.float32)
    f, g = _programs()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        np.testing.assert_allclose(f(x), np.exp(np.sin(x) * 2 + 1) - np.cos(x) * 0.5,
                                   rtol=1e-5)
        np.testing.assert_allclose(g(x), np.tanh(x * 3 - 1) * np.sin(x) + 2, rtol=1e-5)
        text = str(g.lower(x))
    return [w for w in caught if issubclass(w.category, RuntimeWarning)
            and "functrans" in str(w.message)], text


# -- the directory ------------------------------------------------------------------------

def test_the_cache_is_created_0700_and_its_files_0600(cache):
    _compiler_or_skip()
    path = toolchain.build(SRC, "twice")
    assert oct(os.stat(cache).st_mode & 0o777) == "0o700"
    for fn in os.listdir(cache):
        assert os.stat(cache / fn).st_mode & 0o077 == 0, fn
    digest = (cache / (os.path.basename(path)[:-3] + ".sha256")).read_text()
    assert digest == hashlib.sha256(open(path, "rb").read()).hexdigest()


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o702])
def test_a_cache_others_may_write_is_refused(native_backend, cache, mode):
    cache.mkdir(mode=0o700)
    cache.chmod(mode)
    with pytest.raises(toolchain.ToolchainError, match="refused: it is writable by group or "
                       f"others \\(mode {mode:04o}\\).*chmod 700"):
        toolchain.find_compiler()
    caught, text = _run_programs_and_collect_warnings()
    assert len(caught) == 1 and "is refused" in str(caught[0].message)
    assert "numpy: the native kernel cache" in text and "native C++" not in text
    assert os.listdir(cache) == []                  # nothing written, nothing probed


def test_a_cache_another_user_owns_is_refused(cache, monkeypatch):
    cache.mkdir(mode=0o700)
    if os.geteuid() == 0:
        os.chown(cache, 65534, 65534)
    else:                                           # we are someone else
        monkeypatch.setattr(os, "geteuid", lambda: os.getuid() + 1)
    with pytest.raises(toolchain.ToolchainError, match=r"refused: it is owned by uid \d+, "
                       r"not by you \(uid \d+\)"):
        toolchain.build(SRC, "twice")


# -- the files ----------------------------------------------------------------------------

def test_a_library_others_may_write_is_never_loaded_and_is_rebuilt(cache):
    _compiler_or_skip()
    path = toolchain.build(SRC, "twice")
    os.chmod(path, 0o666)
    inode = os.stat(path).st_ino
    assert toolchain.build(SRC, "twice") == path                # built again, in its place
    assert os.stat(path).st_ino != inode and os.stat(path).st_mode & 0o777 == 0o600
    other = toolchain.build(SRC.replace("2.0", "3.0"), "thrice")
    os.chmod(other, 0o646)
    with pytest.raises(toolchain.ToolchainError, match="is not loaded: .* writable by group or "
                       "others"):
        toolchain.load(other)


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_library_another_user_owns_is_never_loaded(cache):
    _compiler_or_skip()
    path = toolchain.build(SRC, "twice")
    os.chown(path, 65534, 65534)
    with pytest.raises(toolchain.ToolchainError, match=r"is not loaded: .*owned by uid 65534"):
        toolchain.load(path)


def test_a_symlink_in_place_of_a_library_is_never_loaded(cache, tmp_path):
    _compiler_or_skip()
    path = toolchain.build(SRC, "twice")
    os.replace(path, tmp_path / "elsewhere.so")
    os.symlink(tmp_path / "elsewhere.so", path)
    with pytest.raises(toolchain.ToolchainError, match="is not loaded: .*cannot be opened"):
        toolchain.load(path)


_DAMAGED = textwrap.dedent("""
    import ctypes, os, sys
    from functrans.backends.native import toolchain
    src = 'extern "C" double ft_twice(double x) { return 2.0 * x; }\\n'
    path = toolchain.build(src, "twice")
    size = os.path.getsize(path)
    if sys.argv[1] == "truncate":
        os.truncate(path, size // 2)
    else:                                      # the same size, bytes changed in the middle
        with open(path, "r+b") as f:
            f.seek(size // 2)
            f.write(b"\\xff" * 64)
    try:
        toolchain.load(path)
    except toolchain.ToolchainError as e:
        print("refused:", e)
    toolchain.reset()                        # forget the failure: build again
    path = toolchain.build(src, "twice")
    fn = toolchain.load(path).ft_twice
    fn.restype, fn.argtypes = ctypes.c_double, [ctypes.c_double]
    print("value:", fn(1.5), os.path.getsize(path) == size)
""")


@pytest.mark.parametrize("damage", ["truncate", "overwrite"])
def test_a_damaged_library_is_refused_then_rebuilt_never_loaded(cache, damage):
    _compiler_or_skip()
    p = subprocess.run([sys.executable, "-W", "ignore", "-c", _DAMAGED, damage], cwd=ROOT,
                       capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, FUNCTRANS_CACHE_DIR=str(cache)))
    assert p.returncode == 0, p.stderr          # SIGBUS: returncode -7
    assert "do not match the digest written when it was built" in p.stdout
    assert "value: 3.0 True" in p.stdout


def test_libraries_are_fsynced_then_renamed_into_place(cache, monkeypatch):
    _compiler_or_skip()
    events, real_fsync, real_replace = [], os.fsync, os.replace

    def fsync(fd):
        events.append(("fsync", os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))))
        return real_fsync(fd)

    def replace(src, dst, **kw):
        events.append(("replace", src, dst))
        return real_replace(src, dst, **kw)
    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    lib = os.path.basename(toolchain.build(SRC, "twice"))
    (_, src, dst), = [e for e in events if e[0] == "replace" and e[2] == lib]
    assert src.endswith(".tmp") and events.index(("fsync", src)) < events.index(
        ("replace", src, dst))


# -- failures fall back, once -------------------------------------------------------------

@pytest.mark.parametrize("mode", ["nothing", "empty", "garbage", "fail"])
def test_a_failed_build_falls_back_with_one_warning_and_is_remembered(
        native_backend, fake_cxx, cache, mode):
    fake = fake_cxx(mode)
    caught, text = _run_programs_and_collect_warnings()
    assert len(caught) == 1, [str(w.message) for w in caught]
    why = {"nothing": "exited 0 but wrote no library", "empty": "exited 0 but wrote no library",
           "garbage": "loading .* failed .*removed from the cache",
           "fail": r"compiling .* failed \(exit 1\)(?s:.*)boom"}[mode]
    message = str(caught[0].message)
    assert re.search(why, message) and "off for this process" in message, message
    assert fake.builds() == 1                       # the second program did not try
    reason = message.splitlines()[0].removeprefix("functrans: ")
    assert f": numpy: {reason}" in text and "native C++" not in text   # it says why
    assert not [f for f in os.listdir(cache) if f.endswith((".so", ".tmp"))]   # nothing kept


def test_a_hanging_compiler_is_killed_with_its_children_once(native_backend, fake_cxx,
                                                             cache, monkeypatch):
    fake = fake_cxx("hang")
    monkeypatch.setattr(toolchain, "COMPILE_TIMEOUT_S", 0.5)
    t0 = time.perf_counter()
    caught, _ = _run_programs_and_collect_warnings()
    assert time.perf_counter() - t0 < 10
    assert len(caught) == 1 and "took over 0.5 s (killed)" in str(caught[0].message)
    assert fake.builds() == 1
    child = int(fake.child.read_text())
    deadline = time.time() + 5
    while _alive(child) and time.time() < deadline:
        time.sleep(0.05)
    assert not _alive(child), "the compiler's child process survived the timeout"


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("err", [errno.EROFS, errno.ENOSPC])
def test_an_unwritable_or_full_cache_falls_back(native_backend, cache, monkeypatch, err):
    _compiler_or_skip()
    cached = toolchain.build(SRC, "twice")

    def write(self, name, data):
        raise OSError(err, os.strerror(err))
    monkeypatch.setattr(toolchain.CacheDir, "write", write)
    assert toolchain.build(SRC, "twice") == cached          # what is there still loads
    toolchain.load(cached)
    caught, text = _run_programs_and_collect_warnings()      # new programs cannot be stored
    assert len(caught) == 1 and os.strerror(err) in str(caught[0].message)
    assert "native C++" not in text


def test_a_missing_compiler_warns_once_and_python_m_functrans_says_so(native_backend, cache,
                                                                       monkeypatch):
    monkeypatch.setenv("CXX", "/nonexistent/c++")
    caught, text = _run_programs_and_collect_warnings()
    assert len(caught) == 1 and "no C++ compiler found" in str(caught[0].message)
    assert "numpy: no C++ compiler found (tried $CXX='/nonexistent/c++')" in text
    assert "no C++ compiler found (tried $CXX='/nonexistent/c++')" in ft_main.report()


# -- bounded ------------------------------------------------------------------------------

def test_the_cache_is_bounded_least_recently_used_first(cache, monkeypatch):
    _compiler_or_skip()
    srcs = {k: SRC.replace("ft_twice", f"ft_{k}") for k in "abcd"}
    paths = {k: toolchain.build(srcs[k], k) for k in "abc"}
    toolchain.load(paths["a"])                                   # mapped: never evicted
    for age, k in enumerate("abc"):                              # a, then b, then c used
        for fn in os.listdir(cache):
            if fn.startswith(k + "-"):
                os.utime(cache / fn, (1e9 + age, 1e9 + age))
    toolchain.build(srcs["b"], "b")                              # b used again: c is the LRU
    group = sum(os.path.getsize(cache / fn) for fn in os.listdir(cache) if fn.startswith("c-"))
    total = sum(os.path.getsize(cache / fn) for fn in os.listdir(cache))
    monkeypatch.setenv("FUNCTRANS_CACHE_MAX_MB", str((total + group / 2) / 1e6))
    toolchain.build(srcs["d"], "d")
    left = {fn.split("-")[0] for fn in os.listdir(cache) if fn.endswith(".so")}
    assert left == {"a", "b", "d"}
    assert not [fn for fn in os.listdir(cache) if fn.startswith("c-")]
    monkeypatch.setenv("FUNCTRANS_CACHE_MAX_MB", "1e-6")         # only a (mapped) and e stay
    toolchain.build(srcs["a"].replace("2.0", "5.0"), "e")
    assert {fn.split("-")[0] for fn in os.listdir(cache) if fn.endswith(".so")} == {"a", "e"}


@pytest.mark.parametrize("value", ["nan", "-1", "0", "inf", "lots"])
def test_the_cache_bound_is_validated(cache, monkeypatch, value):
    monkeypatch.setenv("FUNCTRANS_CACHE_MAX_MB", value)
    with pytest.raises(ValueError, match=r"\$FUNCTRANS_CACHE_MAX_MB=.* is not a number of "
                       "megabytes > 0"):
        toolchain.cache_limit()


# -- python -m functrans ------------------------------------------------------------------

def test_python_m_functrans_reports_the_cache(cache):
    _compiler_or_skip()
    toolchain.build(SRC, "twice")
    p = subprocess.run([sys.executable, "-m", "functrans"], cwd=ROOT, capture_output=True,
                       text=True, timeout=120, env=dict(os.environ, FUNCTRANS_CACHE_DIR=str(cache)))
    assert p.returncode == 0, p.stderr
    row, = [ln for ln in p.stdout.splitlines() if ln.startswith("native kernel cache")]
    assert f"{cache}: 1 libraries" in row and "MB of 256 MB (state: ok)" in row
    cache.chmod(0o777)
    assert "refused (the native kernel cache" in ft_main.report()
