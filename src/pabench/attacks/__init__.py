"""Adversarial-robustness experiments of the PA paper (Section 4.1)."""
