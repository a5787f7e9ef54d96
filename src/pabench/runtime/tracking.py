"""Weights & Biases tracking: one run per workflow job, never able to fail the job.

Modes: "offline" (default: run directories under the configured dir, no account needed; sync
later with `wandb sync`), "online" (needs WANDB_API_KEY in the environment or a `wandb login`;
without credentials it falls back to offline with one warning) and "disabled".
The API key is only ever read by wandb itself from the environment or ~/.netrc.

Per-job cost.  Importing wandb and starting a run costs about 1.5 s of CPU per process (pydantic
models, the pip package list, a wandb-core process), more than many jobs compute.  A job started by
Snakemake therefore hands its run to a *run server* (`open_run`, `RemoteTracker`): one Python
process per Snakemake process and version of this file, started by the first job that needs it
(or early, by `start_server` in the Snakefile), that has imported wandb and what a run imports
lazily once, shares one wandb-core among its offline runs, and forks one child per job.  The
child starts the job's run while the job computes; the job's `finish` returns when the run is
complete on disk (exit record written), as before, with the run's warnings in the job's log.
The job itself never imports wandb; the run directory it leaves is the one an in-process run
leaves.  The server serves only the Snakemake process it was started for (it exits with it, or
after `SERVER_IDLE_TIMEOUT` s without jobs), only its own user (a private socket directory), and
only this host: on a cluster every node, in fact every cluster job (its own Snakemake process),
gets its own.  Where none can be used (no Snakemake ancestor, not Linux,
`PABENCH_WANDB_SERVER=0`, a failure to start or reach it, or a failure before the server's child
has taken the run) the job logs in-process exactly as before.
"""
from __future__ import annotations

import contextlib
import importlib
import json
import logging
import netrc
import os
import pickle
import re
import shutil
import signal
import socket
import struct
import sys
import time
import urllib.parse
import warnings
from pathlib import Path

SRC = Path(__file__).resolve().parents[2]   # the folder holding pabench/, for servers spawned
MODES = ("offline", "online", "disabled")
# Files above this size are logged as references (path + checksum), not copied.
COPY_LIMIT = 50 * 2**20


log = logging.getLogger("pabench.runtime.tracking")


def _warn(msg: str) -> None:
    log.warning("W&B: %s", msg)


def has_credentials() -> bool:
    if os.environ.get("WANDB_API_KEY"):
        return True
    try:
        host = base_url().split("://")[-1]
        return netrc.netrc().authenticators(host) is not None
    except (OSError, netrc.NetrcParseError):
        return False


def base_url() -> str:
    return os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai")


