"""CRD models, quantities, label and annotation keys: the vocabulary of netaware."""
