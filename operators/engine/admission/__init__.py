"""Admission rules: the bandwidth annotations the webhook adds to a pod."""
