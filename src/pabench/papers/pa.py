"""The PA robustness paper (TMLR): every figure and table, once.  Its arXiv v1 is the overlay
workflow/config/arxiv-v1.yaml: the same registry with fewer attacks and another eps grid, so the
AutoAttack figures (14-18) are not enabled."""
from __future__ import annotations

from pabench.core import paths
from pabench.core.paths import UNBOUNDED, Eps
from pabench.experiments.adversarial import figures as adv_figures, plan as adv, tables as adv_tables
from pabench.experiments.dg import figures as dg_figures, plan as dg, tables as dg_tables
from pabench.experiments.diagvib import figures as diagvib_figures
from pabench.experiments.text import figures as text_figures, plan as text
from pabench.experiments.toy import figures as toy_figures
from pabench.reporting.registry import Entry, Paper

P = "pa"


def _diagvib(config: dict) -> dict:
    return config["diagvib"]


def _sf_split(split: str) -> str:
    return paths.diagvib_split("shift_factor", split)


def _dg_meta(config: dict, study: str = "shift-factor", **extra) -> dict:
    d = config["dg"]
    checkpoint = {"last": "last epoch", "best_acc": "epoch of best ID validation accuracy"}[d["evaluate"]]
    return {"data": dg.data_label(config, study), "backbone": d["backbone"],
            "model": f"{checkpoint}; BatchNorm recalibrated each epoch" if d.get("recalibrate_bn")
            else checkpoint, **extra}


def _ms_meta(config: dict, **extra) -> dict:
    """The model-selection tables' caption data: training length (the stopping rule), solvers."""
    ms = config["dg"]["model_selection"]
    stop = (f"until ID validation accuracy has not improved for {ms['patience']} epochs, at most "
            f"{ms['epochs']}" if ms.get("patience") else f"{ms['epochs']}")
    return _dg_meta(config, "model-selection", epochs=stop, **extra,
                    solver=f"adam ({config['dg']['pa_epochs']} epochs) and exact", seeds=config["dg"]["seeds"])


# ------------------------------------------------------------------ adversarial figures
def _ar_figure(name: str, attack: str, caption: str, dataset=None, main_ar_max=None) -> Entry:
    """PA and AFR_T against AR, one row per eps (Figures 3, 5, 14-18)."""
    ds = dataset or adv.main_dataset
    return Entry(
        P, name, adv_figures.ar_figure, "adversarial",
        caption + "; each line is the mean over the zoo's training seeds, shaded +- their standard "
        "deviation (a pretrained model runs once)",
        inputs=lambda c: {"tables": adv.score_tables(c, ds(c), [attack])},
        args=lambda c: {"attack": attack, "models": adv.models(c, ds(c)), "main_ar_max": main_ar_max},
        meta=lambda c: adv.figure_meta(c, [attack], ds(c)),
        enabled=lambda c: attack in adv.attack_settings(c, ds(c))
        and (ds(c) != "imagenet" or adv.imagenet_on(c)),
        **({"requires": _imagenet_folder} if dataset is _imagenet else {}),
        claims=_AR_CLAIMS.get(name, ()))


def _imagenet(config: dict) -> str:
    return "imagenet"


def _imagenet_folder(config: dict) -> str:
    """What to set where ImageNet is asked for without its images (Figures 17-18, models_imagenet)."""
    if adv.imagenet_on(config):
        return ""
    return ("adversarial.imagenet.folder is null; set it to a folder of ImageNet validation "
            "images in class subfolders (ImageFolder layout: the 1000 WordNet-id folders, "
            "n01440764/ ..., or folders named by class index 0-999 for a subset), e.g. in an "
            "overlay passed with --configfile: adversarial: {imagenet: {folder: /path/to/imagenet/val}}")


def _confidence_panels(config: dict, name: str) -> list[tuple[str, Eps, float]]:
    conf = Eps.of(config["adversarial"]["figures"]["confidence_eps"])
    return {"fig4": [("pgd", conf, 1.0)], "fig6": [("fmn", UNBOUNDED, 0.5)],
            "fig9": [("pgd", conf, 1.0), ("fmn", UNBOUNDED, 0.5), ("fmn", UNBOUNDED, 1.0)]}[name]


