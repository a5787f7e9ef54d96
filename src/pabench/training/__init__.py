"""Training: objectives (ERM, IRM, LISA) and the epoch loop with validation PA."""
