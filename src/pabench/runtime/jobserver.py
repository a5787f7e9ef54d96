"""Run workflow scripts in processes forked from one that has imported torch already.

Every Snakemake `script:` job is a new Python process, and most of the quick scale's 500 jobs
spent longer importing torch, pandas, scipy and matplotlib (about 2 s on 2 cores) than computing.
So the Snakefile starts a *job server* for its Snakemake process (`start`): a process that imports
those libraries once (`PRELOAD`; never pabench, whose code may change while a run goes on) and
then forks one child per job.  A job's script calls `delegate()` on its first line, before its
own imports: the script's process (the one Snakemake started and waits for) sends its standard
streams, working directory, environment, `sys.path` and script file to the server, whose child
runs the whole script, Snakemake's preamble included, exactly as the process would have; the
process then exits with the child's exit status.  If the process is killed (Snakemake cancels
the job), the server kills the child and its process group.

A child starts as a new process would: pabench modules imported fresh, `random` and numpy's
global generator reseeded from the OS, torch's threads set from OMP_NUM_THREADS when that is set
(scripts set them from the rule's `threads`).  Snakemake's benchmark of the job measures the
launching process, so its wall time is right but its max RSS is the launcher's; the job logs its
own peak memory instead (`peak_rss_mib`, read by pabench.reporting.timings).

Where the server cannot be used (not Linux, PABENCH_JOB_SERVER=0, no Snakemake ancestor, no
server for it, or any failure before the server has forked the child) the script simply runs in
its own process, as before.  The server serves only its own user (the private socket directory of
the W&B run server) and its own Snakemake process: it exits with it, or after
`IDLE_TIMEOUT` s without a job.
"""
from __future__ import annotations

import contextlib
import os
import socket
import sys
import time
from pathlib import Path

from . import tracking  # the socket directory, owner and process helpers of the W&B run server

ENV = "PABENCH_JOB_SERVER"        # "0": every job in its own process
INSIDE = "PABENCH_IN_JOB_SERVER"  # set in a server's child: the script runs here
IDLE_TIMEOUT = 60.0
KILL_GRACE = 3.0                  # s between SIGTERM and SIGKILL of a cancelled job
# What jobs import most, in import order (a missing one is skipped).  snakemake.script: every
# job's preamble.  foolbox and pyautoattack: the attack jobs (0.4 s each).  The BERT modules: the
# quick scale's 13 Figure 10 jobs each spent 3 CPU-s importing them for 2 s of MiniLM.
PRELOAD = ("numpy", "pandas", "yaml", "tqdm", "scipy.stats", "scipy.optimize", "scipy.ndimage",
           "torch", "torch.nn.functional", "torchvision", "matplotlib", "matplotlib.pyplot",
           "sklearn.decomposition", "sklearn.linear_model", "snakemake.script", "foolbox",
           "pyautoattack", "transformers.models.auto.modeling_auto",
           "transformers.models.auto.tokenization_auto", "transformers.models.bert.modeling_bert",
           "transformers.models.bert.tokenization_bert")


def wanted() -> bool:
    return sys.platform.startswith("linux") and tracking.switched_on(ENV)


def address(who: tuple[int, str]) -> Path:
    """The server socket of a Snakemake process for this interpreter."""
    import hashlib

    key = f"jobs:{who[0]}:{who[1]}:{sys.executable}:{sys.version}"
    return tracking.socket_dir() / f"jobs-{hashlib.sha256(key.encode()).hexdigest()[:20]}.sock"


def start(argv: list[str] | None = None) -> None:
    """Start the job server of this (Snakemake) process, from the Snakefile; it preloads in the
    background.  Does nothing where it would not be used (see the module docstring, or a
    Snakemake run that runs no job: `argv`, default sys.argv) and never raises."""
    try:
        if not wanted() or tracking.runs_no_job(sys.argv if argv is None else argv):
            return
        me = (os.getpid(), tracking.proc_stat(os.getpid())[1])
        path = address(me)
        probe = tracking.try_connect(path) if path.exists() else None
        if probe is not None:
            probe.close()
            return
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        tracking.spawn_detached(path, "pabench.runtime.jobserver", [str(me[0]), me[1]])
    except Exception as err:  # noqa: BLE001 - the jobs then run in their own processes
        print(f"pabench: job server not started ({type(err).__name__}: {err})", file=sys.stderr)