def reachable(url: str, timeout: float = 5.0) -> bool:
    """Whether a TCP connection to the W&B server opens: an unreachable server would otherwise
    hold every job for wandb's init timeout."""
    parsed = urllib.parse.urlparse(url)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        with socket.create_connection((parsed.hostname or "", port), timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


def artifact_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "output"


def resolve_mode(mode: str) -> str:
    """The mode a run can use: unknown modes disable tracking, online without credentials or
    without a reachable server falls back to offline (each with one warning)."""
    if mode not in MODES:
        _warn(f"unknown mode {mode!r}; tracking disabled")
        return "disabled"
    if mode == "online" and not has_credentials():
        _warn("mode 'online' but no credentials (set WANDB_API_KEY or run `wandb login`); "
              "logging offline instead, sync later with `wandb sync`")
        return "offline"
    if mode == "online" and not reachable(base_url()):
        _warn(f"mode 'online' but {base_url()} cannot be reached; logging offline instead, "
              "sync later with `wandb sync`")
        return "offline"
    return mode


def _keep_inside(root: Path, env) -> None:
    """Keep wandb's staging, cache and settings inside the run directory root."""
    for var, sub in (("WANDB_DATA_DIR", "data"), ("WANDB_CACHE_DIR", "cache"),
                     ("WANDB_CONFIG_DIR", "config"), ("WANDB_ARTIFACT_DIR", "artifacts")):
        env.setdefault(var, str(root / sub))


class Tracker:
    """A W&B run for one job, in this process.  Every method swallows W&B errors (with a
    warning)."""

    def __init__(self, *, mode: str = "offline", project: str = "pabench", entity: str | None = None,
                 directory: str = "data/wandb", group: str | None = None, job_type: str | None = None,
                 name: str | None = None, config: dict | None = None, tags: list[str] | None = None,
                 resolved: bool = False):
        """`resolved`: `mode` already went through `resolve_mode` (no second check)."""
        self.run = None
        self.mode = mode if resolved else resolve_mode(mode)
        if self.mode == "disabled":
            return
        try:
            root = Path(directory).resolve()
            root.mkdir(parents=True, exist_ok=True)
            _keep_inside(root, os.environ)
            import wandb
        except Exception as err:  # noqa: BLE001 - tracking must never fail a job
            _warn(f"could not start a run ({type(err).__name__}: {err}); continuing without W&B")
            return
        # wandb.init can fail transiently (it starts a service process): retry once, removing a
        # failed attempt's half-written run directory so that each job leaves one run or none.
        for attempt in (1, 2):
            before = set(root.glob("wandb/*run-*"))
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    self.run = wandb.init(
                        project=project, entity=entity, group=group, job_type=job_type,
                        name=name, config=config or {}, tags=tags, dir=str(root), mode=self.mode,
                        settings=wandb.Settings(console="off", silent=True,
                                                x_disable_stats=True, init_timeout=120),
                    )
                return
            except Exception as err:  # noqa: BLE001
                for partial in set(root.glob("wandb/*run-*")) - before:
                    shutil.rmtree(partial, ignore_errors=True)
                again = "retrying once" if attempt == 1 else "continuing without W&B"
                _warn(f"could not start a run ({type(err).__name__}: {err}); {again}")
                self.run = None

    @property
    def active(self) -> bool:
        return self.run is not None

    def _guard(self, what: str, fn, needs_wandb: bool = False) -> None:
        """Run fn (given the wandb module where `needs_wandb`), only with a run: without one
        (disabled, or W&B failed to start) wandb is never imported, so it need not be installed."""
        if self.run is None:
            return
        try:
            if needs_wandb:
                import wandb
                fn(wandb)
            else:
                fn()
        except Exception as err:  # noqa: BLE001
            _warn(f"{what} failed ({type(err).__name__}: {err})")

    def log(self, metrics: dict) -> None:
        """Log scalar metrics (also kept in the run summary)."""
        self._guard("log", lambda: self.run.log(dict(metrics)))

    def log_table(self, key: str, frame) -> None:
        self._guard(f"table {key}", lambda w: self.run.log({key: w.Table(dataframe=frame)}),
                    needs_wandb=True)

    def log_image(self, key: str, path) -> None:
        self._guard(f"image {key}", lambda w: self.run.log({key: w.Image(str(path))}),
                    needs_wandb=True)

    def log_artifact(self, name: str, kind: str, paths) -> None:
        self._guard(f"artifact {name}",
                    lambda w: self.run.log_artifact(_artifact(w, name, kind, paths)),
                    needs_wandb=True)

    def use_artifact(self, name: str, kind: str, paths) -> None:
        """Record files this job read as an input artifact (lineage).  W&B links it to the
        version a producing job logged when name and content match; offline runs cannot use
        artifacts (wandb refuses), so this only acts online."""
        if self.mode != "online":
            return
        self._guard(f"input artifact {name}",
                    lambda w: self.run.use_artifact(_artifact(w, name, kind, paths)),
                    needs_wandb=True)

    def finish(self, exit_code: int = 0) -> None:
        if self.run is None:
            return
        run_dir = None
        with contextlib.suppress(Exception):
            run_dir = Path(self.run.dir).parent
        self._guard("finish", lambda: self.run.finish(exit_code=exit_code))
        self.run = None
        if run_dir is not None:
            _wait_for_log(run_dir)


def _wait_for_log(run_dir: Path, timeout: float = 10.0) -> None:
    """Wait until the run's transaction log holds its exit record: wandb's service may still
    be writing it when finish() returns (seen in CI), and the job's W&B output should be complete
    when the job ends (before `wandb sync` or a reader looks at it)."""
    from wandb.proto import wandb_internal_pb2 as pb

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for path in run_dir.glob("*.wandb"):
            with contextlib.suppress(Exception):  # a log being written may end mid-record
                for payload in _records(path):
                    rec = pb.Record()
                    rec.ParseFromString(payload)
                    if rec.WhichOneof("record_type") == "exit":
                        return
        time.sleep(0.05)
    _warn(f"{run_dir}: the run log has no exit record after {timeout:.0f} s")


def _artifact(wandb, name: str, kind: str, paths):
    art = wandb.Artifact(artifact_name(name), type=kind)
    for path in map(Path, paths):
        if path.is_dir() or path.stat().st_size > COPY_LIMIT:
            art.add_reference(path.resolve().as_uri(), name=path.name)
        else:
            art.add_file(str(path), name=path.name)
    return art


# ---------------------------------------------------------------- the run server of a workflow
# Set to 0 (or off/false/no) to log every run in the job's own process.
SERVER_ENV = "PABENCH_WANDB_SERVER"
OWNER_ENV = "PABENCH_SNAKEMAKE_OWNER"  # "pid:start" of the job's Snakemake process (job server)
# A server with no job connected exits after this long (it also exits with its Snakemake process).
SERVER_IDLE_TIMEOUT = 60.0
# How long a job waits for its run to be complete: wandb.init's own timeout (120 s), a retry and
# the exit record's wait fit well within it.
FINISH_TIMEOUT = 600.0


def open_run(*, mode: str = "offline", owner=None, **kwargs):
    """The tracker of one workflow job: a `RemoteTracker` on the run server of the Snakemake
    process that started this job (see the module docstring), else an in-process `Tracker`.
    `owner`: the process the server belongs to (default: the nearest Snakemake ancestor);
    the other arguments are `Tracker`'s."""
    mode = resolve_mode(mode)
    if mode != "disabled" and _server_wanted():
        try:
            owner = owner or snakemake_ancestor()
            # the run directory root of offline runs: the server starts its wandb-core early
            root = str(Path(kwargs.get("directory", "data/wandb")).resolve()) \
                if mode == "offline" else ""
            sock = _connect(owner, root) if owner else None
        except Exception as err:  # noqa: BLE001 - never fail the job; log in-process instead
            log.info("W&B run server unavailable (%s: %s); logging in-process", type(err).__name__,
                     err)
            sock = None
        if sock is not None:
            return RemoteTracker(sock, mode, kwargs)
    return Tracker(mode=mode, resolved=True, **kwargs)


def start_server(config: dict | None = None, argv: list[str] | None = None) -> None:
    """Start the run server of this (Snakemake) process now, from the Snakefile, so that it has
    imported wandb while Snakemake plans the jobs; optional: without it the first job starts the
    server and waits for it (about 0.5 s).  Does nothing where jobs would log in-process (W&B
    disabled, PABENCH_WANDB_SERVER=0, not Linux) or Snakemake runs no job (`argv`, default
    sys.argv: -n, --lint, --report, --unlock, ...; one missed starts a server that exits with
    Snakemake) and never raises.  On a cluster the main process starts one that no job uses (it
    exits after SERVER_IDLE_TIMEOUT s); each cluster job's own Snakemake starts its own."""
    try:
        mode = ((config or {}).get("wandb") or {}).get("mode", "offline")
        if mode in ("offline", "online") and _server_wanted() and \
                sys.platform.startswith("linux") and not runs_no_job(sys.argv if argv is None
                                                                      else argv):
            root = str(Path((config or {}).get("wandb", {}).get("dir", "data/wandb")).resolve()) \
                if mode == "offline" else ""
            sock = _connect((os.getpid(), proc_stat(os.getpid())[1]), root)
            if sock is not None:
                sock.close()  # it listens already; it imports wandb in the background
    except Exception as err:  # noqa: BLE001
        log.info("W&B run server not started (%s: %s)", type(err).__name__, err)


# Snakemake options after which it runs no job.
_NO_JOBS = {"--dry-run", "--dryrun", "--lint", "--list", "--list-rules", "--list-target-rules",
            "--lt", "--summary", "--detailed-summary", "--dag", "--rulegraph", "--filegraph",
            "--d3dag", "--unlock", "--cleanup-metadata", "--cm", "--report", "--report-stylesheet",
            "--touch", "--delete-all-output", "--delete-temp-output", "--archive", "--containerize",
            "--export-cwl", "--print-compilation", "--generate-unit-tests", "--list-changes",
            "--lc", "--list-input-changes", "--li", "--list-params-changes", "--lp",
            "--list-code-changes", "--list-untracked", "--lu", "--conda-create-envs-only",
            "--conda-cleanup-envs", "--version", "--help"}


def runs_no_job(argv: list[str]) -> bool:
    for arg in argv[1:]:
        if arg.split("=", 1)[0] in _NO_JOBS:
            return True
        letters = arg[1:] if arg[1:].isalpha() else arg[1:2]  # -np, or -c2
        if arg.startswith("-") and not arg.startswith("--") and set(letters) & set("nlSDtvh"):
            return True  # -n, -pn, -l, -S, -D, -t, -v, -h
    return False


def _server_wanted() -> bool:
    return switched_on(SERVER_ENV)


def switched_on(variable: str, environ=None) -> bool:
    """Whether an on/off environment variable (default on) is not set to 0, off, false or no."""
    value = (os.environ if environ is None else environ).get(variable, "1")
    return value.strip().lower() not in ("0", "off", "false", "no")


class Channel:
    """Length-prefixed pickles over a Unix stream socket (same user only, see `socket_dir`)."""

    def __init__(self, sock: socket.socket):
        self.sock = sock

    def send(self, obj) -> None:
        data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        self.sock.sendall(struct.pack("!Q", len(data)))
        self.sock.sendall(data)

    def recv(self):
        (size,) = struct.unpack("!Q", self._exactly(8))
        return pickle.loads(self._exactly(size))

    def _exactly(self, size: int) -> bytes:
        buf = bytearray()
        while len(buf) < size:
            chunk = self.sock.recv(min(size - len(buf), 1 << 20))
            if not chunk:
                raise EOFError("connection closed")
            buf += chunk
        return bytes(buf)


class RemoteTracker:
    """`Tracker`'s interface for a run kept by the run server.  Calls are sent without waiting;
    `finish` waits until the run is complete and repeats the run's warnings in this job's log.
    Until the server's child has taken the run (its first byte, b"A"), the calls are also kept:
    should the server fail before, they are replayed on an in-process `Tracker`, so that the job
    still leaves its run.  Like `Tracker`, it never raises."""

    def __init__(self, sock: socket.socket, mode: str, kwargs: dict):
        self.mode = mode
        self._kwargs = kwargs
        self._chan = Channel(sock)
        self._open = True
        self._taken = False  # by the server's child
        self._kept: list[tuple] = []
        self._local: Tracker | None = None
        try:  # lend the run our stdout and stderr (see _serve_run)
            socket.send_fds(sock, [b"\0"], [fd for fd in (1, 2) if _is_open(fd)])
        except OSError as err:
            self._failed("start", err)
            return
        self._send("start", ("init", {"tracker": {"mode": mode, **kwargs},
                                      "env": dict(os.environ), "cwd": os.getcwd(),
                                      "argv": list(sys.argv)}))

    @property
    def active(self) -> bool:
        return self._open or (self._local is not None and self._local.active)

    def _taken_yet(self, timeout: float | None = 0.0) -> None:
        """Whether the server's child has the run: its one byte, if there (waiting `timeout`)."""
        if self._taken or not self._open:
            return
        self._chan.sock.settimeout(timeout)
        try:
            byte = self._chan.sock.recv(1)
        except (BlockingIOError, TimeoutError):
            return
        finally:
            self._chan.sock.settimeout(None)
        if byte != b"A":
            raise EOFError("the run server closed the connection")
        self._taken, self._kept = True, []

    def _send(self, what: str, message) -> None:
        if self._local is not None:
            _apply(self._local, message)
            return
        if not self._open:
            return
        if not self._taken:
            self._kept.append(message)
        try:
            self._taken_yet()
            self._chan.send(message)
        except Exception as err:  # noqa: BLE001
            self._failed(what, err)

    def _failed(self, what: str, err: Exception) -> None:
        with contextlib.suppress(Exception):
            self._taken_yet()  # the child may have taken the run just before it failed
        self._close()
        if self._taken:
            _warn(f"{what} failed (run server: {type(err).__name__}: {err}); the run is "
                  "incomplete")
            return
        log.info("W&B run server failed (%s: %s); logging in-process", type(err).__name__, err)
        self._local = Tracker(resolved=True, mode=self.mode, **self._kwargs)
        for message in self._kept:
            if message[0] != "init":
                _apply(self._local, message)
        self._kept = []

    def _close(self) -> None:
        self._open = False
        with contextlib.suppress(OSError):
            self._chan.sock.close()

    def log(self, metrics: dict) -> None:
        self._send("log", ("log", dict(metrics)))

    def log_table(self, key: str, frame) -> None:
        try:
            blob = pickle.dumps(frame, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as err:  # noqa: BLE001
            _warn(f"table {key} failed ({type(err).__name__}: {err})")
            return
        self._send(f"table {key}", ("table", key, blob))

    def log_image(self, key: str, path) -> None:
        # The bytes, not the path: the file may change before the server reads it.
        try:
            data = Path(path).read_bytes()
        except OSError as err:
            _warn(f"image {key} failed ({type(err).__name__}: {err})")
            return
        self._send(f"image {key}", ("image", key, Path(path).name, data))

    def log_artifact(self, name: str, kind: str, paths) -> None:
        self._send(f"artifact {name}", ("artifact", name, kind, [str(p) for p in paths]))

    def use_artifact(self, name: str, kind: str, paths) -> None:
        if self.mode != "online":  # as Tracker: offline runs cannot use artifacts
            return
        self._send(f"input artifact {name}", ("use_artifact", name, kind, [str(p) for p in paths]))

    def finish(self, exit_code: int = 0) -> None:
        self._send("finish", ("finish", exit_code))
        if self._open:
            try:
                self._taken_yet(timeout=FINISH_TIMEOUT)
                if not self._taken:
                    raise TimeoutError(f"no answer in {FINISH_TIMEOUT:.0f} s")
                self._chan.sock.settimeout(FINISH_TIMEOUT)
                _, messages = self._chan.recv()
            except Exception as err:  # noqa: BLE001
                self._failed("finish", err)
            else:
                for message in messages:  # the run's warnings, already worded by _warn
                    log.warning("%s", message)
                self._close()
        if self._local is not None:
            self._local.finish(exit_code)
            self._local = None


def _apply(tracker: Tracker, message: tuple) -> None:
    """Carry out one call a RemoteTracker sent (in the server's child, or replayed)."""
    import tempfile

    op, *args = message
    if op == "log":
        tracker.log(args[0])
    elif op == "table":
        try:
            frame = pickle.loads(args[1])
        except Exception as err:  # noqa: BLE001
            _warn(f"table {args[0]} failed ({type(err).__name__}: {err})")
        else:
            tracker.log_table(args[0], frame)
    elif op == "image":  # wandb.Image copies the file: a temporary one will do
        key, name, data = args
        with tempfile.TemporaryDirectory(prefix="pabench-wandb-") as tmp:
            Path(tmp, name).write_bytes(data)
            tracker.log_image(key, Path(tmp, name))
    elif op == "artifact":
        tracker.log_artifact(*args)
    elif op == "use_artifact":
        tracker.use_artifact(*args)
    elif op == "finish":
        tracker.finish(exit_code=args[0])


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False


def proc_stat(pid: int) -> tuple[int, str]:
    """Parent pid and start time (clock ticks since boot) of a process, from /proc."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2:].split()  # the name in parentheses may hold spaces
    return int(fields[1]), fields[19]


def snakemake_ancestor(levels: int = 6) -> tuple[int, str] | None:
    """(pid, start time) of the nearest ancestor process running Snakemake (Linux only): the
    process a run server belongs to.  None where there is none (a script run by hand).  A job run
    by the job server (pabench.runtime.jobserver, whose parent is not Snakemake) is told it by
    OWNER_ENV."""
    if not sys.platform.startswith("linux"):
        return None
    pid, _, start = os.environ.get(OWNER_ENV, "").partition(":")
    if pid.isdigit() and start:
        return int(pid), start
    pid = os.getppid()
    for _ in range(levels):
        if pid <= 1:
            return None
        try:
            ppid, start = proc_stat(pid)
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:3]
        except (OSError, ValueError, IndexError):
            return None
        if any(b"snakemake" in os.path.basename(arg) for arg in argv):
            return pid, start
        pid = ppid
    return None


def alive(owner: tuple[int, str]) -> bool:
    try:
        return proc_stat(owner[0])[1] == owner[1]  # the same process, not a reused pid
    except (OSError, ValueError, IndexError):
        return False


def socket_dir() -> Path:
    """A directory only this user can enter (so only this user can reach a server)."""
    base = Path(os.environ.get("TMPDIR") or "/tmp")
    if len(str(base)) > 60:  # a Unix socket path holds at most 107 bytes
        base = Path("/tmp")
    path = base / f"pabench-wandb-{os.getuid()}"
    path.mkdir(mode=0o700, exist_ok=True)
    st = path.lstat()
    if st.st_uid != os.getuid() or st.st_mode & 0o077 or not path.is_dir() or path.is_symlink():
        raise PermissionError(f"{path} is not a private directory")
    return path


def _code_stamp() -> str:
    """This file's version as imported: a job and its server must run the same code (a file
    edited during a workflow run gets new servers for the jobs that import the new version)."""
    with contextlib.suppress(OSError):
        st = Path(__file__).stat()
        return f"{Path(__file__).resolve()}:{st.st_mtime_ns}:{st.st_size}"
    return "unknown"


_STAMP = _code_stamp()


def _server_address(owner: tuple[int, str]) -> Path:
    """The socket of the server for `owner`, this interpreter and this version of this file."""
    import hashlib

    key = f"{owner[0]}:{owner[1]}:{sys.executable}:{_STAMP}"
    return socket_dir() / f"{hashlib.sha256(key.encode()).hexdigest()[:20]}.sock"


def try_connect(path: Path) -> socket.socket | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(path))
        return sock
    except OSError:
        sock.close()
        return None


def _connect(owner: tuple[int, str], root: str = "",
             start_timeout: float = 20.0) -> socket.socket | None:
    """A connection to the owner's run server, starting the server if there is none (`root`:
    the run directory root of its first offline run, for its shared wandb-core: `_Core`)."""
    import fcntl

    path = _server_address(owner)
    sock = try_connect(path)
    if sock is not None:
        return sock
    if _code_stamp() != _STAMP:  # a server would run other code than this job
        return None
    with open(path.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one job starts the server, the others wait for it
        sock = try_connect(path)
        if sock is not None:
            return sock
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # a server that died without cleaning up
        proc = _spawn_server(path, owner, root)
        deadline = time.monotonic() + start_timeout
        while time.monotonic() < deadline:
            sock = try_connect(path)  # it listens before it imports wandb
            if sock is not None:
                return sock
            if proc.poll() is not None:  # it exits once it listens (see serve), or fails
                sock = try_connect(path)
                if sock is not None:
                    return sock
                break
            time.sleep(0.005)
    log.info("W&B run server did not start (see %s); logging in-process",
             path.with_suffix(".log"))
    return None


def _spawn_server(path: Path, owner: tuple[int, str], root: str = ""):
    return spawn_detached(path, "pabench.runtime.tracking",
                          [str(owner[0]), owner[1], root, os.getcwd(), _STAMP])


def spawn_detached(path: Path, module: str, args: list[str]):
    """Start `module`'s `serve()` for the socket `path` (argv: path, then `args`) with this very
    version of pabench, in a session of its own (it outlives the job, not its owner), logging to
    `path` with the suffix .log.  Used by the W&B run server and the job server."""
    import subprocess

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(SRC), *filter(None, [os.environ.get("PYTHONPATH")])])}
    with open(path.with_suffix(".log"), "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-c", f"from {module} import serve; serve()", str(path), *args],
            env=env, cwd=path.parent, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
            close_fds=True, start_new_session=True)


def serve(argv=None) -> None:
    """The run server (started by `_spawn_server`): listen, import wandb once, then fork one
    child per connection, which runs that job's W&B run (`_serve_run`).  Exits when its owner
    exits or after `SERVER_IDLE_TIMEOUT` s without a job; no thread runs before a fork."""
    import select

    path, pid, start, root, cwd, stamp = (argv or sys.argv[1:7])
    if stamp != _STAMP:  # this file changed since the job imported it: let it log in-process
        sys.exit(f"pabench: {__file__} changed since the job that started this server read it")
    owner = (int(pid), start)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    inode = os.stat(path).st_ino
    listener.listen(128)  # jobs may connect (and send) while wandb is imported
    if os.fork():  # leave the job's process tree (Snakemake's benchmark of the job measures it)
        os._exit(0)
    children: set[int] = set()
    cores: dict[str, _Core] = {}  # run directory root -> its shared wandb-core
    scout = None

    def accept() -> None:
        conn, _ = listener.accept()
        fds = []
        try:
            conn.setblocking(True)
            creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                    struct.calcsize("3i"))
            if struct.unpack("3i", creds)[1] != os.getuid():
                return
            conn.settimeout(30)  # a job sends these right after connecting
            _, fds, _, _ = socket.recv_fds(conn, 1, 2)
            chan = Channel(conn)
            _, spec = chan.recv()
            conn.settimeout(None)
            token = _core_token(cores, children, spec)
            child = os.fork()
            if child == 0:
                listener.close()
                _serve_run(chan, fds, spec, token)  # never returns
            children.add(child)
        except EOFError:
            pass  # start_server's connection, or a job gone already
        except Exception:  # noqa: BLE001 - that job logs its run in-process (RemoteTracker)
            import traceback

            traceback.print_exc()  # to the server's log
        finally:
            for fd in fds:
                os.close(fd)
            conn.close()

    def reap(block: bool = False) -> None:
        for child in list(children):
            try:
                if os.waitpid(child, 0 if block else os.WNOHANG)[0]:
                    children.discard(child)
            except ChildProcessError:
                children.discard(child)

    try:
        with contextlib.suppress(Exception):
            import wandb  # noqa: F401 - the largest part, needed by all that follows
        if root:  # starts while the rest is imported
            with contextlib.suppress(Exception):
                cores[root] = _Core(root, dict(os.environ), cwd, children)
        scout = _warm_up(children)
        last_busy = time.monotonic()
        while True:
            waiting = [listener] + ([scout] if scout is not None else [])
            ready, _, _ = select.select(waiting, [], [], 0.5)
            if scout is not None and scout in ready:  # a job never waits for this
                ready.remove(scout)
                _learn_imports(_read_all(scout))
                os.close(scout)
                scout = None
            reap()
            if ready:
                accept()
            if ready or children:
                last_busy = time.monotonic()
            elif not alive(owner) or time.monotonic() - last_busy > SERVER_IDLE_TIMEOUT:
                break
    finally:
        # Stop new connections (a job then starts a new server), then serve those already queued.
        with contextlib.suppress(OSError):
            if os.stat(path).st_ino == inode:
                os.unlink(path)
        listener.setblocking(False)
        with contextlib.suppress(OSError):
            while True:
                accept()
        listener.close()
        reap(block=True)  # the runs still open, then their shared wandb-core
        for core in cores.values():
            core.stop()
        if not alive(owner):  # nobody will use this server's address again
            for suffix in (".lock", ".log"):
                with contextlib.suppress(OSError):
                    leftover = Path(path).with_suffix(suffix)
                    if suffix == ".lock" or not leftover.stat().st_size:
                        leftover.unlink()


def _warm_up(children: set[int]) -> int | None:
    """Import what every run needs, once, in the server (the children inherit it), and what
    wandb imports lazily on the way of a run (metrics, table, image, artifact): the list a scout
    run made before (`_module_list`), else a new scout's (read end of its pipe, returned)."""
    for name in ("pandas", "wandb.sdk.wandb_run", "wandb.sdk.launch.inputs.internal",
                 "wandb.proto.wandb_internal_pb2", "wandb.sdk.artifacts.artifact"):
        with contextlib.suppress(Exception):
            importlib.import_module(name)
    # Every run records the installed packages (wandb's requirements.txt); list them once.
    with contextlib.suppress(Exception):
        import wandb.util

        packages = list(wandb.util.working_set())
        wandb.util.working_set = lambda: iter(packages)
    with contextlib.suppress(Exception):
        _import_all(_module_list().read_text().split())
        return None
    with contextlib.suppress(Exception):
        pid, read = _scout()
        children.add(pid)
        return read
    return None


