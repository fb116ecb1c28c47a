"""Helpers of scripts/compat.py: the suites, the allowlist and the report."""
