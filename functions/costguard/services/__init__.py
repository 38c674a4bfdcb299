"""Use cases, wired from ports only."""
