import http.server
import os
import re
import shutil
import subprocess
import threading
import time
import urllib.parse
from pathlib import Path

import pytest

from pabench.tools.campaign import TEST, prepare, snakemake_cmd

REPO = Path(__file__).resolve().parents[1]
SECRET = "pabench-fake-api-key-0123456789abcdef"


def scale_config() -> dict:
    """The test scale's merged configuration."""
    from pabench.core import config

    return config.load([REPO / "config.yaml", REPO / TEST[1]])


def run_snakemake(workdir, *args, env=None, check=True):
    proc = subprocess.run(snakemake_cmd(*args), cwd=workdir, capture_output=True, text=True,
                          env={**os.environ, **(env or {})})
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc


def planned(root, *args) -> list[tuple[str, str]]:
    """(rule, wildcards) of every job a dry run plans, rule `all` left out."""
    return planned_in(run_snakemake(root, "-n", *args).stdout)


def planned_in(out: str) -> list[tuple[str, str]]:
    """(rule, wildcards) of every job in a dry run's output, rule `all` left out."""
    return [(rule, _field(block, "wildcards")) for rule, block in _job_blocks(out)]


def planned_outputs(out: str) -> list[tuple[str, list[str]]]:
    """(rule, output files) of every job in a dry run's output, rule `all` left out."""
    return [(rule, _field(block, "output").split(", ")) for rule, block in _job_blocks(out)]


def _job_blocks(out: str):
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", out):
        m = re.match(r"(?:local)?rule (\w+):", block)
        if m and m.group(1) != "all":
            yield m.group(1), block


def _field(block: str, name: str) -> str:
    m = re.search(rf"^\s+{name}: (.*)$", block, flags=re.M)
    return m.group(1) if m else ""


def pytest_configure(config):
    """pytest-xdist's workers share the cores: each gets its share of them as torch threads.
    Torch's default (every core per worker) oversubscribes them, and OpenMP threads spinning at
    each small operation's barrier for a core another worker holds slow the unit tests several
    times over (pabench.core.threads explains the effect)."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if workers:
        import torch

        torch.set_num_threads(max(1, len(os.sched_getaffinity(0)) // workers))


def pytest_itemcollected(item):
    """For pytest-xdist's --dist loadgroup (`make test`): the tests that read the session's
    test-scale run (`ran`) on one worker, so that the run is made once, and the other tests of a
    file together, so that its module fixtures are built once.  (Marked as each item is collected:
    xdist reads the groups in its own pytest_collection_modifyitems.)"""
    group = "ran" if "ran" in item.fixturenames else item.nodeid.split("::")[0]
    item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture
def workdir(tmp_path):
    """A copy of the workflow in a fresh directory (outputs never touch the repository)."""
    return prepare(REPO, tmp_path)


@pytest.fixture(scope="session")
def ran(tmp_path_factory):
    """One test-scale run of the default target, with a fake W&B key in the environment.
    Shared by every test that reads a finished run; tests that change files copy it first."""
    root = prepare(REPO, tmp_path_factory.mktemp("wf"))
    proc = run_snakemake(root, "--cores", "2", *TEST, env={"WANDB_API_KEY": SECRET})
    return root, proc


@pytest.fixture
def finished(ran, tmp_path):
    """A copy of the finished test-scale run (timestamps kept, W&B runs left out), free to change."""
    root, _ = ran
    dst = tmp_path / "run"
    shutil.copytree(root, dst, symlinks=True, ignore=shutil.ignore_patterns("wandb"))
    return dst


@pytest.fixture(scope="module")
def one_thread():
    """Small tensors: one thread is faster than two threads fighting other jobs for the cores.
    A module asks for it with `pytestmark = pytest.mark.usefixtures("one_thread")`."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# ------------------------------------------------------------------ a local file server

class FileServer(http.server.ThreadingHTTPServer):
    """Serves `files` ({URL path: bytes}, the path with or without its query; any other path:
    `body`) as `mode` says: ok (honours Range requests), norange (always the whole file),
    truncate (promises the whole file, sends half and hangs up), corrupt (other bytes: reversed),
    error (HTTP `status`: 500, 404, ...), slow (the whole file in two parts 0.3 s apart).  The
    mode applies to the paths in `targets` (None: every path); the others are served ok.
    `requests` lists the Range header of every request, `paths` its path."""

    def __init__(self):
        super().__init__(("127.0.0.1", 0), _FileHandler)
        self.files, self.body, self.mode, self.status, self.targets = {}, b"", "ok", 500, None
        self.requests, self.paths = [], []

    def url(self, path: str = "") -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/{path.lstrip('/')}"


class _FileHandler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):  # noqa: N802 - the http.server hook's name
        srv = self.server
        srv.requests.append(self.headers.get("Range"))
        srv.paths.append(self.path)
        body = srv.files.get(self.path, srv.files.get(urllib.parse.urlsplit(self.path).path,
                                                      srv.body))
        mode = srv.mode if srv.targets is None or self.path in srv.targets else "ok"
        if mode == "error":
            self.send_error(srv.status, "disk on fire")
            return
        if mode == "corrupt":
            body = body[::-1]
        start = int(self.headers["Range"][6:-1]) if self.headers.get("Range") else 0
        if mode == "ok" and start:
            if start >= len(body):
                self.send_error(416)
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
            body = body[start:]
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if mode == "truncate":
            body = body[:len(body) // 2]
        if mode == "slow":
            self.wfile.write(body[:10])
            self.wfile.flush()
            time.sleep(0.3)
            body = body[10:]
        self.wfile.write(body)


@pytest.fixture
def file_server():
    """A FileServer on a free local port, for the downloaders' tests (no internet needed)."""
    srv = FileServer()
    thread = threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def leftovers(folder) -> list[str]:
    """Every file under `folder` (relative paths), the downloads' lock files (empty, kept for
    the next job) aside."""
    folder = Path(folder)
    if not folder.exists():
        return []
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*")
                  if p.is_file() and not p.name.endswith(".lock"))
