"""Compatibility: will this driver, these GPUs, this OS and these framework builds work together?

data.py     the bundled matrix (compat_matrix/*.json, installed as gpudoctor.compat_matrix), --matrix overlays, and
            Matrix, the two as one value that every function reading a table is given as its first parameter
rules.py    pure verdicts over versions: driver vs CUDA, GPU vs compiled architectures, toolkit vs GPU, lookups
model.py    a Stack (driver, GPUs, builds, toolkit, OS, Python) and its Builds, and this layer's finding()
stack.py    judge_stack, the one judge behind `check`, `analyze` and `matrix check`; builds from the matrix;
            fitting_torch (FWK001's command, `matrix suggest`)
torch_pip.py  the pip arguments that install one PyTorch build, in the form of its release's era
jax_wheels.py a jaxlib wheel named by its local version (+cuda111) and each JAX build's cuDNN floor
known_bad.py  the sourced known-bad combinations (compat_matrix/known_bad.json): CMP009
from_facts.py the Stack a snapshot describes (`check`, `analyze`)
queries.py  what `gpudoctor matrix check / suggest / show` ask, without printing (cli/matrix.py prints)

Imports flow one way: snapshot -> compat -> checks -> render -> cli. Nothing here imports checks/, render/
or cli/, so a check, a renderer and the CLI can all ask the same rules.
"""
