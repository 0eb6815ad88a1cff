"""Process supervision: child processes with hard time limits, the pipe they report on, how they end,
and the warden that ends whatever gpudoctor started once gpudoctor is gone.

It sits below probes/: the probes, the runner and the command line start children through it, and it
imports none of them. At module level its modules import only the standard library, each other and
trace.py, because children running under the diagnosed interpreter import parts of it.
"""
