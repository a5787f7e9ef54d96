"""Downloads: every file pabench fetches from the internet comes through `download_file`.

- The bytes go to `<file>.part` first.  An interrupted download keeps them there and the next
  call resumes from where it stopped (an HTTP range request); a server that ignores the range
  sends everything again, which replaces the part.
- A file is kept (renamed from its part) only once its checksum matches: an MD5, a SHA-256 (or
  its leading digits, as torch.hub's file names carry), or the git blob SHA-1 the Hugging Face
  hub lists for files outside git LFS.  A mismatch deletes the part, so the next call starts
  afresh.  Where a publisher gives no checksum, a format check (`check`) must pass instead and
  the file's SHA-256 is logged, so that it can be pinned.
- Jobs fetching the same file wait for each other (a lock file beside it) and download it once.
- Every failure names the URL.  `file://` URLs work the same way (local mirrors, tests).

`download_archive` unpacks a verified tar archive into a folder that appears only once complete;
`hub_model` fetches a Hugging Face hub model at a pinned revision, file by file, checked against
the hub's listed SHA-256 / git blob SHA-1.
"""
from __future__ import annotations

import fcntl
import hashlib
import http.client
import json
import logging
import os
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import zlib
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

from pabench.core.io import file_digest

log = logging.getLogger("pabench.download")

TIMEOUT_S = 60
HF_ENDPOINT = "https://huggingface.co"   # the HF_ENDPOINT environment variable overrides it
HUB_ROOT = "data/hub"


# ---------------------------------------------------------------------------------------------
# Checksums

def _algorithm(checksum, name) -> tuple[str, str]:
    """(hash, expected hex digits) of a checksum: an MD5 (32 hex digits), a SHA-256 (64),
    "sha256:" and at least 8 leading hex digits of a SHA-256 (the prefix torch.hub's file names
    carry), or "git-sha1:" and the 40 hex digits of a git blob hash."""
    text = (checksum or "").lower()
    algo = {32: "md5", 64: "sha256"}.get(len(text))
    if text.startswith("sha256:"):
        algo, text = ("sha256" if 8 <= len(text) - 7 <= 64 else None), text[7:]
    elif text.startswith("git-sha1:"):
        algo, text = ("git-sha1" if len(text) == 49 else None), text[9:]
    if algo is None or any(c not in "0123456789abcdef" for c in text):
        raise ValueError(f"{name}: a checksum is required to trust a download: an MD5 (32 hex "
                         f"digits), a SHA-256 (64 hex digits), 'sha256:' and at least 8 of its "
                         f"leading digits, or 'git-sha1:' and a git blob hash, got {checksum!r}")
    return algo, text


def _digest(path: Path, algo: str) -> str:
    if algo != "git-sha1":
        return file_digest(path, algo)
    h = hashlib.sha1(f"blob {path.stat().st_size}\0".encode())   # git's object header
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def verify_file(path: Path, checksum: str, name, advice: str) -> str:
    """The file's full digest, once it matches `checksum` (a ValueError with `advice` if not)."""
    algo, expected = _algorithm(checksum, name)
    got = _digest(path, algo)
    if not got.startswith(expected):
        raise ValueError(f"{name}: checksum mismatch ({algo} {got}, expected {expected}); "
                         f"{advice}")
    return got


# ---------------------------------------------------------------------------------------------
# Files

