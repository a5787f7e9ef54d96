"""What the text-shift experiment (PA paper, Appendix C, Figure 10) runs, from the config's
`text` section: the views (clean, and every strategy at every power W), the settings each job
reads and the figure's provenance.  No PyTorch here, so planning the workflow stays fast."""
from __future__ import annotations

from pabench.core import paths
from pabench.core.paths import TextView
from pabench.metrics.settings import PASettings


def enabled(config: dict) -> bool:
    """Only at the paper scale (or an overlay that enables it): it needs IMDB and the DistilBERT
    weights, which no offline package provides."""
    return bool(config["text"]["enabled"])


def views(config: dict) -> list[TextView]:
    """The shifted views, strategy by strategy, W by W (the clean view is their reference)."""
    t = config["text"]
    return [TextView(s, int(w)) for s in t["strategies"] for w in t["powers"]]


def logits_files(config: dict) -> list[str]:
    return [paths.text_logits(v) for v in views(config)]


def imdb_params(config: dict) -> dict:
    return dict(config["text"]["imdb"])


def model_params(config: dict) -> dict:
    """What the saved classifier depends on: a change here rebuilds it (and every view)."""
    t = config["text"]
    return {"model": t["model"], "revision": t["revision"]}


def pa_settings(config: dict) -> PASettings:
    return PASettings.from_config(config["pa"]["adam"], config["text"]["pa_epochs"])


def data_label(config: dict) -> str:
    t = config["text"]
    source = ("IMDB test reviews (Maas et al. 2011), a local archive" if t["imdb"]["archive"]
              else "IMDB test reviews (Maas et al. 2011), downloaded, MD5-checked")
    size = "all 25,000" if t["n"] is None else f"n = {t['n']}, class-balanced"
    return f"{source}; {size}, seed {t['seed']}"


def figure_meta(config: dict) -> dict:
    t = config["text"]
    revision = f" @ {t['revision']}" if t["revision"] else ""
    return {"data": data_label(config),
            "model": f"{t['model']}{revision} (a Hugging Face transformers sequence classifier; "
                     f"reviews truncated to {t['max_length']} tokens)",
            "shifts": f"{', '.join(t['strategies'])}; W = {', '.join(map(str, t['powers']))} "
                      "(2^W replacements per review)",
            "solver": f"adam ({t['pa_epochs']} epochs) and exact",
            "seeds": {"subset_and_shifts": t["seed"]}}
