"""Rule text_data: the IMDB test reviews (downloaded and MD5-checked, or a local archive), a
seeded class-balanced subset of them kept as JSON."""
from pabench.jobserver import delegate; delegate()  # noqa: E702 - first: see pabench.jobserver
import collections

from pabench.datasets import imdb
from pabench.workflow import job

with job(snakemake) as run:  # noqa: F821 - `snakemake` is injected by Snakemake
    smk = snakemake  # noqa: F821
    settings = smk.params.imdb
    archive = imdb.imdb_archive(settings["root"], settings["archive"], settings["url"], settings["md5"])
    reviews = imdb.read_split(archive, "test")
    chosen = imdb.balanced_subset(reviews, smk.params.n, smk.params.seed)
    imdb.save_reviews(smk.output.reviews, chosen, str(archive))
    counts = collections.Counter(imdb.CLASSES[r.label] for r in chosen)
    run.log({"reviews_in_archive": len(reviews), "reviews": len(chosen), **counts,
             "mean_characters": sum(len(r.text) for r in chosen) / len(chosen)})
