"""The native backend's toolchain: compiler discovery, the disk cache (keyed by source,
compiler and flags; safe when two processes build at once), loading, clear errors."""
import ctypes
import os
import subprocess
import sys
import textwrap

import pytest

from functrans.backends.native import toolchain

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _compiler_or_skip():
    try:
        return toolchain.find_compiler()
    except toolchain.ToolchainError as e:
        pytest.skip(str(e))


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FUNCTRANS_CACHE_DIR", str(tmp_path))
    return tmp_path


def test_build_load_and_cache(cache):
    _compiler_or_skip()
    src = 'extern "C" double ft_twice(double x) { return 2.0 * x; }\n'
    path = toolchain.build(src, "twice")
    assert os.path.dirname(path) == str(cache) and path.endswith(".so")
    assert open(path[:-3] + ".cpp").read() == src          # the source is kept beside it
    inode = os.stat(path).st_ino
    assert toolchain.build(src, "twice") == path            # cached: not rebuilt
    assert os.stat(path).st_ino == inode
    fn = toolchain.load(path).ft_twice
    fn.restype, fn.argtypes = ctypes.c_double, [ctypes.c_double]
    assert fn(1.5) == 3.0
    assert toolchain.build(src + "\n", "twice") != path     # another source, another key
    assert toolchain.clear_cache() >= 4 and not os.path.exists(path)


def test_compile_error_names_the_source_and_shows_stderr(cache):
    _compiler_or_skip()
    with pytest.raises(toolchain.ToolchainError, match=r"(?s)compiling broken .*failed.*"
                       r"broken-.*\.cpp.*not_a_type"):
        toolchain.build("not_a_type x;\n", "broken")
    assert not [f for f in os.listdir(cache) if f.endswith((".so", ".tmp"))]


def test_missing_compiler_says_why(cache, monkeypatch):
    monkeypatch.setenv("CXX", "/nonexistent/c++")
    with pytest.raises(toolchain.ToolchainError, match=r"no C\+\+ compiler found "
                       r"\(tried \$CXX='/nonexistent/c\+\+'\).*not found"):
        toolchain.find_compiler()


def test_openmp_detected_once(cache):
    cc = _compiler_or_skip()
    assert [f for f in os.listdir(cache) if f.startswith("probe-")]
    assert (toolchain.OPENMP_FLAG in cc.flags) == cc.openmp
    assert "-ffp-contract=off" in cc.flags and "-ffast-math" not in cc.flags


def test_two_processes_build_the_same_source_at_once(cache):
    _compiler_or_skip()
    script = textwrap.dedent("""
        import ctypes, sys
        from functrans.backends.native import toolchain
        src = 'extern "C" int ft_same(void) { return 42; }\\n' + '// pad\\n' * 2000
        sys.stdin.readline()                       # start together
        lib = toolchain.load(toolchain.build(src, "same"))
        print(lib.ft_same())
    """)
    env = dict(os.environ, FUNCTRANS_CACHE_DIR=str(cache))
    procs = [subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, env=env, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE) for _ in range(2)]
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
        assert out.strip() == "42"
    assert len([f for f in os.listdir(cache) if f.startswith("same-") and f.endswith(".so")]) == 1
    assert not [f for f in os.listdir(cache) if f.endswith(".tmp")]


def test_a_compiler_refusing_the_wide_vector_flag_keeps_march_native(cache, tmp_path):
    """A compiler that takes -march=native but not x86's -mprefer-vector-width (one for
    another architecture) still gets -march=native; one that takes neither gets neither."""
    real = _compiler_or_skip().path
    for refused, want in (("-mprefer-vector-width", (toolchain.MARCH_FLAG,)), ("-march", ())):
        wrapper = tmp_path / f"cxx-{len(want)}"
        wrapper.write_text(textwrap.dedent(f"""\
            #!/bin/sh
            for a in "$@"; do case "$a" in {refused}*) echo "unknown: $a" >&2; exit 1;; esac; done
            exec {real} "$@"
            """))
        wrapper.chmod(0o755)
        _, _, march = toolchain._probe([str(wrapper)], str(wrapper), toolchain._cache())
        assert march == want


def test_cache_dir_follows_its_variables_and_a_relative_one_the_working_directory(
        tmp_path, monkeypatch):
    """cache_dir() is remembered per ($FUNCTRANS_CACHE_DIR, $HOME), so a change of either is
    seen at the next call; a relative $FUNCTRANS_CACHE_DIR is resolved against the working
    directory of each call."""
    monkeypatch.delenv("FUNCTRANS_CACHE_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "h1"))
    assert toolchain.cache_dir() == str(tmp_path / "h1" / ".cache" / "functrans" / "native")
    monkeypatch.setenv("HOME", str(tmp_path / "h2"))
    assert toolchain.cache_dir() == str(tmp_path / "h2" / ".cache" / "functrans" / "native")
    monkeypatch.setenv("FUNCTRANS_CACHE_DIR", str(tmp_path / "a" / ".." / "b"))
    assert toolchain.cache_dir() == str(tmp_path / "b")
    monkeypatch.setenv("FUNCTRANS_CACHE_DIR", "rel")
    for d in ("x", "y"):
        (tmp_path / d).mkdir()
        monkeypatch.chdir(tmp_path / d)
        assert toolchain.cache_dir() == str(tmp_path / d / "rel")
