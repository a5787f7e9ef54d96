"""Tools around runs: compare two runs (compare, seedspread, tolerances), kill and resume them
(campaign), rehearse the paper scale (rehearsal), count its compute (workload) and check a Slurm
cluster before submitting (cluster)."""
