"""pabench: reproduce the Posterior Agreement robustness papers end to end."""
__version__ = "0.1.0"
