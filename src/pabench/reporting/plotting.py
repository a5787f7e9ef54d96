"""What every figure shares: the style file, captions and atomic pdf/png/csv output."""
from __future__ import annotations

import functools
import textwrap
from pathlib import Path

from pabench.core.io import atomic_path, write_csv


@functools.cache
def pyplot():
    """matplotlib.pyplot on the Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot

    return matplotlib.pyplot


class _Pyplot:
    """`plt`: matplotlib.pyplot, imported on first use.  Every workflow start imports the figure
    modules (the paper registries name their functions), and most starts draw nothing."""

    def __getattr__(self, name):
        return getattr(pyplot(), name)


plt = _Pyplot()


def use_style(style_file) -> None:
    plt.style.use(str(style_file))


def caption_text(caption: str, meta: dict) -> str:
    """The caption with its provenance: scale, data source, solver, seeds..."""
    details = "; ".join(f"{k}: {v}" for k, v in meta.items())
    return f"{caption} [{details}]" if details else caption


def save_figure(fig, pdf, png, csv, data, caption: str, meta: dict) -> None:
    """Write the figure (pdf, png) and exactly its plotted numbers (csv), each atomically.
    The caption and provenance go into the files' metadata."""
    text = caption_text(caption, meta)
    footnote = f"{meta.get('scale', '')} scale; " + "; ".join(
        f"{k}: {v}" for k, v in meta.items() if k != "scale")
    # Wrapped to the figure's width, so that a long provenance does not widen the image.
    width = max(60, int(fig.get_figwidth() * 72 / 6 * 1.7))
    fig.text(0.0, -0.02, textwrap.fill(footnote, width), fontsize=6, color="0.4",
             ha="left", va="top", transform=fig.transFigure)
    with atomic_path(pdf) as tmp:
        fig.savefig(tmp, format="pdf", metadata={"Title": Path(pdf).stem, "Subject": text,
                                                "CreationDate": None, "Producer": "pabench"})
    with atomic_path(png) as tmp:
        fig.savefig(tmp, format="png", metadata={"Title": Path(png).stem, "Description": text,
                                                "Software": "pabench"})
    plt.close(fig)
    write_csv(csv, data)
