"""The node agent: enforces the NodeSLO network QoS classes in the kernel and measures their use."""
