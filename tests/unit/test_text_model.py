"""Figure 10's model path and scoring: a tiny random DistilBERT with our own WordPiece vocabulary,
saved with save_pretrained and loaded by path through the Auto* classes (as the paper scale loads
the downloaded one), its logits (batched as unbatched, columns in the IMDB order), the PA /
accuracy table end to end, the figure and the claims."""
import numpy as np
import pandas as pd
import pytest

from pabench.tools import rehearsal
from pabench.core.paths import TextView
from pabench.datasets import imdb
from pabench.experiments.text import compute, shifts
from pabench.experiments.text.scoring import score_text_views
from pabench.metrics.settings import PASettings
from pabench.reporting.claims import NOT_EVALUATED, NOT_REPRODUCED, REPRODUCED, evaluate, load

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def stand_ins(tmp_path_factory):
    """The rehearsal's stand-ins: an IMDB archive (12 reviews per class) and the tiny model."""
    folder = tmp_path_factory.mktemp("text")
    rehearsal.write_text(folder)
    return folder


@pytest.fixture(scope="module")
def classifier(stand_ins):
    return compute.load_classifier(stand_ins / "distilbert")


@pytest.fixture(scope="module")
def reviews(stand_ins):
    archive = imdb.imdb_archive("unused", stand_ins / "aclImdb_v1.tar.gz", md5=None)
    return imdb.balanced_subset(imdb.read_split(archive), 10, seed=0)


def test_the_stand_ins_load_through_the_paper_scale_loaders(stand_ins, classifier):
    reviews = imdb.read_split(stand_ins / "aclImdb_v1.tar.gz")
    assert len(reviews) == 24 and {r.label for r in reviews} == {0, 1}
    assert all("<br" not in r.text for r in reviews)
    tokenizer, model = classifier
    assert type(model).__name__ == "DistilBertForSequenceClassification"
    assert model.config.n_layers == 2 and model.config.dim == 32
    # the vocabulary covers the reviews and every adjective: nothing is unknown
    ids = tokenizer(" ".join(r.text for r in reviews) + " " + " ".join(shifts.POSITIVE + shifts.NEGATIVE))
    assert tokenizer.unk_token_id not in ids["input_ids"]


def test_logits_shape_and_batching_equal_unbatched(classifier, reviews):
    tokenizer, model = classifier
    texts = [r.text for r in reviews] + ["x"]          # lengths differ: padding in every batch
    batched = compute.logits(texts, tokenizer, model, batch_size=4, progress=False)
    alone = np.concatenate([compute.logits([t], tokenizer, model, batch_size=1, progress=False)
                            for t in texts])
    assert batched.shape == (len(texts), 2) and batched.dtype == np.float32
    np.testing.assert_allclose(batched, alone, rtol=1e-4, atol=1e-5)
    assert np.ptp(batched[:, 0]) > 1e-3                   # the texts get different scores
    # truncation: a review longer than max_length tokens scores as its first tokens
    long = "good " * 600
    np.testing.assert_allclose(
        compute.logits([long], tokenizer, model, max_length=16, progress=False),
        compute.logits(["good " * 14], tokenizer, model, max_length=16, progress=False), rtol=1e-5)


def test_label_columns_follow_the_models_label_names():
    assert compute.label_columns({0: "NEGATIVE", 1: "POSITIVE"}) == [0, 1]
    assert compute.label_columns({"0": "positive", "1": "negative"}) == [1, 0]
    assert compute.label_columns({0: "LABEL_0", 1: "LABEL_1"}) == [0, 1]
    with pytest.raises(ValueError, match="must have 2 labels"):
        compute.label_columns({0: "neg", 1: "neutral", 2: "pos"})
    with pytest.raises(ValueError, match="cannot tell"):
        compute.label_columns({0: "negative", 1: "not negative"})


def test_save_classifier_keeps_the_model_and_swapped_labels_swap_the_columns(stand_ins, classifier, tmp_path):
    tokenizer, model = classifier
    saved = compute.save_classifier(stand_ins / "distilbert", tmp_path / "model")
    assert (saved / "config.json").is_file() and not list(tmp_path.glob(".model.*"))
    tok2, model2 = compute.load_classifier(saved)
    texts = ["the film was good", "the film was awful and dull"]
    original = compute.logits(texts, tokenizer, model, progress=False)
    np.testing.assert_allclose(compute.logits(texts, tok2, model2, progress=False), original, rtol=1e-6)
    model2.config.id2label = {0: "POSITIVE", 1: "NEGATIVE"}   # a model whose labels run the other way
    np.testing.assert_allclose(compute.logits(texts, tok2, model2, progress=False), original[:, ::-1],
                               rtol=1e-6)


