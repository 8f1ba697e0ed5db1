"""Every ```python block of README.md and docs/*.md runs, so the docs cannot drift.

Conventions (the page is the test):

- The python blocks of one page run in order in one namespace (a page is one session), in
  a fresh process whose working directory is a new temporary folder (a block may write
  files).
- A python block followed directly (only blank lines between) by a bare ``` or a ```text
  block shows its printed output: what the block prints must equal that block, line by
  line after stripping trailing spaces. A line holding only `...` stands for any number of
  lines (as doctest's ELLIPSIS), and `...` inside a line for any text on that line.
- An HTML comment right before a block (invisible on the rendered page) marks it:
  `<!-- docs: skip (reason) -->` does not run the block (a GPU, MPI, several processes);
  the reason is shown as the skip reason. `<!-- docs: needs (graphviz, dot) -->` runs the
  block only where each name is an importable module or a program on PATH (an optional
  extra), and skips it otherwise. `<!-- docs: no-output-check -->` runs the block
  but does not compare the output block after it (timings, addresses, machine-dependent
  text). `<!-- docs: excerpt (path/in/repo.py) -->` does not run the block but checks that
  its text appears, verbatim, in that file (a declaration quoted from the source).
- A python block written as an interactive session (`>>> ` lines, `... ` continuations,
  then the expected output) runs example by example as doctest does: an expression's value
  is printed, an exception shows as `ClassName: message`; whitespace (line wrapping) is
  not compared, and `...` stands for any text.
"""
import contextlib
import importlib.util
import io
import linecache
import os
import pathlib
import re
import shutil
import subprocess
import sys
import traceback

import pytest

ROOT = pathlib.Path(__file__).parent.parent
PAGES = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))

FENCE = re.compile(r"^```(\w*)\s*$")
MARK = re.compile(r"^<!--\s*docs:\s*(skip|no-output-check|excerpt|needs)\s*(?:\((.*)\))?\s*-->\s*$")


def blocks(text):
    """The page's fenced blocks as dicts: lang, code, line, mark (skip/no-output-check), reason,
    and output (the text of a following bare/text block, or None)."""
    lines = text.splitlines()
    found, i, mark = [], 0, None
    while i < len(lines):
        m = MARK.match(lines[i])
        if m:
            mark = (m.group(1), m.group(2) or "")
            i += 1
            continue
        f = FENCE.match(lines[i])
        if not f:
            if lines[i].strip():
                mark = None
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].rstrip() == "```")
        found.append({"lang": f.group(1), "code": "\n".join(lines[i + 1:end]), "line": i + 1,
                      "mark": mark[0] if mark else None, "reason": mark[1] if mark else "",
                      "output": None})
        mark, i = None, end + 1
    for prev, nxt in zip(found, found[1:]):
        if prev["lang"] == "python" and nxt["lang"] in ("", "text") and \
                all(not s.strip() for s in lines[prev["line"] + prev["code"].count("\n") + 2:
                                                  nxt["line"] - 1]):
            prev["output"] = nxt["code"]
    return [b for b in found if b["lang"] == "python"]


def output_matches(expected, got):
    """Line-by-line comparison with `...` wildcards (a whole line: any lines; in a line: any
    text)."""
    exp = [s.rstrip() for s in expected.strip("\n").splitlines()]
    act = [s.rstrip() for s in got.strip("\n").splitlines()]

    def line_ok(e, a):
        return re.fullmatch(".*".join(map(re.escape, e.split("..."))), a) is not None

    def match(i, j):
        if i == len(exp):
            return j == len(act)
        if exp[i].strip() == "...":
            return any(match(i + 1, k) for k in range(j, len(act) + 1))
        return j < len(act) and line_ok(exp[i], act[j]) and match(i + 1, j + 1)
    return match(0, 0)


def session_failures(code, where, namespace):
    """Run an interactive-session block (`>>> `); the examples whose output differs."""
    examples, cur = [], None
    for line in code.splitlines():
        if line.startswith(">>> "):
            cur = [line[4:], []]
            examples.append(cur)
        elif line.startswith("... ") and cur is not None and not cur[1]:
            cur[0] += "\n" + line[4:]
        elif cur is not None and line.strip():
            cur[1].append(line)
    failures = []
    for src, expected in examples:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            try:
                exec(compile(src, where, "single"), namespace)
            except Exception as e:
                print(f"{type(e).__name__}: {e}")
        got, want = " ".join(out.getvalue().split()), " ".join(" ".join(expected).split())
        if not re.fullmatch(".*".join(map(re.escape, want.split("..."))), got, re.S):
            failures.append(f"at {where}, {src!r} printed\n{out.getvalue()}\n"
                            f"but the page shows\n{chr(10).join(expected)}")
    return failures


def run_page(page):
    """Run the page's blocks in one namespace; the list of failures and of skipped blocks."""
    namespace = {"__name__": f"docs_{page.stem}"}
    failures, skipped = [], []
    for b in blocks(page.read_text()):
        where = f"{page.name}:{b['line']}"
        missing = [n.strip() for n in b["reason"].split(",") if b["mark"] == "needs" and
                   importlib.util.find_spec(n.strip()) is None and shutil.which(n.strip()) is None]
        if b["mark"] == "skip" or missing:
            why = b["reason"] if b["mark"] == "skip" else "no " + ", ".join(missing)
            skipped.append(f"{where} ({why})")
            continue
        if b["mark"] == "excerpt":
            if b["code"] not in (ROOT / b["reason"]).read_text():
                failures.append(f"the excerpt at {where} is not in {b['reason']}")
            continue
        if b["code"].startswith(">>> "):
            failures += session_failures(b["code"], where, namespace)
            continue
        # the block's source is known to tracebacks (and to reports quoting the forward line)
        linecache.cache[where] = (len(b["code"]), None, b["code"].splitlines(True), where)
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                exec(compile(b["code"], where, "exec"), namespace)
        except Exception:
            failures.append(f"the block at {where} raised:\n{traceback.format_exc(limit=-4)}")
            break
        if b["output"] is not None and b["mark"] != "no-output-check" and \
                not output_matches(b["output"], out.getvalue()):
            failures.append(f"the block at {where} printed\n{out.getvalue()}\n"
                            f"but the page shows\n{b['output']}")
    return failures, skipped


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_page_runs(page, tmp_path):
    # one process per page: a page may declare a primitive or change global settings
    if not blocks(page.read_text()):
        pytest.skip(f"{page.name} has no python blocks")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT)] + [
        p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    proc = subprocess.run([sys.executable, __file__, str(page)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    print(proc.stdout)


def test_conventions():
    page = ("```python\nprint(1)\n```\n```\n1\n```\n<!-- docs: skip (needs a GPU) -->\n"
            "```python\nimport cupy\n```\n")
    b = blocks(page)
    assert [x["output"] for x in b] == ["1", None] and b[1]["mark"] == "skip"
    assert output_matches("a\n...\nd", "a\nb\nc\nd") and output_matches("x = ...!", "x = 12!")
    assert not output_matches("a\nb", "a\nc")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    fails, skips = run_page(pathlib.Path(sys.argv[1]))
    print("\n\n".join(fails) or "ok", "; skipped blocks: " + ", ".join(skips) if skips else "")
    sys.exit(1 if fails else 0)
