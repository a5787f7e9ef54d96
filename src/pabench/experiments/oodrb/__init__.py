"""OODRobustBench (Li et al.): dataset and threat shifts, the ID-OOD analysis, PA under shift."""
