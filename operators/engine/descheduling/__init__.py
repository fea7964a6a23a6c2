"""Descheduling: the LowNodeLoad policy, node usage, evictability and the planner."""
