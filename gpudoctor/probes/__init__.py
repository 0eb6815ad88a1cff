"""Probes gather facts into the snapshot. They never judge: no severities, no advice."""
