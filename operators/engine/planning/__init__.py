"""Whole-AppGroup placement plans: the problem (``problem``), the planner (``search``), its report (``plan``) and the
exact reference (``exact``, the ``exact`` extra)."""
