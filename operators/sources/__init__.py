"""Where snapshots come from: YAML/JSON files on disk (and, in the shells, the live API)."""
