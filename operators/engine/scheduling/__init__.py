"""Scheduling: the plugins (NetworkOverhead, NetworkBandwidth, NodeResourcesAllocatable), the cycle, its config."""