def _module_list() -> Path:
    """Where the modules a scout run imported are kept, for this interpreter and wandb."""
    import hashlib

    import wandb

    key = f"{sys.executable}:{sys.version}:{wandb.__version__}:{_STAMP}"
    return socket_dir() / f"modules-{hashlib.sha256(key.encode()).hexdigest()[:16]}.txt"


def _learn_imports(names: list[str]) -> None:
    _import_all(names)
    if names:
        with contextlib.suppress(Exception):
            target = _module_list()
            partial = target.with_suffix(f".{os.getpid()}.tmp")
            partial.write_text("\n".join(names))
            partial.replace(target)
            for old in target.parent.glob("modules-*.txt"):  # other versions' lists, a week on
                if time.time() - old.stat().st_mtime > 7 * 86400:
                    old.unlink()


# A 1x1 PNG: the scout's image.
_PNG = bytes.fromhex("89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
                     "0000000b49444154789c63f80f040009fb03fdfb5e6b2b0000000049454e44ae426082")


def _scout() -> tuple[int, int]:
    """Fork a child that makes one throwaway offline run (metrics, table, image, artifact) and
    reports the modules wandb imported on the way; (pid, read end of a pipe)."""
    import tempfile

    read, write = os.pipe()
    pid = os.fork()
    if pid:
        os.close(write)
        return pid, read
    code, private = 0, None
    try:
        os.close(read)
        _silence()
        private = _private_tempdir()
        before = set(sys.modules)
        with tempfile.TemporaryDirectory(prefix="pabench-wandb-scout-") as tmp:
            os.chdir(tmp)
            Path("scout.png").write_bytes(_PNG)
            tracker = Tracker(mode="offline", resolved=True, directory=tmp, name="scout")
            tracker.log({"x": 1.0})
            with contextlib.suppress(ImportError):
                import pandas

                tracker.log_table("table", pandas.DataFrame({"a": ["1"]}))
            tracker.log_image("image", "scout.png")
            tracker.log_artifact("scout", "file", ["scout.png"])
            tracker.finish()
        data = "\n".join(sorted(set(sys.modules) - before)).encode()
        while data:
            data = data[os.write(write, data):]
    except BaseException:  # noqa: BLE001 - only a missed speed-up
        code = 1
    finally:
        _end_child(code, private)


