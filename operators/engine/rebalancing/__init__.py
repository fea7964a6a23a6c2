"""Adaptive rebalancing: running pods moved to better places (the plan and the descheduler's safety)."""
