"""The pieces of scripts/chaos.py: schedule, accounting, network, cluster, clients, run."""
