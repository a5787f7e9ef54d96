"""The quick scale's Figure 10 data: the UCI labelled sentences as npm's `sentiment` package ships
them (JSON lists of {"text", "class"} records ending in an empty one), read from small files in
that format, checked against the published checksums, and the installed corpus itself where
envs/install.sh could put it."""
import json
import sys

import pytest

from pabench.datasets import imdb, sentences

CORPUS = sentences.DEFAULT_FOLDER
needs_corpus = pytest.mark.skipif(
    not all((CORPUS / f"{d}.json").is_file() for d in sentences.DOMAINS),
    reason=f"no labelled sentences in {CORPUS}: {sentences.HOW_TO_GET}")


def write_domain(folder, domain, records, closing=True):
    """A fixture file as the package has it: the records, then {"text": "", "class": null}."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = records + ([{"text": "", "class": None}] if closing else [])
    (folder / f"{domain}.json").write_text(json.dumps(rows))


def sample(n=6):
    return [{"text": f"Sentence {i} was {'great' if i % 2 else 'awful'}.  ", "class": i % 2}
            for i in range(n)]


def test_reads_the_records_in_order_and_skips_the_closing_empty_one(tmp_path):
    write_domain(tmp_path, "imdb", sample())
    got = sentences.read_sentences(tmp_path, "imdb", check=False)
    assert [s.id for s in got] == [f"imdb/{i}" for i in range(6)]
    assert [s.label for s in got] == [0, 1, 0, 1, 0, 1]
    assert got[1].text == "Sentence 1 was great." and got[0].rating is None   # end spaces dropped


def test_the_subset_and_the_reviews_file_take_sentences(tmp_path):
    write_domain(tmp_path, "imdb", sample(10))
    chosen = imdb.balanced_subset(sentences.read_sentences(tmp_path, "imdb", check=False), 4, seed=0)
    assert sorted(s.label for s in chosen) == [0, 0, 1, 1]
    imdb.save_reviews(tmp_path / "reviews.json", chosen, "imdb.json")
    assert imdb.load_reviews(tmp_path / "reviews.json") == chosen


def test_a_missing_file_names_the_corpus_and_how_to_get_it(tmp_path):
    with pytest.raises(FileNotFoundError) as err:
        sentences.read_sentences(tmp_path / "nowhere", "amazon")
    message = str(err.value)
    assert str(tmp_path / "nowhere" / "amazon.json") in message
    assert "sentiment@5.0.2" in message and "envs/install.sh" in message
    assert "text.sentences.folder" in message


def test_files_not_the_published_ones_or_not_in_the_format_are_refused(tmp_path):
    write_domain(tmp_path, "yelp", sample())
    with pytest.raises(ValueError, match="checksum mismatch .*not the yelp sentences of sentiment@5.0.2"):
        sentences.read_sentences(tmp_path, "yelp")
    for bad in ([{"text": "Fine.", "class": 2}], [{"text": "", "class": 1}], [{"class": 0}],
                [{"text": "Fine.", "class": True}], ["just a string"], {"text": "Fine.", "class": 0}):
        (tmp_path / "imdb.json").write_text(json.dumps(bad))
        with pytest.raises(ValueError, match="imdb.json: not a labelled-sentences file"):
            sentences.read_sentences(tmp_path, "imdb", check=False)
    write_domain(tmp_path, "amazon", [])
    with pytest.raises(ValueError, match="no labelled sentences"):
        sentences.read_sentences(tmp_path, "amazon", check=False)
    with pytest.raises(ValueError, match="unknown sentence domain 'twitter'"):
        sentences.read_sentences(tmp_path, "twitter", check=False)


def test_the_default_folder_is_inside_the_running_environment():
    assert sentences.corpus_folder(None) == sentences.DEFAULT_FOLDER
    assert sentences.DEFAULT_FOLDER.is_relative_to(sys.prefix)
    assert sentences.corpus_folder("elsewhere").name == "elsewhere"


@needs_corpus
def test_the_installed_corpus_is_the_published_one():
    for domain in sentences.DOMAINS:
        got = sentences.read_sentences(CORPUS, domain)      # checksums checked
        assert len(got) == sentences.PER_DOMAIN
        assert sum(s.label for s in got) == sentences.PER_DOMAIN // 2
        assert all(s.text and s.text == s.text.strip() for s in got)
