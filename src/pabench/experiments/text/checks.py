"""Config checks of the text-shift experiment that the schema cannot express."""
from __future__ import annotations

from pabench.core.config import checks
from pabench.datasets.imdb import REVIEWS_PER_CLASS
from pabench.datasets.sentences import PER_DOMAIN
from pabench.experiments.text.shifts import MAX_POWER, STRATEGIES


@checks
def text(config: dict) -> list[str]:
    """Strategies, powers and sizes, named by key (the schema also bounds them; these checks
    say the same where a config reaches the code without the schema)."""
    t = config.get("text")
    if not t:
        return []
    errors = [f"text.strategies: unknown strategy {s!r}; valid: {', '.join(STRATEGIES)}"
              for s in t["strategies"] if s not in STRATEGIES]
    errors += [f"text.powers: W = {w!r} is not an integer in 0..{MAX_POWER} (2^W replacements)"
               for w in t["powers"] if isinstance(w, bool) or not isinstance(w, int)
               or not 0 <= w <= MAX_POWER]
    sentences = t["data"] == "sentences"
    n, most = t["n"], PER_DOMAIN if sentences else 2 * REVIEWS_PER_CLASS
    if n is not None and n < 2:
        errors.append(f"text.n: {n} reviews cannot hold both classes (need n >= 2, or null: all)")
    if n is not None and n > most:
        errors.append(f"text.n: {n} exceeds the {most} "
                      f"{'IMDB sentences' if sentences else 'IMDB test reviews'} (null: all of them)")
    if t["head"] and not sentences:
        errors.append(f"text.head: a {t['head']} head is trained on the labelled sentences "
                      "(text.data: sentences); with text.data: imdb, text.head must be null and "
                      "text.model a sequence classifier")
    imdb = t["imdb"]
    if not sentences and not imdb["md5"] and not imdb["archive"]:
        errors.append("text.imdb.md5: a download needs the archive's MD5 (null only with "
                      "text.imdb.archive, a local file read as it is)")
    return errors
