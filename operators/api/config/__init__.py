"""Configuration types, one place: the scheduler plugins' args, the descheduler policy, the controllers' options."""
