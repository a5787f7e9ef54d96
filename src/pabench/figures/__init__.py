"""Figure rendering: one module per figure family, all sharing `common`."""
