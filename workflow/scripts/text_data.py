"""Rule text_data: the test reviews, a seeded class-balanced subset of them kept as JSON: the IMDB
sentences of the UCI labelled sentences (text.data: sentences), or IMDB's test reviews
(downloaded and MD5-checked, or a local archive)."""
from pabench.runtime.jobserver import delegate; delegate()  # noqa: E702 - first (runtime.jobserver)
import collections

from pabench.datasets import imdb, sentences
from pabench.runtime.workflow import job

with job(snakemake) as run:  # noqa: F821 - `snakemake` is injected by Snakemake
    smk = snakemake  # noqa: F821
    settings = smk.params.source
    if smk.params.data == "sentences":
        source = sentences.corpus_folder(settings["folder"]) / "imdb.json"
        reviews = sentences.read_sentences(settings["folder"], "imdb")
    else:
        source = imdb.imdb_archive(settings["root"], settings["archive"], settings["url"], settings["md5"])
        reviews = imdb.read_split(source, "test")
    chosen = imdb.balanced_subset(reviews, smk.params.n, smk.params.seed)
    imdb.save_reviews(smk.output.reviews, chosen, str(source))
    counts = collections.Counter(imdb.CLASSES[r.label] for r in chosen)
    run.log({"reviews_in_source": len(reviews), "reviews": len(chosen), **counts,
             "mean_characters": sum(len(r.text) for r in chosen) / len(chosen)})