def test_logits_records_round_trip_and_damage(tmp_path):
    path = tmp_path / "v.npz"
    compute.save_logits(path, np.ones((3, 2)), [0, 1, 1], ["neg/1", "pos/2", "pos/3"], [4, 4, 2], 4)
    record = compute.load_logits(path)
    assert record["ids"].tolist() == ["neg/1", "pos/2", "pos/3"] and int(record["replacements"]) == 4
    np.savez(path, logits=np.ones((3, 3)), labels=np.zeros(3), ids=np.array(["a", "b", "c"]),
             made=np.zeros(3), replacements=np.int64(1))
    with pytest.raises(ValueError, match="do not fit 3 labels"):
        compute.load_logits(path)


def _views(reviews, classifier, powers=(0, 1, 2)):
    tokenizer, model = classifier
    labels = np.array([r.label for r in reviews])
    ids = np.array([r.id for r in reviews])
    clean = {"logits": compute.logits([r.text for r in reviews], tokenizer, model, 4, progress=False),
             "labels": labels, "ids": ids}
    views = {}
    for strategy in shifts.STRATEGIES:
        for power in powers:
            texts, made = shifts.shift_reviews(reviews, strategy, power, seed=0)
            views[TextView(strategy, power)] = {
                "logits": compute.logits(texts, tokenizer, model, 4, progress=False),
                "labels": labels, "ids": ids, "made": made, "replacements": 2 ** power}
    return clean, views


def test_pa_and_accuracy_table_end_to_end(reviews, classifier):
    clean, views = _views(reviews, classifier)
    table = score_text_views(clean, views, PASettings(epochs=3), "tiny")
    assert len(table) == 9 and list(table.strategy.unique()) == list(shifts.STRATEGIES)
    assert table.power.tolist() == [0, 1, 2] * 3 and table.replacements.tolist() == [1, 2, 4] * 3
    assert (table.n == 10).all() and (table.model == "tiny").all()
    clean_accuracy = float((clean["logits"].argmax(1) == clean["labels"]).mean())
    assert np.allclose(table.clean_accuracy, clean_accuracy)
    for row in table.itertuples():      # accuracy and agreement recomputed from the logits
        shifted = views[TextView(row.strategy, row.power)]["logits"]
        assert row.afr_true == pytest.approx((shifted.argmax(1) == clean["labels"]).mean())
        assert row.afr_pred == pytest.approx((shifted.argmax(1) == clean["logits"].argmax(1)).mean())
        assert row.logpa_exact <= 0 and row.logpa_adam <= row.logpa_exact + 1e-9
    assert table.degenerate.dtype == bool
    # a view identical to the clean one agrees perfectly: beta* unbounded, log PA = 0
    same = {TextView("levenshtein", 0): {**views[TextView("levenshtein", 0)], "logits": clean["logits"]}}
    row = score_text_views(clean, same, PASettings(epochs=3)).iloc[0]
    assert row.logpa_exact == pytest.approx(0.0, abs=1e-9) and row.afr_pred == 1.0
    wrong = {TextView("levenshtein", 0): {**views[TextView("levenshtein", 0)], "ids": clean["ids"][::-1]}}
    with pytest.raises(ValueError, match="not the clean reviews"):
        score_text_views(clean, wrong, PASettings(epochs=3))


