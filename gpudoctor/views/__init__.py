"""Derived views of a snapshot: pure functions of the facts that more than one reader needs.

A check judges facts into findings; a renderer shows facts and findings. Both often need the same
reading of the facts first: which GPUs a CUDA program sees (visibility.py), how two GPUs are linked and
which pair copies slowest (topology.py), the environment variable that keeps a framework off the GPU
(framework_env.py), the driver's CUDA version (driver.py). A framework's names are gpudoctor/frameworks_table.py's.
Those readings live here, once, so no check imports another check and no module outside render/
imports a renderer.

This layer sits just above the snapshot: it imports only gpudoctor.snapshot, codes, findings and
compat, never checks, render, cli or probes (tests/test_readonly.py holds it to that).
"""