def _read_all(fd: int) -> list[str]:
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    return b"".join(chunks).decode().split()


def _import_all(names) -> None:
    import threading

    for name in names:
        if name.startswith(("__main__", "pabench")):
            continue
        with contextlib.suppress(BaseException):
            importlib.import_module(name)
    if threading.active_count() > 1:  # not seen: imports start no threads in wandb 0.31
        print(f"pabench: threads in the W&B run server after warm-up: {threading.enumerate()}",
              file=sys.stderr, flush=True)


def _private_tempdir() -> str:
    """In a forked child that ends with os._exit (no finalizers): send wandb's temporary
    files (e.g. a logged table's JSON) to a directory `_end_child` removes."""
    import tempfile

    tempfile.tempdir = tempfile.mkdtemp(prefix="pabench-wandb-")
    return tempfile.tempdir


def _end_child(code: int, private: str | None) -> None:
    with contextlib.suppress(BaseException):
        if "wandb" in sys.modules:
            sys.modules["wandb"].teardown()
    if private:
        shutil.rmtree(private, ignore_errors=True)
    os._exit(code)


def _silence() -> None:
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.close(null)


class _Core:
    """A wandb-core shared by the offline runs under one run directory root (each run would
    otherwise start its own: about 0.25 s), started as `wandb beta core start` starts one, by a
    forked helper (so the server goes on importing meanwhile), with the environment a job's own
    would have had.  Where that fails (other wandb internals), `token` is None and every run
    starts its own, as before.  Stopped with the server; should the server be killed, it exits
    after 10 idle minutes."""

    def __init__(self, root: str, env: dict, cwd: str, children: set[int]):
        self.pid = 0
        self._token: str | None = None
        read, write = os.pipe()
        helper = os.fork()
        if helper:
            os.close(write)
            self._pending = read
            children.add(helper)
            return
        code = 0
        try:
            os.close(read)
            _silence()
            from wandb.sdk.lib.service import service_process
            from wandb.sdk.wandb_settings import Settings

            os.environ.clear()
            os.environ.update(env)
            _keep_inside(Path(root), os.environ)
            os.chdir(cwd)
            proc = service_process.start_detached(Settings(), idle_timeout="10m")
            os.write(write, f"{proc._process.pid} {proc.token.env_value}".encode())
        except BaseException:  # noqa: BLE001
            code = 1
        finally:
            os._exit(code)

    @property
    def token(self) -> str | None:
        """The WANDB_SERVICE value of the core, or None (waits for the helper once)."""
        if self._pending is not None:
            with contextlib.suppress(Exception):
                pid, token = _read_all(self._pending)
                self.pid, self._token = int(pid), token
            os.close(self._pending)
            self._pending = None
        if self._token and not _pid_alive(self.pid):
            self._token = None
        return self._token

    def stop(self) -> None:
        if self.token:
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGTERM)


