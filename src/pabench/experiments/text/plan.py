"""What the text-shift experiment (PA paper, Appendix C, Figure 10) runs, from the config's
`text` section: the views (clean, and every strategy at every power W), the settings each job
reads and the figure's provenance.  No PyTorch here, so planning the workflow stays fast."""
from __future__ import annotations

from pabench.core import paths
from pabench.core.paths import TextView
from pabench.metrics.settings import PASettings

# The labelled-sentence domains the logistic head is trained on; its test reviews are IMDB's.
HEAD_TRAIN = ("amazon", "yelp")


def enabled(config: dict) -> bool:
    """The quick scale (offline: labelled sentences and MiniLM) and the paper scale (IMDB and
    DistilBERT, downloaded); not the test scale."""
    return bool(config["text"]["enabled"])


def on_sentences(config: dict) -> bool:
    """Whether the reviews are the UCI labelled sentences (text.data: sentences), not IMDB's."""
    return config["text"]["data"] == "sentences"


def views(config: dict) -> list[TextView]:
    """The shifted views, strategy by strategy, W by W (the clean view is their reference)."""
    t = config["text"]
    return [TextView(s, int(w)) for s in t["strategies"] for w in t["powers"]]


def logits_files(config: dict) -> list[str]:
    return [paths.text_logits(v) for v in views(config)]


def data_params(config: dict) -> dict:
    """What the test reviews depend on: the data set and where it is read from."""
    t = config["text"]
    return {"data": t["data"], "source": t["sentences"] if on_sentences(config) else t["imdb"]}


def model_params(config: dict) -> dict:
    """What the saved classifier depends on: a change here rebuilds it (and every view).  A
    logistic head also depends on its training sentences."""
    t = config["text"]
    params = {"model": t["model"], "revision": t["revision"], "head": t["head"]}
    if t["head"]:
        params |= {"sentences": t["sentences"]["folder"], "train": list(HEAD_TRAIN)}
    return params


def pa_settings(config: dict) -> PASettings:
    return PASettings.from_config(config["pa"]["adam"], config["text"]["pa_epochs"])


def data_label(config: dict) -> str:
    t = config["text"]
    if on_sentences(config):
        size = "all 1,000" if t["n"] is None else f"n = {t['n']}, class-balanced"
        return ("IMDB sentences of the UCI Sentiment Labelled Sentences (Kotzias et al. 2015; npm "
                f"sentiment 5.0.2's fixtures); {size}, seed {t['seed']}")
    source = ("IMDB test reviews (Maas et al. 2011), a local archive" if t["imdb"]["archive"]
              else "IMDB test reviews (Maas et al. 2011), downloaded, MD5-checked")
    size = "all 25,000" if t["n"] is None else f"n = {t['n']}, class-balanced"
    return f"{source}; {size}, seed {t['seed']}"


def model_label(config: dict) -> str:
    t = config["text"]
    revision = f" @ {t['revision']}" if t["revision"] else ""
    if t["head"]:
        return (f"{t['model']}{revision}: mean-pooled sentence embeddings with a logistic-"
                f"regression head trained on the {' and '.join(d.capitalize() for d in HEAD_TRAIN)} "
                "sentences, a real cross-domain sentiment model tested on the IMDB sentences; "
                "posteriors: the head's logits")
    return (f"{t['model']}{revision} (a Hugging Face transformers sequence classifier; reviews "
            f"truncated to {t['max_length']} tokens)")


def figure_meta(config: dict) -> dict:
    t = config["text"]
    return {"data": data_label(config),
            "model": model_label(config),
            "shifts": f"{', '.join(t['strategies'])}; W = {', '.join(map(str, t['powers']))} "
                      "(2^W replacements per review)",
            "solver": f"adam ({t['pa_epochs']} epochs) and exact",
            "seeds": {"subset_and_shifts": t["seed"]}}
