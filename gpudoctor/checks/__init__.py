"""Checks judge a snapshot into findings. They never probe the system."""
