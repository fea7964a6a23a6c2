"""Simulation: kube-scheduler's default model and the network-aware scheduler over arrays; rebalancing."""
