"""The cluster as the rooms below see it: the snapshot, selectors, conditions, the bandwidth model."""