def _confidence_models(config: dict, name: str) -> list[str]:
    return (adv.models(config, adv.main_dataset(config)) if name == "fig9"
            else list(config["adversarial"]["figures"]["examples"]))


def _confidence_figure(name: str, caption: str) -> Entry:
    """Predictive confidence of correct and attacked samples, and the final betas (4, 6, 9)."""
    def attacks(c):
        return sorted({a for a, _, _ in _confidence_panels(c, name)})

    def inputs(c):
        ds = adv.main_dataset(c)
        records = sorted({paths.attack_record(ds, adv.first_run(c, m), a, e)
                          for a, e, _ in _confidence_panels(c, name) for m in _confidence_models(c, name)})
        return {"records": records, "tables": adv.score_tables(c, ds, attacks(c), first_seed=True)}

    return Entry(
        P, name, adv_figures.confidence_figure, "adversarial",
        caption + " (the zoo's first training seed)", inputs=inputs,
        args=lambda c: {"panels": _confidence_panels(c, name), "models": _confidence_models(c, name)},
        meta=lambda c: adv.figure_meta(c, attacks(c), adv.main_dataset(c), first_seed=True),
        enabled=lambda c: all(a in adv.attack_settings(c, adv.main_dataset(c)) for a in attacks(c)),
        claims=_CONFIDENCE_CLAIMS.get(name, ()))


def _models_table(dataset: str) -> Entry:
    """The models of one adversarial dataset (models_<dataset>)."""
    return Entry(
        P, f"models_{dataset}", adv_tables.models, "adversarial",
        "Models of the adversarial experiments: source (self-trained zoo or RobustBench), training "
        "method, architecture and clean accuracy on the attacked test images", kind="table",
        inputs=lambda c: {"table": paths.adv_table(dataset), "histories": adv.histories(c, dataset)},
        args=lambda c: {"models": adv.models(c, dataset), "zoo": c["adversarial"]["zoo"]},
        meta=lambda c: {"data": adv.DATASET_LABEL[dataset]},
        enabled=lambda c: dataset in adv.datasets(c),
        **({"requires": _imagenet_folder} if dataset == "imagenet" else {}))


def _both(*ids: str, other: str = "exact") -> tuple[str, ...]:
    """Claims checked with both PA solvers: each id and its `<id>-<other solver>` twin."""
    return (*ids, *(f"{i}-{other}" for i in ids))


# Claims (pabench.experiments.*.claims) each figure backs.
_AR_CLAIMS = {
    "fig3": (*_both("adv-pgd-undefended-lowest", "adv-pgd-undefended-decreasing", "adv-pgd-stronger-eps-lower",
                     "adv-pgd-afr-overestimates", "adv-pgd-jpeg-rs-weak"), "adv-ar0-ranking", "adv-exact-no-shift"),
    "fig5": _both("adv-fmn-afr-overestimates", "adv-fmn-jpeg-rs-best"),
    "fig14": _both("adv-apgd-top-defenses"),
    "fig17": _both("adv-imagenet-same-ranking", "adv-imagenet-afr-needs-large-ar"),
}
_CONFIDENCE_CLAIMS = {"fig4": _both("adv-pgd-undefended-lowest-beta", "adv-pgd-jpeg-rs-highest-beta")}


