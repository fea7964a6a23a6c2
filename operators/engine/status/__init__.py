"""Status computations: topology order, AppGroup and NetworkTopology status, netperf costs, NodeSLOs."""
