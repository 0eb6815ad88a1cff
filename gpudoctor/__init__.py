"""gpudoctor: judge whether this machine can really compute on its NVIDIA GPUs."""

__version__ = "0.1.0"