def _pid_alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text()
        return state[state.rindex(")") + 2] != "Z"
    except (OSError, ValueError, IndexError):
        return False


def _core_token(cores: dict, children: set[int], spec: dict) -> str | None:
    """The shared wandb-core of a job's offline run (None: online, or the job's environment
    names its own WANDB_SERVICE, or no core could be started)."""
    if spec["tracker"].get("mode") != "offline" or spec["env"].get("WANDB_SERVICE"):
        return None
    try:
        root = str(Path(spec["cwd"], spec["tracker"].get("directory", "data/wandb")).resolve())
        core = cores.get(root)
        if core is None or (core._pending is None and core.pid and core.token is None):
            # none yet, or it ran and died: start one (one that failed to start is not retried)
            core = cores[root] = _Core(root, spec["env"], spec["cwd"], children)
        return core.token
    except Exception:  # noqa: BLE001
        return None


class _Collect(logging.Handler):
    def __init__(self, messages: list):
        super().__init__(logging.WARNING)
        self.messages = messages

    def emit(self, record) -> None:
        self.messages.append(record.getMessage())


def _serve_run(chan: Channel, fds: list[int], spec: dict, core_token: str | None) -> None:
    """In a forked child of the server: one job's run, from its "init" to its "finish"."""
    code, private = 0, None
    messages: list[str] = []
    try:
        private = _private_tempdir()
        with contextlib.suppress(OSError):  # a job gone already: its run is marked failed
            chan.sock.sendall(b"A")  # the run is ours now (see RemoteTracker)
        # The job's stdout and stderr: wandb's own messages go where they went in-process.
        sys.stdout.flush()
        sys.stderr.flush()
        for target, fd in zip((1, 2), fds):
            os.dup2(fd, target)
        os.chdir(spec["cwd"])  # the job's directory, environment and command line
        os.environ.clear()
        os.environ.update(spec["env"])
        if core_token:
            os.environ["WANDB_SERVICE"] = core_token
        sys.argv = spec["argv"]
        collect = logging.getLogger("pabench")  # its warnings go to the job's log, by finish
        collect.addHandler(_Collect(messages))
        collect.propagate = False
        tracker = Tracker(resolved=True, **spec["tracker"])
        while True:
            try:
                message = chan.recv()
            except (EOFError, OSError):
                _warn("the job ended without finishing its run; marked failed")
                tracker.finish(exit_code=1)
                break
            _apply(tracker, message)
            if message[0] == "finish":
                _detach_output()
                chan.send(("done", messages))
                break
    except BaseException:  # noqa: BLE001 - shown on the job's stderr
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        with contextlib.suppress(BaseException):
            chan.sock.close()
        with contextlib.suppress(BaseException):
            _detach_output()
        _end_child(code, private)


