"""The workflow runtime: what runs a job (workflow.job), serves its W&B run (tracking), forks its
script from a warm process (jobserver), sets the jobs' malloc (allocator) and shows the runs
(dashboard)."""
