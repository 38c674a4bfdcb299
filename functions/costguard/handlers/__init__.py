"""Lambda entry points: thin, one per function."""