def _detach_output() -> None:
    """Give the job's stdout and stderr back before the job ends (its reader waits for them)."""
    sys.stdout.flush()
    sys.stderr.flush()
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.close(null)


# ---------------------------------------------------------------- reading offline runs back
_BLOCK = 32768
_HEADER = 7  # checksum (4), length (2), type (1)


def _records(path: Path):
    """Raw protobuf payloads of a .wandb file (W&B's variant of the LevelDB log format)."""
    data = path.read_bytes()
    if data[:4] != b":W&B":
        raise ValueError(f"{path}: not a W&B transaction log")
    pos, pending = 7, b""
    while pos + _HEADER <= len(data):
        left = _BLOCK - pos % _BLOCK
        if left < _HEADER:
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + _HEADER])
        pos += _HEADER
        chunk = data[pos:pos + length]
        pos += length
        if kind == 0 and length == 0:  # zero padding
            continue
        if kind == 1:
            yield chunk
        elif kind == 2:
            pending = chunk
        elif kind == 3:
            pending += chunk
        elif kind == 4:
            yield pending + chunk
            pending = b""


def read_offline_run(run_dir) -> dict:
    """What an offline run directory holds: run info, config, logged metrics (last value per
    key), media keys, and artifacts.  Used by the tests and `pabench wandb-runs`."""
    from wandb.proto import wandb_internal_pb2 as pb

    run_dir = Path(run_dir)
    files = list(run_dir.glob("*.wandb"))
    if not files:
        raise FileNotFoundError(f"{run_dir}: no .wandb file")
    out = {"dir": str(run_dir), "config": {}, "metrics": {}, "media": {}, "artifacts": []}
    for payload in _records(files[0]):
        rec = pb.Record()
        rec.ParseFromString(payload)
        kind = rec.WhichOneof("record_type")
        if kind == "run":
            out.update(project=rec.run.project, group=rec.run.run_group, job_type=rec.run.job_type,
                       name=rec.run.display_name, tags=list(rec.run.tags))
            for item in rec.run.config.update:
                out["config"][item.key] = json.loads(item.value_json)
        elif kind == "config":
            for item in rec.config.update:
                out["config"][item.key] = json.loads(item.value_json)
        elif kind == "history":
            for item in rec.history.item:
                path = list(item.nested_key) or [item.key]
                value = json.loads(item.value_json)
                if len(path) > 1:  # a logged object (table, image) arrives as its fields
                    if path[-1] == "_type":
                        out["media"][path[0]] = value
                elif not path[0].startswith("_"):
                    out["metrics"][path[0]] = value
        elif kind == "artifact":
            out["artifacts"].append({"name": rec.artifact.name, "type": rec.artifact.type,
                                     "files": [m.path for m in rec.artifact.manifest.contents]})
    if "name" not in out:
        raise ValueError(f"{files[0]}: no run record (the run was never started or its log is "
                         "truncated)")
    out["config"].pop("_wandb", None)  # wandb's own bookkeeping
    out["config"] = {k: (v["value"] if isinstance(v, dict) and set(v) == {"value"} else v)
                     for k, v in out["config"].items()}
    return out


def offline_runs(directory) -> list[dict]:
    """Every offline run under a W&B directory, oldest first."""
    root = Path(directory) / "wandb"
    return [read_offline_run(d) for d in sorted(root.glob("offline-run-*"))]


def local_runs(directory) -> list[dict]:
    """Every run (offline or online) with a readable local log under a W&B directory; a run
    directory without one (a crashed start) is skipped with a warning."""
    runs = []
    for d in sorted((Path(directory) / "wandb").glob("*run-*")):
        if not d.is_dir() or d.is_symlink():  # wandb's latest-run link
            continue
        try:
            runs.append(read_offline_run(d))
        except (OSError, ValueError) as err:
            _warn(f"skipping {d} ({err})")
    return runs
