"""`python -m functrans.distributed.run -n N [--hosts h1,h2] script.py args...`: launch N
processes of a script through the installed `mpiexec` (MPICH's, from the `mpi` extra).

Single-machine jobs (no --hosts) are bound to shared memory and loopback: MPICH's
fork-only process manager `mpiexec.gforker`, which opens no socket, and UCX / libfabric
told to stay on shared memory and loopback in the environment, so no process of the job
listens on or connects to the machine's network address (without gforker, Hydra's
`mpiexec -launcher fork -iface lo`, whose own control port listens on the wildcard
address: see `command`). Each rank runs the script through this module's rank wrapper,
which records how the rank ended: an uncaught exception is printed with the rank's
number and aborts the whole job (the others would otherwise wait for it forever), and a
rank that dies without finishing (killed, a crash, `os._exit`) is named by the launcher
when mpiexec returns.
"""
from __future__ import annotations

import argparse
import os
import re
import runpy
import signal
import shutil
import subprocess
import sys
import tempfile
import time
import traceback

LOOPBACK_ENV = {"UCX_TLS": "self,sm", "UCX_NET_DEVICES": "lo",
                "FI_PROVIDER": "tcp", "FI_TCP_IFACE": "lo"}
_STATUS_DIR = "FUNCTRANS_RUN_STATUS"


def find_mpiexec():
    """The mpiexec next to this interpreter (the `mpich` wheel's) first, else PATH's."""
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if os.access(here, os.X_OK):
        return here
    found = shutil.which("mpiexec")
    if found is None:
        raise RuntimeError("functrans.distributed.run: no mpiexec found next to "
                           f"{sys.executable} or on PATH; install one with "
                           "`pip install 'functrans[mpi]'` (mpi4py and MPICH)")
    return found


def command(n, argv, hosts=None, pm=None):
    """The command line that starts n processes of argv, and the environment it needs.

    On one machine: MPICH's fork-only process manager `mpiexec.gforker` (pm="gforker"),
    which talks to the ranks over pipes and opens no socket, or `mpiexec -launcher fork
    -iface lo` (pm="hydra"), whose control port listens on the wildcard address (0.0.0.0)
    even then (only its own processes connect to it, over loopback); pm=None: gforker when
    it is installed beside mpiexec (MPICH's wheel has it), else Hydra. (gforker may
    linger about 2 s after the last rank exits: it sleeps when that rank's pipes close
    before it is reaped.) The ranks' own traffic is kept on shared memory and loopback by
    LOOPBACK_ENV. With hosts: `mpiexec -hosts h1,h2` (Hydra, over ssh)."""
    mpiexec = find_mpiexec()
    env = {}
    if pm is None and not hosts:
        pm = "gforker" if os.access(mpiexec + ".gforker", os.X_OK) else "hydra"
    if hosts:
        cmd = [mpiexec, "-hosts", hosts]
    elif pm == "gforker":
        cmd = [mpiexec + ".gforker"]
        if not os.access(cmd[0], os.X_OK):
            raise RuntimeError(f"functrans.distributed.run: --pm gforker needs {cmd[0]} "
                               "(MPICH's fork-only process manager)")
        env.update(LOOPBACK_ENV)
    elif pm == "hydra":
        cmd = [mpiexec, "-launcher", "fork", "-iface", "lo"]
        env.update(LOOPBACK_ENV)
    else:
        raise ValueError(f"functrans.distributed.run: unknown process manager {pm!r}; "
                         "use 'hydra' or 'gforker'")
    # the ranks import the same functrans as the launcher
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH"))
                                        if p)
    return cmd + ["-n", str(n), *argv], env