def test_figure_10_draws_every_strategy_from_the_table(reviews, classifier, tmp_path):
    from pabench.experiments.text.figures import fig10
    from pabench.reporting.plotting import use_style

    use_style(rehearsal.REPO / "workflow/style/pabench.mplstyle")
    clean, views = _views(reviews, classifier, powers=(0, 2))
    table = tmp_path / "scores.csv"
    score_text_views(clean, views, PASettings(epochs=3), "tiny").to_csv(table, index=False)
    outputs = [tmp_path / f"fig10.{ext}" for ext in ("pdf", "png", "csv")]
    data = fig10({"table": str(table)}, outputs, {"caption": "Figure 10", "scale": "paper"},
                 strategies=["amplification", "levenshtein"])
    assert all(p.stat().st_size > 0 for p in outputs)
    assert data.strategy.tolist() == ["amplification"] * 2 + ["levenshtein"] * 2
    assert pd.read_csv(outputs[2]).shape[0] == 4
    with pytest.raises(ValueError, match=r"no rows for strategies \['nope'\]"):
        fig10({"table": str(table)}, outputs, {"caption": "c", "scale": "paper"}, strategies=["nope"])


def _table(acc: dict, pa: dict, clean_accuracy=0.8, beta: dict | None = None) -> pd.DataFrame:
    beta = beta or {}
    rows = [{"model": "m", "strategy": s, "power": w, "afr_true": acc[s][w], "logpa_adam": pa[s][w],
             "logpa_exact": pa[s][w],
             "beta_exact": beta.get(s, [1.0] * len(acc[s]))[w],
             "clean_accuracy": clean_accuracy, "degenerate": False}
            for s in acc for w in range(len(acc[s]))]
    return pd.DataFrame(rows)


def test_pa_flat_at_its_floor_counts_as_fallen_and_a_flat_stretch_above_it_does_not():
    claims = load(["pabench.experiments.text.claims"])
    falling = [-1.0, -5.0, -9.0, -20.0]
    accuracy = {"amplification": [0.8, 0.82, 0.85, 0.9], "levenshtein": [0.8, 0.78, 0.7, 0.6],
                "contradiction": [0.79, 0.2, 0.0, 0.0]}
    floored = [-10.0, -20.8, -20.8, -20.8]   # beta* = 0 from W = 1 on: PA cannot fall further
    at_floor = _table(accuracy, {"amplification": falling, "levenshtein": falling,
                                 "contradiction": floored},
                      beta={"contradiction": [2.0, 0.0, 0.0, 0.0]})
    row = evaluate({"text": at_floor}, claims).set_index("id").loc[
        "text-levenshtein-contradiction-both-fall"]
    assert row.verdict == REPRODUCED
    assert "PA at its floor, beta* = 0, from W = 1 on" in row.measured
    # the same values with beta* > 0: a flat stretch the model chose, not a floor
    flat = at_floor.assign(beta_exact=1.0)
    verdict = evaluate({"text": flat}, claims).set_index("id").verdict
    assert verdict["text-levenshtein-contradiction-both-fall"] == NOT_REPRODUCED


def test_the_claims_read_the_text_table():
    claims = load(["pabench.experiments.text.claims"])
    assert [c.id for c in claims] == ["text-amplification-pa-not-accuracy",
                                      "text-amplification-pa-not-accuracy-exact",
                                      "text-levenshtein-contradiction-both-fall",
                                      "text-levenshtein-contradiction-both-fall-exact"]
    falling = [-1.0, -5.0, -9.0, -20.0]
    paper_like = _table({"amplification": [0.8, 0.82, 0.85, 0.9], "levenshtein": [0.8, 0.78, 0.7, 0.6],
                         "contradiction": [0.79, 0.7, 0.6, 0.5]},
                        {"amplification": falling, "levenshtein": falling, "contradiction": falling})
    verdicts = evaluate({"text": paper_like}, claims).set_index("id").verdict
    assert (verdicts == REPRODUCED).all()
    accuracy_falls = paper_like.assign(afr_true=paper_like.afr_true - 0.2)
    verdicts = evaluate({"text": accuracy_falls}, claims).set_index("id").verdict
    assert verdicts["text-amplification-pa-not-accuracy"] == NOT_REPRODUCED
    pa_rises = paper_like.assign(logpa_adam=-paper_like.logpa_adam, logpa_exact=-paper_like.logpa_exact)
    assert (evaluate({"text": pa_rises}, claims).verdict == NOT_REPRODUCED).all()
    two_powers = paper_like[paper_like.power < 2]
    assert (evaluate({"text": two_powers}, claims).verdict == NOT_EVALUATED).all()
    # the test scale has no text table: not evaluated, and said so
    missing = evaluate({}, claims)
    assert (missing.verdict == NOT_EVALUATED).all()
    assert missing.measured.str.contains("no text results at this scale").all()
