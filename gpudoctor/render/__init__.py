"""Renderers present a report. They never judge and never query the system.

Every string in a report is untrusted data (a GPU name, a framework's error, a file name): each
renderer but JSON shows it through ``render/safe.py``, never raw."""