def launch(n, script, args=(), hosts=None, env=None, pm=None):
    """Run the job to its end; returns its exit code, after naming any rank that did not
    finish. A job fails when mpiexec does or when any rank did not end cleanly: MPICH's fork-only manager exits 0 even when a rank was killed by a signal, so
    its reports ("[0]1:Return code = 0, signaled with Killed") are read from its error
    stream (passed through as it comes), and the ranks' own status files are checked.
    A failure that mpiexec reported as 0 returns 128 + the signal's number, as a shell
    does, or 1."""
    argv = [sys.executable, "-m", "functrans.distributed.run", "--rank", script, *args]
    cmd, extra = command(n, argv, hosts, pm)
    e = dict(os.environ)
    for k, v in extra.items():
        if k == "PYTHONPATH" or k not in e:     # the user's own UCX/FI settings win
            e[k] = v
    e.update(env or {})
    segments = _shm_segments()
    with tempfile.TemporaryDirectory(prefix="functrans-run-") as status:
        e[_STATUS_DIR] = status
        proc = subprocess.Popen(cmd, env=e, stderr=subprocess.PIPE)
        signals = {}
        for line in proc.stderr:          # passed through; the manager's reports read
            sys.stderr.buffer.write(line)
            sys.stderr.flush()
            m = _SIGNALED.match(line.decode(errors="replace"))
            if m:
                signals[int(m.group(1))] = m.group(2)
        rc = proc.wait()
        failed = _ended(status, signals)
        if rc != 0 or failed:
            _name_dead_ranks(status, rc, bool(hosts), signals)
        if rc == 0 and failed:
            culprits = [r for r in failed if signals.get(r) != _TEARDOWN] or failed
            rc = 128 + _signal_number(signals[culprits[0]]) if culprits[0] in signals else 1
    if rc != 0 and not hosts:
        _remove_abandoned_segments(_shm_segments() - segments)
    return rc


SHM = "/dev/shm"


def _shm_segments():
    """The names of MPICH's shared-memory segment files now in /dev/shm."""
    try:
        return {f for f in os.listdir(SHM) if f.startswith("mpich_shm_")}
    except OSError:
        return set()


SEGMENT_WAIT_S = 5.0     # how long a failed job's segments may stay mapped by its ranks


def _remove_abandoned_segments(new, wait_s=SEGMENT_WAIT_S):
    """After a failed local job: the segments that appeared while it ran, that this user
    owns and that no live process has mapped or open, are removed (a rank killed before
    MPICH unlinks its segment leaves 2 MB in /dev/shm for every failed job). A segment
    still mapped is looked at again for up to wait_s: the process manager's teardown of
    the other ranks may still be under way when the job's exit code comes (on a loaded
    machine one stayed behind). Another job's segment in use is never touched."""
    paths = {p for p in (os.path.join(SHM, f) for f in new) if _owned(p)}
    deadline = time.monotonic() + wait_s
    while paths:
        for p in paths - _in_use(paths):
            try:
                os.unlink(p)
            except OSError:
                pass
        paths = {p for p in paths if os.path.exists(p)}
        if not paths or time.monotonic() > deadline:
            return
        time.sleep(0.05)


def _owned(path):
    try:
        return os.stat(path).st_uid == os.getuid()
    except OSError:
        return False


def _in_use(paths):
    """The paths among `paths` that a live process has mapped or open (/proc)."""
    used = set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/maps") as f:
                used.update(p for line in f if SHM in line for p in paths if p in line)
            fds = f"/proc/{pid}/fd"
            for fd in os.listdir(fds):
                link = os.readlink(os.path.join(fds, fd))
                if link in paths:
                    used.add(link)
        except OSError:
            continue
    return used


# MPICH gforker's report of a rank that ended by a signal: "[0]<rank>:Return code = <rc>,
# signaled with <name>"
# gforker ends the other ranks with SIGQUIT when one fails: not what failed the job
_TEARDOWN = signal.strsignal(signal.SIGQUIT)
_SIGNALED = re.compile(r"^\[\d+\](\d+):Return code = -?\d+, signaled with (.+?)\s*$")


def _signal_number(description):
    """A signal's number from its description ("Killed", "Segmentation fault"), or 0."""
    for sig in signal.Signals:
        if signal.strsignal(sig) == description or sig.name == description:
            return int(sig)
    return 0


