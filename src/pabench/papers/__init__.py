"""The papers the workflow reproduces: one registry each (pabench.reporting.registry)."""
from pabench.papers.avgcase import PAPER as AVGCASE
from pabench.papers.oodrb import PAPER as OODRB
from pabench.papers.pa import PAPER as PA
from pabench.papers.thesis import PAPER as THESIS

PAPERS = {p.key: p for p in (PA, AVGCASE, OODRB, THESIS)}