@contextmanager
def _locked(path: Path):
    """An exclusive lock on `.<name>.lock` beside `path`: jobs that download or unpack the same
    file wait for each other instead of writing it twice."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.parent / f".{path.name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)   # released when the file closes
        yield


def _open(url: str, have: int = 0):
    """The server's response to a GET of `url` from byte `have` on (a range request when
    `have` > 0).  HTTP errors are raised."""
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme not in ("http", "https"):
        raise ValueError(f"unsupported URL {url!r} (use http, https or file)")
    headers = {"User-Agent": "pabench", **({"Range": f"bytes={have}-"} if have else {})}
    return urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=TIMEOUT_S)


def _fetch(url: str, part: Path) -> None:
    """Append the bytes of `url` that `part` lacks: from its current size on (an HTTP range
    request; a server that ignores it sends everything, which replaces `part`)."""
    have = part.stat().st_size if part.is_file() else 0
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme == "file":
        source = Path(urllib.request.url2pathname(parsed.path))
        if not source.is_file():
            raise FileNotFoundError(f"{source}: no such file ({url})")
        with open(source, "rb") as src, open(part, "ab" if have else "wb") as out:
            src.seek(have)
            shutil.copyfileobj(src, out, 1 << 20)
        return
    try:
        response = _open(url, have)
    except urllib.error.HTTPError as err:
        if err.code == 416 and have:   # nothing after what `part` holds: it is checked as it is
            return
        raise
    with response:
        resumed = response.status == 206
        if resumed and not response.headers.get("Content-Range", "").startswith(f"bytes {have}-"):
            raise ValueError(f"{url}: the server answered the range request from byte {have} "
                             f"with {response.headers.get('Content-Range')!r}")
        expected = response.headers.get("Content-Length")
        got = 0
        with open(part, "ab" if resumed else "wb") as out:
            for block in iter(lambda: response.read(1 << 20), b""):
                out.write(block)
                got += len(block)
        if expected is not None and got < int(expected):   # http.client does not raise here
            raise http.client.IncompleteRead(b"", int(expected) - got)


def download_file(url: str, dest, checksum: str | None,
                  check: Callable[[Path], object] | None = None) -> Path:
    """`url` saved as `dest` once its MD5 / SHA-256 / git blob SHA-1 matches `checksum` and
    `check(path)` (a format check raising ValueError, if given) passes.  A file already at
    `dest` is checked against `checksum` instead of fetched.  An interrupted download keeps its
    bytes in `dest`.part and the next call resumes it; a mismatch deletes them, so nothing wrong
    is kept.  `checksum=None` (the publisher gives none) needs `check`; the file's SHA-256 is
    logged."""
    dest = Path(dest)
    if checksum is None and check is None:
        raise ValueError(f"{dest}: a download without a checksum needs a format check")
    if dest.is_file():   # without a checksum, as it is (it passed `check` when it was kept)
        if checksum is not None:
            verify_file(dest, checksum, dest, "delete it and download again")
        return dest
    if checksum is not None:
        _algorithm(checksum, dest)  # a bad checksum argument fails before a long download
    part = dest.with_name(dest.name + ".part")
    with _locked(dest):
        if dest.is_file():   # another job finished it while this one waited
            return dest
        log.info("downloading %s%s", url, f" (resuming {part})" if part.is_file() else "")
        try:
            _fetch(url, part)
        except (OSError, http.client.HTTPException) as err:
            kept = part.stat().st_size if part.is_file() else 0
            raise OSError(f"{url}: download failed ({type(err).__name__}: {err})"
                          + (f"; {kept} bytes kept in {part}, resumed by the next try"
                             if kept else "")) from None
        try:
            if checksum is None:
                digest = file_digest(part)
                log.warning("%s: no published checksum; its SHA-256 is %s", url, digest)
            else:
                digest = verify_file(part, checksum, dest, f"the download from {url} was not kept")
            if check is not None:
                try:
                    check(part)
                except ValueError as err:
                    raise ValueError(f"{err}; the download from {url} was not kept") from None
        except ValueError:
            part.unlink()
            raise
        os.replace(part, dest)
    log.info("%s: %s", dest, digest)
    return dest


# ---------------------------------------------------------------------------------------------
# Archives

def _unpack(archive: Path, target: Path, marker: str) -> Path:
    """Unpack a verified tar archive as folder `target`: the archive's top level or its single
    top folder, whichever holds `marker`.  `target` appears only once complete."""
    target.parent.mkdir(parents=True, exist_ok=True)
    for stale in target.parent.glob(f".{target.name}.*.unpacking"):  # left by a killed job
        shutil.rmtree(stale, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".unpacking",
                                dir=target.parent))
    try:
        try:
            with tarfile.open(archive) as tar:
                tar.extractall(tmp, filter="data")  # refuses absolute paths, '..', outside links
        except (tarfile.TarError, OSError, EOFError, zlib.error) as err:
            raise ValueError(f"{archive}: cannot be unpacked ({type(err).__name__}: {err})") \
                from None
        tops = [tmp] + sorted(p for p in tmp.iterdir() if p.is_dir())
        top = next((p for p in tops if (p / marker).exists()), None)
        if top is None:
            raise ValueError(f"{archive}: holds no {marker!r}, at its top or in a top folder")
        os.replace(top, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def download_archive(root, url: str, checksum: str, folder: str, marker: str) -> Path:
    """The tar archive at `url`, downloaded into `root` (see `download_file`) and unpacked as
    `root`/`folder` (see `_unpack`); returns that folder, at once if it is there."""
    root = Path(root)
    target = root / folder
    if target.is_dir():  # only a complete unpacking is ever renamed to `target`
        return target
    with _locked(target):
        if not target.is_dir():
            archive = download_file(url, root / Path(urllib.parse.urlparse(url).path).name,
                                    checksum)
            _unpack(archive, target, marker)
    return target


# ---------------------------------------------------------------------------------------------
# Hugging Face hub models

def _hub_files(siblings: list[dict]) -> list[dict]:
    """The files from_pretrained reads for a model and its tokenizer: the top-level .json, .txt
    and .model files (configuration, tokenizer, vocabulary) and the weights, as safetensors, or
    PyTorch's format where a repository has no safetensors.  Other formats, images and
    subfolders (onnx/, ...) are left out."""
    top = [s for s in siblings if "/" not in s["rfilename"]]
    weights = [s for s in top if s["rfilename"].endswith(".safetensors")] \
        or [s for s in top if s["rfilename"].startswith("pytorch_model")]
    rest = [s for s in top if s["rfilename"].endswith((".json", ".txt", ".model"))]
    return sorted({s["rfilename"]: s for s in rest + weights}.values(),
                  key=lambda s: s["rfilename"])


def hub_model(source: str, revision: str | None, root=HUB_ROOT, endpoint: str | None = None):
    """`source` as from_pretrained should read it: a hub id (`org/name`) becomes a local
    folder `root`/<id>/<commit> with the model's files at `revision` (a commit, tag or branch;
    None: main), each checked against the checksum the hub lists for that commit (the SHA-256
    of files in git LFS, the git blob SHA-1 of the others); a local folder or a
    "package:<module>/<folder>" source is returned as it is."""
    source = str(source)
    if source.startswith("package:") or Path(source).exists():
        return source
    endpoint = (endpoint or os.environ.get("HF_ENDPOINT") or HF_ENDPOINT).rstrip("/")
    rev = urllib.parse.quote(revision or "main", safe="")
    url = f"{endpoint}/api/models/{source}/revision/{rev}?blobs=true"
    try:
        with _open(url) as response:
            info = json.load(response)
        commit, siblings = info["sha"], info["siblings"]
    except (OSError, http.client.HTTPException) as err:
        raise OSError(f"{url}: cannot list the files of {source} at revision {revision} "
                      f"({type(err).__name__}: {err})") from None
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(f"{url}: not a hub model listing ({type(err).__name__}: {err})") \
            from None
    if revision is None:
        log.warning("%s: no revision pinned (text.revision); main is commit %s", source, commit)
    folder = Path(root) / source / commit
    for f in _hub_files(siblings):
        name = f["rfilename"]
        lfs = f.get("lfs") or {}
        checksum = lfs["sha256"] if lfs else f"git-sha1:{f.get('blobId')}"
        download_file(f"{endpoint}/{source}/resolve/{commit}/{urllib.parse.quote(name)}",
                      folder / name, checksum)
    return str(folder)