def _statuses(status):
    """(ranks that started, {rank: how it ended}) from the status files."""
    started = set(int(f.split(".")[0]) for f in os.listdir(status) if f.endswith(".started"))
    ended = {}
    for f in os.listdir(status):
        if f.endswith(".ended"):
            with open(os.path.join(status, f)) as fh:
                ended[int(f.split(".")[0])] = fh.read().strip()
    return started, ended


def _ended(status, signals):
    """The ranks that did not end cleanly, lowest first: those reported signaled, and
    those whose status says how they failed (a rank ended by `os._exit(0)` leaves none and
    counts as the exit code says)."""
    _, ended = _statuses(status)
    return sorted(set(signals) | {r for r, how in ended.items() if how != "ok"})


def _name_dead_ranks(status, rc, remote, signals):
    """Say which ranks did not finish: by a signal, without a status, or how they ended."""
    started, ended = _statuses(status)
    lines = [f"functrans.distributed.run: the job failed (mpiexec exit code {rc})"]
    lines += [f"  rank {r} was killed by a signal: {how}" + (
        " (the process manager ending the job)" if how == _TEARDOWN else "")
        for r, how in sorted(signals.items())]
    lines += [f"  rank {r} died without finishing (killed, crashed or os._exit)"
              for r in sorted(started - set(ended) - set(signals))]
    lines += [f"  rank {r}: {how}" for r, how in sorted(ended.items()) if how != "ok"]
    if remote and not started:
        lines.append("  (status of ranks on other hosts is not known here)")
    print("\n".join(lines), file=sys.stderr, flush=True)


def _rank_id():
    for k in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "MPI_LOCALRANKID"):
        if k in os.environ:
            return int(os.environ[k])
    return 0


def run_rank(script, args):
    """In each rank: run the script as __main__, recording how it ends."""
    rank = _rank_id()
    status = os.environ.get(_STATUS_DIR)

    def mark(kind, text=""):
        if status and os.path.isdir(status):
            with open(os.path.join(status, f"{rank}.{kind}"), "w") as f:
                f.write(text)

    mark("started")
    sys.argv = [script, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        mark("ended", "ok" if code == 0 else f"exited with status {code}")
        raise
    except KeyboardInterrupt:
        mark("ended", "interrupted (the job was being ended)")
        raise
    except BaseException as e:
        tb = traceback.format_exc()
        sys.stderr.write(f"[rank {rank}] uncaught exception, aborting the job:\n{tb}")
        sys.stderr.flush()
        mark("ended", f"{type(e).__name__}: {e}")
        _abort()
        os._exit(1)         # the traceback is printed; end without MPI's finalization
    mark("ended", "ok")


def _abort():
    """MPI_Abort the job, so that the other ranks do not wait for this one forever."""
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized():
        mpi.COMM_WORLD.Abort(1)


def main(argv=None):
    p = argparse.ArgumentParser(
        prog="python -m functrans.distributed.run",
        description="Launch N processes of a script with mpiexec (loopback and shared "
                    "memory only unless --hosts is given).")
    p.add_argument("-n", "--nproc", type=int, default=1, help="number of processes")
    p.add_argument("--hosts", default=None,
                   help="comma-separated host names (passed to mpiexec -hosts)")
    p.add_argument("--pm", choices=("hydra", "gforker"), default=None,
                   help="process manager of a single-machine job: gforker (no socket; the "
                        "default when installed) or hydra (its control port listens on "
                        "every address)")
    p.add_argument("--rank", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("script")
    p.add_argument("args", nargs=argparse.REMAINDER)
    a = p.parse_args(argv)
    if a.rank:
        run_rank(a.script, a.args)
        return 0
    if a.nproc < 1:
        p.error("-n must be at least 1")
    return launch(a.nproc, a.script, a.args, a.hosts, pm=a.pm)


if __name__ == "__main__":
    sys.exit(main())
