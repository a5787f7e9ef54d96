"""A W&B workspace for the project: one section per experiment (W&B run group) and, for every
figure, a panel with its image and a panel with its numbers (the wandb.Table the figure rule
logged); tables and the claims check get a table panel.

The panel specification is built from the runs the workflow logged (their local run directories),
so it needs no network and is what the tests check; only `save` talks to W&B.
"""
from __future__ import annotations

import os

from pabench.runtime.tracking import base_url, has_credentials, local_runs, reachable

# Sections in reading order; other groups follow alphabetically.
SECTION_ORDER = ("toy", "diagvib", "dg", "model_selection", "adversarial", "checks")


def panel_spec(runs: list[dict]) -> dict[str, list[tuple[str, str]]]:
    """{run group: [("image", key) | ("table", key), ...]} from the runs' logged media: every
    image key gets an image panel followed by a table panel of its numbers (key + "_data")."""
    media: dict[str, dict[str, str]] = {}
    for run in runs:
        if run.get("group"):
            media.setdefault(run["group"], {}).update(run.get("media", {}))
    spec = {}
    for group in sorted(media, key=lambda g: (SECTION_ORDER.index(g) if g in SECTION_ORDER
                                              else len(SECTION_ORDER), g)):
        keys = media[group]
        panels = []
        for key in sorted(k for k, kind in keys.items() if kind == "image-file"):
            panels.append(("image", key))
            if keys.get(f"{key}_data") == "table-file":
                panels.append(("table", f"{key}_data"))
        shown = {k for _, k in panels}
        panels += [("table", k) for k in sorted(keys) if keys[k] == "table-file" and k not in shown
                   and _is_result_table(k)]
        if panels:
            spec[group] = panels
    return spec


def _is_result_table(key: str) -> bool:
    """Tables worth a panel: the papers' tables, the claims check and the timings (not the
    per-job training histories or intermediate tidy tables)."""
    return key.startswith(("table", "models", "claims", "timings"))


def build_workspace(spec: dict, entity: str, project: str, name: str = "pabench figures"):
    """The wandb_workspaces Workspace of a panel spec (no network)."""
    import wandb_workspaces.reports.v2 as wr
    import wandb_workspaces.workspaces as ws

    sections = []
    for group, panels in spec.items():
        objs = [wr.MediaBrowser(title=key, media_keys=[key], num_columns=1) if kind == "image"
                else wr.WeavePanelSummaryTable(table_name=key) for kind, key in panels]
        sections.append(ws.Section(name=group, panels=objs, is_open=True,
                                   layout_settings=ws.SectionLayoutSettings(
                                       columns=2, rows=max(1, (len(objs) + 1) // 2))))
    return ws.Workspace(entity=entity, project=project, name=name, sections=sections,
                        runset_settings=ws.RunsetSettings(groupby=[ws.Metric("Group")]))


def save(spec: dict, entity: str, project: str, name: str, url: str | None = None) -> str:
    """Create the workspace (or update the one at `url`) on W&B; returns its URL.  Raises
    RuntimeError with the reason when there are no credentials or W&B cannot be reached."""
    if not has_credentials():
        raise RuntimeError("no W&B credentials: set WANDB_API_KEY or run `wandb login`")
    if not reachable(base_url()):
        raise RuntimeError(f"{base_url()} cannot be reached (no network?); nothing was saved")
    os.environ.setdefault("WANDB_HTTP_TIMEOUT", "10")  # fail fast when W&B is unreachable
    try:
        workspace = build_workspace(spec, entity, project, name)
        if url:
            import wandb_workspaces.workspaces as ws
            existing = ws.Workspace.from_url(url)
            existing.sections = workspace.sections
            existing.runset_settings = workspace.runset_settings
            workspace = existing
        workspace.save()
        return workspace.url
    except Exception as err:  # noqa: BLE001 - report why, without a traceback
        raise RuntimeError(f"could not save the workspace ({type(err).__name__}: {err})") from None


def spec_from_dir(directory) -> dict:
    runs = local_runs(directory)
    if not runs:
        raise FileNotFoundError(f"{directory}: no W&B run directories (run the workflow first)")
    return panel_spec(runs)
