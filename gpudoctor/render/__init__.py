"""Renderers present a report. They never judge and never query the system."""