ENTRIES = (
    Entry(P, "fig1", toy_figures.fig1, "toy",
          "Figure 1: accuracy and PA of a perfect, a constant and a random binary classifier on "
          "Bernoulli(p) targets (mean +- std over seeds)",
          inputs=lambda c: {"table": paths.toy_table("bernoulli")},
          meta=lambda c: {"data": "simulated Bernoulli targets",
                          "n": c["toy"]["bernoulli"]["n_samples"],
                          "solver": ", ".join(c["toy"]["bernoulli"]["solvers"]),
                          "adam_epochs": c["toy"]["bernoulli"]["adam_epochs"],
                          "seeds": c["toy"]["bernoulli"]["seeds"]},
          claims=("toy-constant-is-robust", *_both("toy-random-is-not", "toy-accuracy-inconsistent", other="adam"))),
    Entry(P, "fig2", toy_figures.fig2, "toy",
          "Figure 2: Gibbs posteriors over a real-valued mean fit to two noisy samples, at beta "
          "too low, optimal (exact solver) and too high, and PA as a function of beta",
          inputs=lambda c: {"table": paths.toy_table("gaussian")},
          meta=lambda c: {"data": "simulated Gaussian samples",
                          "n": c["toy"]["gaussian"]["n_observations"], "solver": "exact",
                          "seeds": [c["toy"]["gaussian"]["seed"]]},
          claims=("toy-optimal-beta",)),
    _ar_figure("fig3", "pgd", "Figure 3: PA (left) and AFR_T (right) against the adversarial "
               "ratio AR, one row per eps, for the PGD attack"),
    _confidence_figure("fig4", "Figure 4: predictive confidence of the samples predicted "
                       "correctly before the attack (plain) and of the successfully attacked ones "
                       "(hatched), mean +- standard error, for three models under PGD at AR = 1; "
                       "below, the final beta of every model"),
    _ar_figure("fig5", "fmn", "Figure 5: PA (left) and AFR_T (right) against AR for the "
               "minimum-norm FMN attack: the main panel AR <= 0.5, the extra panel all ARs",
               main_ar_max=0.5),
    _confidence_figure("fig6", "Figure 6: predictive confidence (as Figure 4) and final betas "
                       "under FMN at AR = 0.5"),
    Entry(P, "fig7", dg_figures.fig7, "dg",
          "Figure 7: PA (adam solver, as the paper; and the exact solver) and AFR_T of ERM, IRM "
          "and LISA trained on env0/env1, tested against env0 on env1..env5 at shift ratios SR "
          "(mean over seeds)",
          inputs=lambda c: {"table": paths.DG_PA_TABLE},
          meta=lambda c: _dg_meta(c, epochs=c["dg"]["epochs"],
                                  solver=f"adam ({c['dg']['pa_epochs']} epochs) and exact",
                                  seeds=c["dg"]["seeds"]),
          claims=(*_both("dg-erm-irm-lisa", "dg-erm-above-irm-mild", "dg-pa-stable-at-5",
                         "dg-pa-separates-algorithms"), "dg-accuracy-falls")),
    Entry(P, "fig8", dg_figures.fig8, "dg",
          "Figure 8: average predictive confidence (max softmax, mean +- standard error) on env0 "
          "and on env k for #SF = 1..5, per algorithm, and the final beta (adam solver, SR = 1) at "
          "#SF = 5",
          inputs=lambda c: {"scores": [paths.dg_scores(r.algorithm, r.seed) for r in dg.runs(c)],
                            "pa": paths.DG_PA_TABLE},
          meta=lambda c: _dg_meta(c, solver=f"adam ({c['dg']['pa_epochs']} epochs)",
                                  seeds=c["dg"]["seeds"]),
          claims=("dg-lisa-most-confident", *_both("dg-lisa-highest-beta"))),
    _confidence_figure("fig9", "Figure 9: predictive confidence of every model: PGD at AR = 1, "
                       "FMN at AR = 0.5 and AR = 1"),
    Entry(P, "fig10", text_figures.fig10, "text",
          "Figure 10: PA (adam, solid; exact, dashed) and accuracy of a sentiment classifier on "
          "IMDB reviews against the shift power W (2^W replacements per review, capped at what "
          "a review has): Levenshtein (character insertions, deletions, substitutions), "
          "Amplification (words replaced by adjectives of the review's true sentiment) and "
          "Contradiction (adjectives of the opposite sentiment); the clean accuracy dotted. Paper "
          "scale: DistilBERT-base on IMDB's test reviews (downloaded). Quick scale, offline: the "
          "IMDB sentences of the UCI labelled sentences and a real cross-domain sentiment model, "
          "MiniLM sentence embeddings with a logistic-regression head trained on the Amazon and "
          "Yelp sentences; its posteriors are the head's logits",
          inputs=lambda c: {"table": paths.TEXT_TABLE},
          args=lambda c: {"strategies": list(c["text"]["strategies"])},
          meta=text.figure_meta, enabled=text.enabled,
          claims=_both("text-amplification-pa-not-accuracy", "text-levenshtein-contradiction-both-fall")),
    Entry(P, "fig11", dg_figures.fig11, "dg",
          "Figure 11: first principal component (scaled to [-1, 1]) of the penultimate features "
          "of 128 paired validation samples in env0 (red) and env1 (blue), coloured by class, for "
          "ERM and IRM at the first, middle and last epoch of their own runs (Appendix D: "
          "ResNet-18, Adam lr 1e-2, 50 epochs), trained on the shift-factor study's env0/env1",
          inputs=lambda c: {"stages": dg.stage_checkpoints(c), "val": _sf_split("val")},
          args=lambda c: {"algorithms": dg.pca_algorithms(c), "samples": 128,
                          "device": c["dg"]["device"]},
          meta=lambda c: {**_dg_meta(c, seeds=c["dg"]["seeds"][:1]), "backbone": c["dg"]["fig11"]["backbone"],
                          "model": "first, middle and last epoch", "training": f"Adam lr {c['dg']['fig11']['lr']:g}, {c['dg']['fig11']['epochs']} epochs"}),
    Entry(P, "fig12", diagvib_figures.fig12, "diagvib",
          "Figure 12: co-occurrence of the learning factor (hue) and the predicted factor (digit) "
          "in the training sources of each setting (x = the pair occurs), drawn from the config. "
          "k-CGO: the first k digits of (1, 7, 4) occur with both hues (our reading; the paper "
          "does not list the pairs)",
          args=lambda c: {"study": _diagvib(c)["studies"]["model_selection"]},
          meta=lambda c: {"data": "configuration"}),
    Entry(P, "fig13", diagvib_figures.fig13, "diagvib",
          "Figure 13: samples of the shift-factor study: training env0/env1 (different digit "
          "instances), validation env0/env1 and test env0..env5 (the same instances)",
          inputs=lambda c: {s: _sf_split(s) for s in ("train", "val", "test")},
          meta=lambda c: {"data": dg.data_label(c, "shift-factor"),
                          "seeds": [s["seed"] for s in
                                    _diagvib(c)["studies"]["shift_factor"]["splits"].values()]}),
    _ar_figure("fig14", "apgd-ce", "Figure 14: PA and AFR_T against AR and eps, APGD-CE"),
    _ar_figure("fig15", "apgd-dlr", "Figure 15: PA and AFR_T against AR and eps, APGD-DLR"),
    _ar_figure("fig16", "fab", "Figure 16: PA and AFR_T against AR and eps, FAB"),
    _ar_figure("fig17", "apgd-ce", "Figure 17: PA and AFR_T against AR and eps, APGD-CE on "
               "ImageNet", dataset=_imagenet),
    _ar_figure("fig18", "apgd-dlr-t", "Figure 18: PA and AFR_T against AR and eps, targeted "
               "APGD-DLR-T on ImageNet", dataset=_imagenet),
    Entry(P, "table1", dg_tables.table1, "model_selection",
          "Table 1: model selection with in-distribution validation: test accuracy (%) on Test "
          "1..5 of the epoch selected by validation accuracy, and the difference PA-selected minus "
          "accuracy-selected (with its std over seeds), for PA by the adam solver (as the paper) "
          "and by the exact one. A criterion whose best validation value is tied across epochs "
          "(log PA at its beta* = 0 floor in every epoch, say) selects no epoch: such seeds are "
          "counted (no PA / no acc. preference) and left out of the differences ('compared': the "
          "seeds where both criteria chose)", kind="table",
          inputs=lambda c: {"results": paths.MS_TABLE},
          args=lambda c: {"settings": [dg.ms_label(c, s) for s in dg.ms_settings(c)],
                          "tests": dg.ms_study(c)["splits"]["test"]["envs"],
                          "validation": dg.ms_label(c, c["dg"]["model_selection"]["validation"])},
          meta=lambda c: _ms_meta(c, validation=c["dg"]["model_selection"]["validation"]),
          claims=_both("ms-pa-selects-better", "ms-partial-go-gain", "ms-irm-benefits-more")),
    Entry(P, "selection_splits", dg_tables.selection_by_validation,
          "model_selection",
          "Model selection on each validation split of Table 3 (Appendix E: SD, ID, 1F-MD, 5F-MD, "
          "OOD): test accuracy (%) averaged over Test 1..5 of the epoch selected by validation "
          "accuracy and of the one selected by PA (adam and exact solver), and PA-selected minus "
          "accuracy-selected (mean and std over the seeds where both criteria chose an epoch; "
          "seeds without a preference counted); the same training runs as Table 1, each "
          "validated on every split",
          kind="table", enabled=lambda c: bool(dg.ms_also_validate(c)),
          inputs=lambda c: {"results": paths.MS_TABLE},
          args=lambda c: {"settings": [dg.ms_label(c, s) for s in dg.ms_settings(c)],
                          "tests": dg.ms_study(c)["splits"]["test"]["envs"],
                          "validations": [dg.ms_label(c, v) for v in
                                          [c["dg"]["model_selection"]["validation"], *dg.ms_also_validate(c)]]},
          meta=_ms_meta),
    Entry(P, "table2", diagvib_figures.table2, "diagvib",
          "Table 2: factors of the shift-factor environments (cumulative shifts; CC = "
          "center-center, LC = lower-center) and the average structural similarity (ASS) of each "
          "test environment to env0 over paired images", kind="table",
          inputs=lambda c: {"ass": paths.DIAGVIB_ASS},
          args=lambda c: {"study": _diagvib(c)["studies"]["shift_factor"],
                          "envs": _diagvib(c)["studies"]["shift_factor"]["splits"]["test"]["envs"]},
          meta=lambda c: {"data": dg.data_label(c, "shift-factor"),
                          "n": _diagvib(c)["studies"]["shift_factor"]["splits"]["test"]["n"]}),
    Entry(P, "table3", diagvib_figures.table3, "diagvib",
          "Table 3: environments of the model-selection study (hue is the learning factor; CC = "
          "center-center, UL = upper-left). Training sources: env 0 red, env 1 blue; the "
          "co-occurrence settings choose the digits each source shows: ZGO red 1,4 / blue 7,9; "
          "k-CGO the first k digits of (1, 7, 4) with both hues; ZSO all digits with both (our "
          "reading of Figure 12). Validation pairs share digit instances; Test 1-5 are the "
          "cumulative shifts of Table 2", kind="table",
          args=lambda c: {"study": _diagvib(c)["studies"]["model_selection"]},
          meta=lambda c: {"data": "configuration",
                          "n": {s: v["n"] for s, v in
                                _diagvib(c)["studies"]["model_selection"]["splits"].items()}}),
    _models_table("mnist32"),
    _models_table("cifar10"),
    _models_table("imagenet"),
)


def _datasets(config: dict) -> list[str]:
    """Beside the figures: every rendered DiagViB-6 split and the shift-ratio views."""
    return [paths.SHIFT_RATIO_VIEWS] + [paths.diagvib_split(study, split)
                                        for study, cfg in config["diagvib"]["studies"].items()
                                        for split in cfg["splits"]]


def _claim_tables(config: dict) -> dict:
    """The tidy tables the claims are checked on, by the names the claims use."""
    tables = {"toy_bernoulli": paths.toy_table("bernoulli"), "toy_gaussian": paths.toy_table("gaussian"),
              "dg": paths.DG_PA_TABLE, "model_selection": paths.MS_TABLE,
              "adversarial": paths.adv_table(adv.main_dataset(config))}
    if adv.imagenet_on(config):
        tables["imagenet"] = paths.adv_table("imagenet")
    if text.enabled(config):
        tables["text"] = paths.TEXT_TABLE
    return tables


PAPER = Paper(P, "PA robustness paper (TMLR)", ENTRIES, extra_targets=_datasets,
              claim_modules=("pabench.experiments.toy.claims", "pabench.experiments.adversarial.claims",
                             "pabench.experiments.dg.claims", "pabench.experiments.text.claims"),
              claim_tables=_claim_tables)
