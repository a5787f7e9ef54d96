"""Weights & Biases tracking: one run per workflow job, never able to fail the job.

Modes: "offline" (default: run directories under the configured dir, no account needed; sync
later with `wandb sync`), "online" (needs WANDB_API_KEY in the environment or a `wandb login`;
without credentials it falls back to offline with one warning) and "disabled".
The API key is only ever read by wandb itself from the environment or ~/.netrc.
"""
from __future__ import annotations

import contextlib
import json
import logging
import netrc
import os
import re
import shutil
import socket
import struct
import time
import urllib.parse
import warnings
from pathlib import Path

MODES = ("offline", "online", "disabled")
# Files above this size are logged as references (path + checksum), not copied.
COPY_LIMIT = 50 * 2**20


log = logging.getLogger("pabench.tracking")


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


class Tracker:
    """A W&B run for one job.  Every method swallows W&B errors (with a warning)."""

    def __init__(self, *, mode: str = "offline", project: str = "pabench", entity: str | None = None,
                 directory: str = "data/wandb", group: str | None = None, job_type: str | None = None,
                 name: str | None = None, config: dict | None = None, tags: list[str] | None = None):
        self.run = None
        self.mode = mode
        if mode not in MODES:
            _warn(f"unknown mode {mode!r}; tracking disabled")
            self.mode = "disabled"
        if self.mode == "online" and not has_credentials():
            _warn("mode 'online' but no credentials (set WANDB_API_KEY or run `wandb login`); "
                  "logging offline instead, sync later with `wandb sync`")
            self.mode = "offline"
        if self.mode == "online" and not reachable(base_url()):
            _warn(f"mode 'online' but {base_url()} cannot be reached; logging offline instead, "
                  "sync later with `wandb sync`")
            self.mode = "offline"
        if self.mode == "disabled":
            return
        try:
            root = Path(directory).resolve()
            root.mkdir(parents=True, exist_ok=True)
            # Keep wandb's staging, cache and settings inside the run directory root.
            for var, sub in (("WANDB_DATA_DIR", "data"), ("WANDB_CACHE_DIR", "cache"),
                             ("WANDB_CONFIG_DIR", "config"), ("WANDB_ARTIFACT_DIR", "artifacts")):
                os.environ.setdefault(var, str(root / sub))
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

    def _guard(self, what: str, fn) -> None:
        if self.run is None:
            return
        try:
            fn()
        except Exception as err:  # noqa: BLE001
            _warn(f"{what} failed ({type(err).__name__}: {err})")

    def log(self, metrics: dict) -> None:
        """Log scalar metrics (also kept in the run summary)."""
        self._guard("log", lambda: self.run.log(dict(metrics)))

    def log_table(self, key: str, frame) -> None:
        import wandb
        self._guard(f"table {key}", lambda: self.run.log({key: wandb.Table(dataframe=frame)}))

    def log_image(self, key: str, path) -> None:
        import wandb
        self._guard(f"image {key}", lambda: self.run.log({key: wandb.Image(str(path))}))

    def log_artifact(self, name: str, kind: str, paths) -> None:
        import wandb

        def log():
            self.run.log_artifact(_artifact(wandb, name, kind, paths))
        self._guard(f"artifact {name}", log)

    def use_artifact(self, name: str, kind: str, paths) -> None:
        """Record files this job read as an input artifact (lineage).  W&B links it to the
        version a producing job logged when name and content match; offline runs cannot use
        artifacts (wandb refuses), so this only acts online."""
        if self.mode != "online":
            return
        import wandb
        self._guard(f"input artifact {name}",
                    lambda: self.run.use_artifact(_artifact(wandb, name, kind, paths)))

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
