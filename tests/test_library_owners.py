"""Which pip wheel installed each CUDA library copy (probes/libraries.py ``_attach_distributions``).

The wheels' layout is the real one: PyPI's nvidia-cudnn-cu13 9.19.0.56 (the version torch 2.11.0+cu130 pins,
recorded on nvidia-h100-x1 2026-11-23, tests/fixtures/real/h100x1-20261123/build_facts.txt) installs
``nvidia/cudnn/lib/libcudnn.so.9`` and lists it in its RECORD; torch lists ``torch/lib/*.so`` in its own.
"""

from __future__ import annotations

from pathlib import Path

from gpudoctor.probes import libraries


def _wheel(site: Path, dist_info: str, name: str, version: str, files: list[str]) -> None:
    info = site / dist_info
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nSummary: x\n\nlong text\nName: not-this\n")
    record = []
    for rel in files:
        path = site / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"\x7fELF")
        record.append(f"{rel},sha256=abc,4")
    (info / "RECORD").write_text("\n".join(record + [f"{dist_info}/RECORD,,"]) + "\n")


def test_each_copy_names_the_wheel_that_installed_it(tmp_path):
    site = tmp_path / "site-packages"
    _wheel(site, "nvidia_cudnn_cu13-9.19.0.56.dist-info", "nvidia-cudnn-cu13", "9.19.0.56",
           ["nvidia/cudnn/lib/libcudnn.so.9", "nvidia/cudnn/include/cudnn.h"])
    _wheel(site, "torch-2.11.0.dist-info", "torch", "2.11.0", ["torch/lib/libc10_cuda.so", "torch/__init__.py"])
    _wheel(site, "numpy-2.3.0.dist-info", "numpy", "2.3.0", ["numpy.libs/libcudart.so.13"])  # never an owner
    copies = {str(p): libraries._entry(str(p)) for p in (site / "nvidia/cudnn/lib/libcudnn.so.9",
                                                         site / "numpy.libs/libcudart.so.13")}
    libraries._attach_distributions(copies, [str(site)])
    owned = {Path(p).name: e.get("distribution") for p, e in copies.items()}
    assert owned == {"libcudnn.so.9": {"name": "nvidia-cudnn-cu13", "version": "9.19.0.56"}, "libcudart.so.13": None}


def test_a_broken_dist_info_is_skipped(tmp_path):
    site = tmp_path / "site-packages"
    (site / "nvidia_nccl_cu13-2.28.9.dist-info").mkdir(parents=True)  # no METADATA, no RECORD
    copies = {"/x/libnccl.so.2": libraries._entry("/x/libnccl.so.2")}
    libraries._attach_distributions(copies, [str(site)])
    assert "distribution" not in copies["/x/libnccl.so.2"]


def test_family_of_is_the_first_family_pattern_that_matches():
    """family_of looks a name up by its stem (ldconfig -p lists thousands of libraries); it must answer as trying
    every family's pattern in order does, on real names, near misses and random ones."""
    import random

    from gpudoctor.probes.libnames import FAMILIES, family_of

    def by_patterns(name: str):
        return next((family for family, pattern in FAMILIES.items() if pattern.match(name)), None)

    names = ["libcuda.so.1", "libcuda.so.580.159.04", "libcudart.so.13.0.96", "libcublasLt.so.13", "libcublas.so.13",
             "libcudnn.so.9", "libcudnn_ops.so.9.14.0", "libcudnn_ops_infer.so.8.9.7", "libnccl.so.2", "libnvrtc.so.13",
             "libnvJitLink.so.13", "libcusparse.so.12", "libcusparseLt.so.0", "libnvrtc-builtins.so.13.0", "libc.so.6",
             "libcuda.so", "libcudnn_.so.9", "libcudnn_a.b.so.9", "libcuda.so.1.bak", "libcuda.so..1", "libcudnnX.so.9",
             "libcudnn_adv.so.9.so", "cuda.so", "libcuda.so.1.so.2", "libcudnn_é.so.9"]
    rng = random.Random(20261123)
    names += ["".join(rng.choice("libcudasonrtJL._-0123456789x") for _ in range(rng.randint(3, 22))) for _ in range(20000)]
    assert sum(by_patterns(n) is not None for n in names) == 14  # 12 sonames, the bare libcuda.so and libcudnn_é.so.9
    assert [family_of(n) for n in names] == [by_patterns(n) for n in names]
