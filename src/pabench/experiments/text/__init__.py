"""Text shifts of the PA paper (Appendix C, Figure 10): a DistilBERT sentiment classifier on IMDB
test reviews under Levenshtein, amplification and contradiction shifts, PA and accuracy per W."""
