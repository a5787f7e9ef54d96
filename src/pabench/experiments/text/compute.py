"""The sentiment classifier of the text shifts (PA paper, Appendix C): a DistilBERT sequence
classifier through Hugging Face `transformers` (AutoTokenizer + AutoModelForSequenceClassification),
by hub id or local folder, saved once into the workflow's data, and its logits on reviews.

The logits' columns are put in the IMDB order (0 negative, 1 positive) from the model's own
label names (`id2label`: "NEGATIVE"/"POSITIVE" or anything containing "neg"/"pos"); a model with
generic names (LABEL_0, LABEL_1) is taken to be in that order already.
"""
from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

log = logging.getLogger("pabench.text")


def label_columns(id2label: dict) -> list[int]:
    """The model's output columns for (negative, positive)."""
    names = {int(k): str(v).lower() for k, v in id2label.items()}
    if sorted(names) != [0, 1]:
        raise ValueError(f"the sentiment classifier must have 2 labels (negative, positive), "
                         f"has {len(names)}: {dict(sorted(names.items()))}")
    neg = [k for k, v in names.items() if "neg" in v]
    pos = [k for k, v in names.items() if "pos" in v]
    if len(neg) == 1 and len(pos) == 1 and neg != pos:
        return [neg[0], pos[0]]
    if neg or pos:
        raise ValueError(f"cannot tell the negative and positive labels apart in {names}")
    return [0, 1]


def load_classifier(source, device="cpu", revision: str | None = None):
    """(tokenizer, model in eval mode on `device`) from a hub id or a local folder."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    kwargs = {"revision": revision} if revision else {}
    tokenizer = AutoTokenizer.from_pretrained(str(source), **kwargs)
    model = AutoModelForSequenceClassification.from_pretrained(str(source), **kwargs)
    label_columns(model.config.id2label)   # refuse a model that is no binary sentiment classifier
    return tokenizer, model.to(device).eval()


def save_classifier(source, dest, revision: str | None = None) -> Path:
    """The classifier (hub id, downloaded once into Hugging Face's cache, or local folder) saved
    as folder `dest` with its tokenizer; `dest` appears only once complete."""
    dest = Path(dest)
    tokenizer, model = load_classifier(source, "cpu", revision)
    dest.parent.mkdir(parents=True, exist_ok=True)
    for stale in dest.parent.glob(f".{dest.name}.*.saving"):   # left by a killed job
        shutil.rmtree(stale, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".saving", dir=dest.parent))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(tmp, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def logits(texts, tokenizer, model, batch_size: int = 32, max_length: int = 512,
           progress: bool = True, desc: str = "logits") -> np.ndarray:
    """(N, 2) float32 logits of the texts, columns (negative, positive).  Texts are batched by
    length (longest first, so padding stays small and a too-large batch fails at once),
    truncated to `max_length` tokens, and returned in their own order."""
    import torch
    from tqdm import tqdm

    if batch_size < 1 or max_length < 2:
        raise ValueError(f"batch_size must be >= 1 and max_length >= 2, got {batch_size}, {max_length}")
    texts = list(texts)
    columns = label_columns(model.config.id2label)
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    out = np.empty((len(texts), 2), dtype=np.float32)
    device = next(model.parameters()).device
    batches = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    with torch.inference_mode():
        for batch in tqdm(batches, desc=desc, unit="batch", disable=not progress, mininterval=5.0):
            encoded = tokenizer([texts[i] for i in batch], padding=True, truncation=True,
                                max_length=max_length, return_tensors="pt").to(device)
            scores = model(**encoded).logits.float()[:, columns]
            out[batch] = scores.cpu().numpy()
    return out


def save_logits(path, logits_: np.ndarray, labels, ids, made, replacements: int) -> None:
    """One view's record: logits (N, 2), labels, review ids, replacements made per review and
    the replacements asked for (2^W; 0 for the clean view)."""
    from pabench.core.io import atomic_path

    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            np.savez(fh, logits=np.asarray(logits_, np.float32), labels=np.asarray(labels, np.int64),
                     ids=np.asarray(ids, dtype=str), made=np.asarray(made, np.int64),
                     replacements=np.int64(replacements))


LOGITS_KEYS = ("logits", "labels", "ids", "made", "replacements")


def load_logits(path) -> dict:
    from pabench.core.io import load_npz

    record = load_npz(path, keys=LOGITS_KEYS, only=True)
    n = len(record["labels"])
    if record["logits"].shape != (n, 2) or record["ids"].shape != (n,) or record["made"].shape != (n,):
        raise ValueError(f"{path}: logits {record['logits'].shape}, ids {record['ids'].shape} and "
                         f"made {record['made'].shape} do not fit {n} labels")
    return record