def delegate() -> None:
    """Run this script (the file Python was started with) in the job server and exit with its
    status; return at once where the script should run here.  The first line of every workflow
    script."""
    if os.environ.get(INSIDE) or not wanted():
        return
    script = sys.argv[0]  # the file Python runs: Snakemake's copy with its preamble, whose
    # __file__ is set to the workflow's script
    try:
        who = tracking.snakemake_ancestor()
        sock = tracking.try_connect(address(who)) if who and script else None
        if sock is None:
            return
        chan = tracking.Channel(sock)
        socket.send_fds(sock, [b"j"], [0, 1, 2])
        chan.send({"script": os.path.abspath(script), "cwd": os.getcwd(), "argv": sys.argv,
                   "path": sys.path, "env": {**os.environ, INSIDE: "1",
                                            tracking.OWNER_ENV: f"{who[0]}:{who[1]}"}})
        started = chan.recv()  # the child's pid: from here on the job is the server's
    except Exception:  # noqa: BLE001 - run here instead
        return
    try:
        status = chan.recv()
    except (EOFError, OSError):
        print(f"pabench: the job server lost the job (child {started}); see "
              f"{address(who).with_suffix('.log')}", file=sys.stderr)
        status = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def serve(argv=None) -> None:
    """The job server (started by `start`): listen, preload, then fork one child per job and
    report its exit status; kill a job whose launcher is gone.  Single-threaded: nothing runs
    besides the main thread when it forks."""
    import importlib
    import select
    import signal

    path, pid, begun = argv or sys.argv[1:4]
    who = (int(pid), begun)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    inode = os.stat(path).st_ino
    listener.listen(128)  # jobs may connect while the libraries are imported
    for name in PRELOAD:
        with contextlib.suppress(Exception):
            importlib.import_module(name)
    jobs: dict[int, tuple[socket.socket, float | None]] = {}  # child -> (launcher, killed at)
    wake, woken = os.pipe()  # SIGCHLD wakes the loop: a job's status goes out at once
    os.set_blocking(woken, False)
    signal.set_wakeup_fd(woken)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    last_busy = time.monotonic()
    try:
        while True:
            conns = {conn: child for child, (conn, _) in jobs.items()}
            ready, _, _ = select.select([listener, wake, *conns], [], [], 0.5)
            for conn in ready:
                if conn is listener:
                    _accept(listener, jobs, (wake, woken))
                elif conn is wake:
                    os.read(wake, 512)
                elif jobs[conns[conn]][1] is None:  # the launcher hung up: cancel the job
                    _kill(conns[conn], signal.SIGTERM)
                    jobs[conns[conn]] = (conn, time.monotonic())
            for child, (conn, killed) in list(jobs.items()):
                done, status = os.waitpid(child, os.WNOHANG)
                if done:
                    with contextlib.suppress(OSError):
                        tracking.Channel(conn).send(_exit_code(status))
                    conn.close()
                    del jobs[child]
                elif killed is not None and time.monotonic() - killed > KILL_GRACE:
                    _kill(child, signal.SIGKILL)
            if ready or jobs:
                last_busy = time.monotonic()
            elif not tracking.alive(who) or time.monotonic() - last_busy > IDLE_TIMEOUT:
                break
    finally:
        with contextlib.suppress(OSError):
            if os.stat(path).st_ino == inode:
                os.unlink(path)
        listener.close()
        with contextlib.suppress(OSError):
            log = Path(path).with_suffix(".log")
            if not log.stat().st_size:
                log.unlink()


def _accept(listener: socket.socket, jobs: dict, pipe: tuple[int, int]) -> None:
    import signal
    import struct

    conn, _ = listener.accept()
    fds: list[int] = []
    try:
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        if struct.unpack("3i", creds)[1] != os.getuid():
            conn.close()
            return
        conn.settimeout(30)  # a launcher sends its request right after connecting
        _, fds, _, _ = socket.recv_fds(conn, 1, 3)
        chan = tracking.Channel(conn)
        request = chan.recv()
        conn.settimeout(None)
    except Exception as err:  # noqa: BLE001 - that launcher runs its script itself
        if not isinstance(err, EOFError):  # EOF: a probe (`start`), or a launcher gone already
            import traceback

            traceback.print_exc()
        conn.close()
        for fd in fds:
            os.close(fd)
        return
    child = os.fork()
    if child == 0:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in pipe:
            os.close(fd)
        listener.close()
        for other, _ in jobs.values():
            other.close()
        _run(fds, request)  # never returns
    for fd in fds:
        os.close(fd)
    jobs[child] = (conn, None)
    try:
        chan.send(child)
    except OSError:  # the launcher is gone already: cancel
        _kill(child, signal.SIGTERM)
        jobs[child] = (conn, time.monotonic())


def _kill(child: int, sig: int) -> None:
    """Signal a job's process group (the child's own, once it has called setsid), else the child."""
    with contextlib.suppress(OSError):
        if os.getpgid(child) == child:
            os.killpg(child, sig)
            return
        os.kill(child, sig)


def _run(fds: list[int], request: dict) -> None:
    """In the forked child: become the job's process and run its script; exit with its status."""
    code = 1
    try:
        os.setsid()  # its own process group, which a cancel kills whole
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv[:] = request["argv"]
        sys.path[:] = request["path"]
        for name in [m for m in sys.modules if m == "pabench" or m.startswith("pabench.")]:
            del sys.modules[name]  # this job's pabench, from its sys.path, as a new process would
        import random

        random.seed()
        if "numpy" in sys.modules:
            sys.modules["numpy"].random.seed()
        if "torch" in sys.modules and os.environ.get("OMP_NUM_THREADS", "").isdigit():
            sys.modules["torch"].set_num_threads(max(1, int(os.environ["OMP_NUM_THREADS"])))
        import runpy

        code = 0
        runpy.run_path(request["script"], run_name="__main__")
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else 0 if stop.code is None else 1
        if not isinstance(stop.code, (int, type(None))):
            print(stop.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - the traceback a failing script prints
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        with contextlib.suppress(BaseException):
            import atexit

            atexit._run_exitfuncs()  # the job's own (W&B, temporary files); not the server's loop
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _exit_code(status: int) -> int:
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code  # killed by signal N: 128 + N, as a shell says
