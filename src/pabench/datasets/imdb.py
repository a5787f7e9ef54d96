"""The IMDB movie-review sentiment data set (Maas et al., 2011), for the PA paper's text shifts
(Appendix C, Figure 10).

The published archive `aclImdb_v1.tar.gz` (ai.stanford.edu, MD5 below) holds
`aclImdb/<split>/<pos|neg>/<id>_<rating>.txt`, one review per file: 12,500 positive (rating 7-10)
and 12,500 negative (rating 1-4) reviews per split.  The test reviews are read straight from the
archive (nothing is unpacked); the line breaks the reviews carry as HTML (`<br />`) become spaces.
A seeded, class-balanced subset of them is kept as JSON for the later steps.

The download goes through `pabench.core.download.download_file`: `file://` URLs work, an
interrupted download resumes, the MD5 is checked before the file is kept, and nothing
half-written or wrong is left in place.
"""
from __future__ import annotations

import json
import re
import tarfile
import zlib
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from pabench.core.download import download_file
from pabench.core.io import file_digest, write_json

IMDB_URL = "https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz"
IMDB_MD5 = "7c2ac02c03563afcf9b574c7e56c153a"
ARCHIVE = "aclImdb_v1.tar.gz"
TOP = "aclImdb"
CLASSES = ("neg", "pos")          # label 0, label 1 (the classifier's columns are put in this order)
REVIEWS_PER_CLASS = 12_500        # in each split of the published archive
_FILE = re.compile(r"(\d+)_(\d+)\.txt")
_BREAK = re.compile(r"<br\s*/?>", re.IGNORECASE)


@dataclass(frozen=True)
class Review:
    id: str        # "<class>/<number>", e.g. "pos/1234": unique within a split
    label: int     # 0 negative, 1 positive
    rating: int | None   # the star rating in the file name (1-4 negative, 7-10 positive); None: none
                         # (the labelled sentences of pabench.datasets.sentences)
    text: str


def clean_text(raw: str) -> str:
    """A review as the model reads it: the HTML line breaks replaced by spaces."""
    return _BREAK.sub(" ", raw)


def imdb_archive(root, archive=None, url: str = IMDB_URL, md5: str | None = IMDB_MD5) -> Path:
    """The archive to read: `archive` (a local copy; checked against `md5` unless it is None,
    which reads a stand-in as it is), or the download of `url` into `root`, MD5-checked."""
    if archive is not None:
        path = Path(archive)
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such file (text.imdb.archive)")
        if md5:
            got = file_digest(path, "md5")
            if got != md5.lower():
                raise ValueError(f"{path}: checksum mismatch (md5 {got}, expected {md5}); not the "
                                 "published IMDB archive (text.imdb.md5: null reads a stand-in "
                                 "as it is)")
        return path
    if not md5:
        raise ValueError("text.imdb.md5: a download needs the archive's MD5 (null only with "
                         "text.imdb.archive, a local file read as it is)")
    return download_file(url, Path(root) / ARCHIVE, md5)


def read_split(archive, split: str = "test") -> list[Review]:
    """Every review of one split, ordered by class then number.  A missing class folder, a file
    name out of the layout's form, or a damaged archive is an error naming the archive."""
    archive = Path(archive)
    found: dict[str, list[Review]] = {c: [] for c in CLASSES}
    prefix = f"{TOP}/{split}/"
    try:
        with tarfile.open(archive, "r|*") as tar:   # streamed: one pass, nothing unpacked
            for member in tar:
                name = member.name.removeprefix("./")
                if not (member.isfile() and name.startswith(prefix)):
                    continue
                parts = name[len(prefix):].split("/")
                if len(parts) != 2 or parts[0] not in CLASSES:
                    continue            # urls_*.txt, labeledBow.feat and the like
                match = _FILE.fullmatch(parts[1])
                if not match:
                    raise ValueError(f"{archive}: {name} is not named <id>_<rating>.txt")
                raw = tar.extractfile(member).read()
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as err:
                    raise ValueError(f"{archive}: {name} is not UTF-8 text ({err})") from None
                label = CLASSES.index(parts[0])
                found[parts[0]].append(Review(f"{parts[0]}/{int(match[1])}", label,
                                              int(match[2]), clean_text(text)))
    except (tarfile.TarError, OSError, EOFError, zlib.error) as err:
        raise ValueError(f"{archive}: cannot be read as a tar archive ({type(err).__name__}: "
                         f"{err})") from None
    missing = [f"{prefix}{c}/" for c in CLASSES if not found[c]]
    if missing:
        raise ValueError(f"{archive}: no reviews in {', '.join(missing)} (the IMDB layout is "
                         f"{TOP}/<train|test>/<pos|neg>/<id>_<rating>.txt)")
    return [r for c in CLASSES for r in sorted(found[c], key=lambda r: int(r.id.split("/")[1]))]


def balanced_subset(reviews: list[Review], n: int | None, seed: int) -> list[Review]:
    """n reviews, half of each class (the negative half rounded down), drawn without replacement
    with `seed` and shuffled; n None: every review, shuffled.  The draw depends only on the
    reviews' ids, not on their order in the archive."""
    ordered = sorted(reviews, key=lambda r: (r.label, r.id))
    by_class = [[r for r in ordered if r.label == label] for label in range(len(CLASSES))]
    if n is None:
        want = [len(group) for group in by_class]
    else:
        if n < 2:
            raise ValueError(f"text.n: {n} reviews cannot hold both classes (need n >= 2)")
        want = [n // 2, n - n // 2]
    short = [f"{want[k]} {CLASSES[k]} wanted, {len(g)} found" for k, g in enumerate(by_class)
             if len(g) < want[k]]
    if short:
        raise ValueError(f"text.n: {n} reviews need more than there are ({'; '.join(short)})")
    rng = np.random.default_rng(seed)
    picked = [group[i] for group, k in zip(by_class, want)
              for i in sorted(rng.choice(len(group), size=k, replace=False))]
    return [picked[i] for i in rng.permutation(len(picked))]


def save_reviews(path, reviews: list[Review], source: str) -> None:
    """The chosen reviews as JSON (written atomically)."""
    write_json(path, {"source": source, "classes": list(CLASSES),
                      "reviews": [asdict(r) for r in reviews]})


def load_reviews(path) -> list[Review]:
    """Read what save_reviews wrote; a missing, damaged or malformed file is an error naming it."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    try:
        data = json.loads(path.read_text())
        reviews = [Review(str(r["id"]), int(r["label"]),
                          None if r["rating"] is None else int(r["rating"]), str(r["text"]))
                   for r in data["reviews"]]
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(f"{path}: not a reviews file ({type(err).__name__}: {err})") from None
    if not reviews or any(r.label not in (0, 1) for r in reviews):
        raise ValueError(f"{path}: needs at least one review, each labelled 0 or 1")
    if len({r.id for r in reviews}) != len(reviews):
        raise ValueError(f"{path}: review ids repeat")
    return reviews
