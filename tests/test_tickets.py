"""`gpudoctor analyze` on whole tickets in every form (tests/fixtures/tickets/, each with its source link and
what its thread established in index.json): framework and CUDA messages, container and nvidia-smi errors,
issue templates, environment scripts, Python sessions, tool output.

The corpus is judged as the lead reads it: agreement with each thread, false errors (the worst defect:
none allowed), missed errors and unread tickets (exit 2) are counted; the counts are asserted as floors
so that a reader that stops working fails here. Then each form's reader is held to what its lines say.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gpudoctor.cli import cli
from gpudoctor.pastes.detect import find_pastes
from gpudoctor.pastes.forms import messages, observed, rocm, session, templates, tools

TICKETS = Path(__file__).parent / "fixtures" / "tickets"
INDEX = json.loads((TICKETS / "index.json").read_text(encoding="utf-8"))
PASTES = Path(__file__).parent / "fixtures" / "pastes"


def analyze(*args: str) -> tuple[int, dict[str, Any], str]:
    result = CliRunner().invoke(cli, ["analyze", "--format", "json", *args])
    assert result.exit_code in (0, 1, 2), result.output
    report = json.loads(result.stdout) if result.stdout.strip().startswith("{") else {}
    return result.exit_code, report, result.stderr


def outcome(row: dict[str, Any]) -> str:
    """agree / false_error / missed / unread, against the thread's outcome; an AMD ROCm ticket (``scope``: rocm)
    is ``outside`` when it is said to be outside gpudoctor's NVIDIA checks and judged by none of them."""
    code, report, _ = analyze(str(TICKETS / row["file"]))
    if code == 2:
        return "unread"
    is_error = report["summary"]["verdict"] == "error"
    if row.get("scope") == "rocm" and not is_error and {f["code"] for f in report["findings"]} == {"FWK210"}:
        return "outside"
    if is_error and row["expected"] == "not_error":
        return "false_error"
    if not is_error and row["expected"] == "error":
        return "missed"
    return "agree"


# --- the corpus ---------------------------------------------------------------------------------------

def test_the_corpus_is_real_new_and_described() -> None:
    files = {p.name for p in TICKETS.iterdir()} - {"index.json"}
    assert files == {row["file"] for row in INDEX}
    assert all(row["source"].startswith("https://github.com/") and row["established"] for row in INDEX)
    assert {row["expected"] for row in INDEX} <= {"error", "not_error"}
    assert {row.get("scope", "nvidia") for row in INDEX} <= {"nvidia", "rocm"}
    assert sum(row["whole_body"] for row in INDEX) * 2 >= len(INDEX)  # at least half are whole issue bodies
    old = {(PASTES / name).read_text(encoding="utf-8").strip() for name in {p.name for p in PASTES.iterdir()} - {"index.json"}}
    assert not any((TICKETS / row["file"]).read_text(encoding="utf-8").strip() in old for row in INDEX)


@pytest.mark.parametrize("row", [r for r in INDEX if r["expected"] == "not_error"], ids=lambda r: r["file"])
def test_no_false_error_on_a_healthy_ticket(row: dict[str, Any]) -> None:
    assert outcome(row) != "false_error"


def test_corpus_agreement() -> None:
    """The figures of the closing note; floors, so a reader that regresses fails here."""
    counts = Counter(outcome(row) for row in INDEX)
    print(dict(counts), "of", len(INDEX))
    assert counts["false_error"] == 0
    assert counts["agree"] >= 201 and counts["unread"] <= 13
    assert counts["outside"] == sum(row.get("scope") == "rocm" for row in INDEX)  # every ROCm ticket, and no other


# --- each form, read from its real ticket -------------------------------------------------------------

def _lines(name: str) -> list[str]:
    return (TICKETS / name).read_text(encoding="utf-8").split("\n")


def test_pytorch_architecture_warning_names_gpu_arch_and_build_list() -> None:
    code, report, _ = analyze(str(TICKETS / "pytorch-45028-comment.md"))
    finding = next(f for f in report["findings"] if f["code"] == "FWK201")
    assert code == 1 and "A100-SXM4-40GB (sm_80)" in finding["title"] and "sm_37 sm_50 sm_60 sm_70" in finding["title"]
    assert "pytorch-45028-comment.md, line 4" in finding["detail"]  # where it was read
    assert report["facts"]["nvml"]["driver_version"] == "450.119.03"  # the table below it is read too
    item = report["facts"]["evidence"][0]
    assert item["kind"] == "gpu_arch_unsupported" and item["form"] == "messages" and item["sm"] == "sm_80"


def test_driver_too_old_gives_the_driver_cuda() -> None:
    (item,) = messages.read(_lines("fastfcn-37.md"))["evidence"]
    assert item["kind"] == "driver_too_old" and item["driver_cuda"] == "9.0" and item["line"] == 9
    _, report, _ = analyze(str(TICKETS / "fooocus-1313.md"))
    assert {f["code"] for f in report["findings"]} == {"FWK202"}


def test_cudnn_mismatch_in_both_spellings() -> None:
    (old,) = messages.read(_lines("tf-faster-rcnn-436.md"))["evidence"]
    (new,) = messages.read(_lines("kohya-ss-2787.md"))["evidence"]
    assert (old["loaded"], old["built"]) == ("7201", "7004") and (new["loaded"], new["built"]) == ("8.7.0", "8.9.4")


def test_tensorflow_dlopen_lines() -> None:
    kinds = [(e["kind"], e.get("library")) for e in messages.read(_lines("nvidia-tensorflow-110.md"))["evidence"]]
    assert kinds == [("library_not_loaded", "libcusolver.so.11"), ("dlopen_failed", None)]


def test_container_and_nvidia_smi_errors() -> None:
    _, report, _ = analyze(str(TICKETS / "llamafactory-5268.md"))
    assert {f["code"] for f in report["findings"]} == {"CTR007"}
    _, report, _ = analyze(str(TICKETS / "workspace-19.md"))
    assert report["facts"]["nvml"]["init"]["reason"] == "unknown"
    assert "device handle" in report["facts"]["nvml"]["init"]["message"]


def test_driver_610_header_is_read() -> None:
    code, report, _ = analyze(str(TICKETS / "mistral-rs-2287.md"))
    assert code == 0 and report["facts"]["nvml"]["driver_version"] == "610.43.02"
    assert report["facts"]["nvml"]["cuda_driver_version"] == 13030


def test_tensorflow_issue_form_on_native_windows() -> None:
    values = templates.read(_lines("tensorflow-85006.md"))
    assert values["tensorflow_version"] == "2.18.0" and values["os"] == "Windows 11 24h2" and values["gpu_model"] == "4080 RTX"
    code, report, _ = analyze(str(TICKETS / "tensorflow-85006.md"))
    assert code == 1 and {f["code"] for f in report["findings"]} == {"CMP009"}
    assert report["facts"]["host"]["os"] == "Windows" and report["facts"]["gpus"][0]["stated"] is True


def test_transformers_env_gives_is_available() -> None:
    values = templates.read(_lines("transformers-9580.md"))
    assert values["torch_version"] == "1.7.0+cu101" and values["torch_cuda_available"] is True
    _, report, _ = analyze(str(TICKETS / "transformers-9580.md"))
    torch = report["facts"]["frameworks"]["torch"]["info"]
    assert torch["built_cuda"] == "10.1" and torch["cuda_available"] is True


def test_jax_environment_info() -> None:
    values = templates.read(_lines("jax-12213-gpu.md"))
    assert values["jax_version"] == "0.3.17" and values["jaxlib_version"] == "0.3.15" and values["jax_devices"] == "gpu"
    assert templates.read(_lines("jax-12213-cpu.md"))["jax_devices"] == "cpu"


def test_cupy_show_config() -> None:
    values = templates.read(_lines("cupy-3768.md"))
    assert values["cupy_version"] == "8.0.0" and values["cupy_driver_cuda"] == "11.0"


def test_nvcc_and_pip_list() -> None:
    values = tools.read(_lines("tensorflow-73368.md"))
    assert values["nvcc"] == "12.5" and values["nvcc_full"] == "12.5.40"
    values = tools.read(_lines("jax-20722.md"))
    assert [(p["name"], p["version"]) for p in values["packages"]] == [("jax", "0.4.26"), ("jaxlib", "0.4.26+cuda12.cudnn89")]


def test_repl_session_is_read_with_its_lines() -> None:
    lines = [">>> import torch", ">>> torch.cuda.get_arch_list()", "['sm_37', 'sm_50', 'sm_60', 'sm_70']",
             ">>> torch.cuda.is_available()", "True", "$ python -c \"import torch; print(torch.__version__, torch.version.cuda)\"",
             "1.12.0 10.2"]
    values = session.read(lines)
    assert values["torch_arch_list"] == ["sm_37", "sm_50", "sm_60", "sm_70"] and values["torch_cuda_available"] is True
    assert values["torch_version"] == "1.12.0" and values["torch_cuda"] == "10.2"
    assert [e["line"] for e in values["evidence"]] == [3, 5, 7, 7]


def test_work_that_reached_the_gpu_is_read_as_a_working_stack() -> None:
    """An out-of-memory, tensors on two devices and a kernel's assertion: CUDA started there, so the ticket is
    read (not "nothing to judge"), the verdict is no error, and the note says what the program should change."""
    for name, how in (("pytorch-59778.md", "out_of_memory"), ("traphic-1.md", "device_mismatch"),
                      ("ultralytics-4160.md", "device_assert"), ("elixir-nx-xla-32.md", "out_of_memory"),
                      ("qwen-295.md", "out_of_memory")):
        code, report, _ = analyze(str(TICKETS / name))
        worked = [f for f in report["findings"] if f["code"] == "FWK208"]
        assert code == 0 and report["summary"]["verdict"] != "error" and worked, name
        assert any(e.get("how") == how for e in report["facts"]["evidence"] if e["kind"] == "gpu_worked"), name
    (item,) = messages.read(_lines("pytorch-59778.md"))["evidence"]
    assert (item["asked"], item["gpu"], item["total"]) == ("2.26 GiB", "GPU 0", "6.00 GiB")


def test_work_on_the_gpu_counts_as_pytorchs_cuda_started(tmp_path: Path) -> None:
    """A cu124 build under driver 470 would be CMP001 by the matrix; an out-of-memory from its allocator shows
    CUDA started there (forward compatibility), so the evidence outranks the rule."""
    env = COLLECT_ENV.replace("Is CUDA available: {available}\n", "")
    oom = ("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 79.15 GiB total "
           "capacity; 78.90 GiB already allocated)")
    path = tmp_path / "body.md"
    path.write_text(f"```\n{env}```\n", encoding="utf-8")
    _, report, _ = analyze(str(path))
    assert "CMP001" in {f["code"] for f in report["findings"]}
    path.write_text(f"```\n{env}```\n\n```\n{oom}\n```\n", encoding="utf-8")
    code, report, _ = analyze(str(path))
    assert report["facts"]["frameworks"]["torch"]["info"]["cuda_available"] is True
    assert code == 0 and "CMP001" not in {f["code"] for f in report["findings"]}


def test_work_on_the_gpu_keeps_a_prose_cuda_from_being_judged_as_a_toolkit(tmp_path: Path) -> None:
    """"driver 470, CUDA 12.1" beside an out-of-memory: the CUDA that ran is the framework's, so no CMP006."""
    path = tmp_path / "body.md"
    oom = "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 23.69 GiB total capacity)"
    path.write_text(f"My setup: RTX 3090, driver 470.82, CUDA 12.1, torch 2.1.0\n\n```\n{oom}\n```\n", encoding="utf-8")
    code, report, stderr = analyze(str(path))
    assert code == 0 and report["summary"]["verdict"] != "error" and "toolkit" not in report["facts"]
    assert "not judged as a toolkit" in stderr
    path.write_text("My setup: RTX 3090, driver 470.82, CUDA 12.1, torch 2.1.0\n", encoding="utf-8")
    _, report, _ = analyze(str(path))
    assert report["facts"]["toolkit"]["nvcc"]["release"] == "12.1"  # without the work, prose still names a toolkit


def test_nvidia_smi_failures_quoted_in_prose_are_read() -> None:
    code, report, _ = analyze(str(TICKETS / "nvidia-docker-1678.md"))
    assert code == 1 and report["facts"]["nvml"]["init"] == {"ok": False, "reason": "unknown", "code": None,
                                                              "message": "Failed to initialize NVML: Unknown Error"}
    code, report, _ = analyze(str(TICKETS / "gpu-passthrough-4.md"))
    assert code == 1 and report["facts"]["nvml"]["device_count"] == 0 and "DRV012" in {f["code"] for f in report["findings"]}
    assert messages.read(["I no longer see No devices were found from nvidia-smi"]) is None
    assert messages.read(["No devices were found in the list"]) is None  # the phrase counts with nvidia-smi named


def test_cuda_errors_802_and_no_binary_for_gpu() -> None:
    for name in ("jax-24866.md", "gpu-burn-92.md", "pytorch-35710-comment.md"):
        code, report, _ = analyze(str(TICKETS / name))
        found = {f["code"]: f for f in report["findings"]}
        assert code == 1 and "DRV022" in found and "nvidia-fabricmanager" in " ".join(found["DRV022"]["remediation"]["commands"])
    for name in ("pyrit-460.md", "rust-gpu-tools-79.md"):
        code, report, _ = analyze(str(TICKETS / name))
        assert code == 1 and "CUDA_ERROR_NO_BINARY_FOR_GPU" in next(f["title"] for f in report["findings"] if f["code"] == "FWK201")


def test_cuda_error_999_from_a_real_thread() -> None:
    """PyTorch's "CUDA unknown error" after suspend and resume: DRV023, whose fix reloads nvidia_uvm or reboots."""
    code, report, _ = analyze(str(TICKETS / "pytorch-88639.md"))
    (found,) = report["findings"]
    assert code == 1 and found["code"] == "DRV023" and "(999)" in found["title"]
    assert any("nvidia_uvm" in c for c in found["remediation"]["commands"])


def test_a_pip_list_of_nvidias_cuda_wheels_is_read_with_their_versions() -> None:
    """A real pip list (numba-cuda on Colab): NVIDIA's runtime wheel is read as a package, never as a toolkit."""
    values = tools.read(_lines("numba-cuda-120.md"))
    assert ("nvidia-cuda-runtime-cu12", "12.5.82") in [(p["name"], p["version"]) for p in values["packages"]]
    _, report, _ = analyze(str(TICKETS / "numba-cuda-120.md"))
    assert "toolkit" not in report["facts"] and report["facts"]["nvml"]["driver_version"] == "550.54.15"


def test_cuda_start_up_failures_803_804_999_and_no_gpus() -> None:
    for name in ("torchpod-43.md", "icra2024-sim2real-axs-5.md"):
        code, report, _ = analyze(str(TICKETS / name))
        (found,) = [f for f in report["findings"] if f["code"] == "DRV023"]
        assert code == 1 and "error 804" in found["title"] and "data-center GPUs" in found["remediation"]["text"]
    for name in ("cor-gs-23.md", "dalle-pytorch-111.md"):
        code, report, _ = analyze(str(TICKETS / name))
        assert code == 1 and "FWK209" in {f["code"] for f in report["findings"]}
    kinds = [e["kind"] for e in messages.read([
        "RuntimeError: Unexpected error from cudaGetDeviceCount(). Error 803: system has unsupported display driver / cuda "
        "driver combination", "UserWarning: CUDA initialization: CUDA unknown error - this may be due to an incorrectly "
        "set up environment"])["evidence"]]
    assert kinds == ["system_driver_mismatch", "cuda_unknown_error"]


def test_a_warning_in_a_compose_log_names_the_gpu_once_without_the_logs_columns() -> None:
    """docker compose puts "vllm-1  | " before each line, vLLM its worker's tag: neither is part of the GPU's name,
    and the warning's first and last lines are one finding."""
    code, report, _ = analyze(str(TICKETS / "vllm-21633.md"))
    (found,) = report["findings"]
    assert code == 1 and found["code"] == "FWK201"
    assert found["title"].startswith("PyTorch says NVIDIA GeForce RTX 5070 Ti (sm_120) is not supported")
    line = "(VllmWorker rank=0 pid=1) NVIDIA H200 with CUDA capability sm_90 is not compatible with the current PyTorch installation."
    (item,) = messages.read([line])["evidence"]
    assert item["gpu"] == "NVIDIA H200"


def test_no_kernel_image_points_past_pytorch_when_its_build_has_the_gpu() -> None:
    """vLLM's image on P100s: PyTorch 2.5.1 has sm_60, vLLM's own kernels do not. The fix says how to tell the two
    apart and names the packages compiled on top of PyTorch, not only a PyTorch reinstall."""
    _, report, _ = analyze(str(TICKETS / "vllm-16307.md"))
    (found,) = [f for f in report["findings"] if f["code"] == "FWK201"]
    assert "vLLM" in found["remediation"]["text"] and "TORCH_CUDA_ARCH_LIST" in found["remediation"]["text"]


def test_a_gpu_too_old_for_one_cuda_variant_is_sent_to_another_variant_first() -> None:
    """vLLM 0.9's PyTorch (cu128) starts at sm_75; PyTorch 2.7's cu126 and cu118 builds still have the TITAN V's sm_70."""
    _, report, _ = analyze(str(TICKETS / "vllm-18818.md"))
    (found,) = [f for f in report["findings"] if f["code"] == "FWK201"]
    assert "another CUDA variant of the same release" in found["remediation"]["text"]


def test_a_container_cut_off_from_its_gpus_is_told_how_to_get_them_back() -> None:
    """NVML's "Unknown Error" in a container whose host lists its GPUs: recreate it, and the host's /dev/char links
    that keep it from recurring (NVIDIA's notice). The paste gives no NVML error number, and none is made up."""
    for name in ("nvidia-container-toolkit-1227.md", "nvidia-docker-966.md"):
        _, report, _ = analyze(str(TICKETS / name))
        (found,) = [f for f in report["findings"] if f["code"] == "DRV006"]
        assert "None" not in found["detail"], name
        assert "recreate the container" in found["remediation"]["text"] and "create-dev-char-symlinks" in found["remediation"]["text"]
        assert found["remediation"]["links"] == ["https://github.com/NVIDIA/nvidia-container-toolkit/issues/48"]


def test_the_toolkits_start_up_error_gets_the_fix_for_what_failed_under_it() -> None:
    """The toolkit installed and running: a driver upgraded without a reboot under it (k8s-device-plugin#1431), or
    Docker from a snap that cannot load the host's NVML (docker-snap#148); neither is fixed by installing it."""
    _, report, _ = analyze(str(TICKETS / "k8s-device-plugin-1431.md"))
    (found,) = [f for f in report["findings"] if f["code"] == "CTR007"]
    assert "Reboot" in found["remediation"]["text"] and "Install the NVIDIA Container Toolkit" not in found["remediation"]["text"]
    _, report, _ = analyze(str(TICKETS / "docker-snap-148.md"))
    (found,) = [f for f in report["findings"] if f["code"] == "CTR007"]
    assert "snap" in found["remediation"]["text"] and "Install the NVIDIA Container Toolkit" not in found["remediation"]["text"]
    _, report, _ = analyze(str(TICKETS / "nvidia-docker-1034-comment.md"))
    (found,) = [f for f in report["findings"] if f["code"] == "CTR007"]
    assert "Install the NVIDIA Container Toolkit" in found["remediation"]["text"]  # Docker without the runtime


def test_a_windows_paste_gets_a_command_windows_runs() -> None:
    """A CPU-only PyTorch on Windows (pytorch#122924): Windows has no python3, and cmd.exe keeps single quotes. The
    report says what the ticket reply says (py, the launcher)."""
    _, report, _ = analyze(str(TICKETS / "pytorch-122924.md"))
    (found,) = [f for f in report["findings"] if f["code"] == "FWK001"]
    assert found["remediation"]["commands"] == [
        'py -m pip install --force-reinstall "torch==2.2.*" --index-url https://download.pytorch.org/whl/cu121']


def test_xlas_ptxas_too_old_is_a_warning_naming_where_ptxas_comes_from() -> None:
    """jax#13570 (an RTX 4080, ptxas without CC 8.9), and XLA's other two wordings (tensorflow/serving#1821,
    jax#10083): XLA falls back to the driver's compiler, so the program may still run: a warning, never an error.
    Triton's ptxas failing on the same words is not XLA's, and is not read as it."""
    code, report, _ = analyze(str(TICKETS / "jax-13570.md"))
    (found,) = report["findings"]
    assert code == 0 and found["code"] == "FWK212" and found["severity"] == "warning"
    assert "compute capability 8.9" in found["title"] and "which -a ptxas" in found["remediation"]["commands"]
    lines = ["W external/org_tensorflow/tensorflow/stream_executor/gpu/asm_compiler.cc:235] Your CUDA software stack is "
             "old. We fallback to the NVIDIA driver for some compilation. Update your CUDA version to get the best "
             "performance. The ptxas error was: ptxas fatal   : Value 'sm_86' is not defined for option 'gpu-name'",
             "W external/org_tensorflow/tensorflow/stream_executor/gpu/asm_compiler.cc:111] *** WARNING *** You are using "
             "ptxas 9.2.148, which is older than 11.1. ptxas before 11.1 is known to miscompile XLA code"]
    assert [e.get("sm") or e.get("found") for x in lines for e in (messages.read([x]) or {"evidence": []})["evidence"]] == \
        ["sm_86", "9.2.148"]
    assert messages.read(["ptxas fatal : Value 'sm_121a' is not defined for option 'gpu-name'"]) is None


def test_a_jaxlib_without_a_cuda_platform_is_told_to_go() -> None:
    """jax#10349: 'Could not find registered platform with name: "cuda"', wrapped onto the next line; the fix was to
    uninstall the CPU-only jaxlib left from before, which a plain install of the CUDA extra keeps."""
    _, report, _ = analyze(str(TICKETS / "jax-10349.md"))
    (found,) = report["findings"]
    assert found["code"] == "FWK207" and "no CUDA platform is registered" in found["title"]
    assert "python -m pip uninstall -y jax jaxlib" in found["remediation"]["commands"]


def test_nvidia_smi_l_is_read_as_the_gpus_nvidia_smi_listed(tmp_path: Path) -> None:
    """The host's `nvidia-smi -L` in nvidia-container-toolkit#1227 (the container's failure is still what is judged),
    and the same lines alone: each GPU with its index, name and UUID, and the compute capability its name gives."""
    body = (TICKETS / "nvidia-container-toolkit-1227.md").read_text(encoding="utf-8")
    (listed,) = [p for p in find_pastes(body, "issue.md") if p.kind == "nvidia-smi -L"]
    assert [(g["index"], g["name"]) for g in listed.parsed["gpus"]] == [(0, "NVIDIA A10"), (1, "NVIDIA A10"),
                                                                       (2, "Tesla T4"), (3, "Tesla T4")]
    path = tmp_path / "l.txt"
    path.write_text("\n".join(line for line in body.splitlines() if line.startswith("GPU ")), encoding="utf-8")
    code, report, _ = analyze("--no-redact", str(path))
    assert code == 0 and report["facts"]["nvml"]["device_count"] == 4
    assert [(g["compute_capability"], g["uuid"][:12]) for g in report["facts"]["gpus"]] == [
        ("8.6", "GPU-f15ae561"), ("8.6", "GPU-466be1f8"), ("7.5", "GPU-bf507abe"), ("7.5", "GPU-a1329f2e")]
    # collect_env lists the same GPUs without their UUIDs: that is collect_env's own list, not this form
    assert not any(p.kind == "nvidia-smi -L" for p in find_pastes("GPU models and configuration: \nGPU 0: NVIDIA A10\n", "c"))


def test_a_mismatch_names_the_library_version_nvidia_smi_printed() -> None:
    """Recent nvidia-smi prints "NVML library version: X" under "Driver/library version mismatch"; the title says it
    beside the kernel module's version where the paste has that too (truenas-nvidia-drivers#19)."""
    titles = {}
    for name in ("truenas-nvidia-drivers-19.md", "k8s-device-plugin-1431.md"):
        _, report, _ = analyze(str(TICKETS / name))
        (found,) = [f for f in report["findings"] if f["code"] == "DRV003"]
        titles[name] = found["title"]
    assert titles == {
        "truenas-nvidia-drivers-19.md": "driver/library version mismatch: kernel module 580.173.02, user-space libraries 580.178",
        "k8s-device-plugin-1431.md": "driver/library version mismatch: kernel module unknown, user-space libraries 570.195"}


def test_nvidia_container_cli_info_is_read_as_the_driver_and_its_gpus() -> None:
    """The container toolkit's template asks for `nvidia-container-cli -k -d /dev/tty info` (nvidia-docker#1366):
    driver 410.104 running CUDA 10.0, two TITAN Xp of compute capability 6.1; a healthy machine, judged so."""
    code, report, _ = analyze("--no-redact", str(TICKETS / "nvidia-docker-1366.md"))
    facts = report["facts"]
    assert code == 0 and report["findings"] == []
    assert (facts["nvml"]["driver_version"], facts["nvml"]["cuda_driver_version"]) == ("410.104", 10000)
    assert [(g["name"], g["compute_capability"], g["pci"]["bus_id"]) for g in facts["gpus"]] == [
        ("TITAN Xp", "6.1", "00000000:03:00.0"), ("TITAN Xp", "6.1", "00000000:04:00.0")]


def test_cudnn_that_did_not_start_is_a_warning_that_names_memory_first() -> None:
    """"Could not create cudnn handle" (jax#16078; tensorflow#24496, where letting the memory grow fixed most) and
    PyTorch's CUDNN_STATUS_NOT_INITIALIZED: the program's memory setting as often as the stack, so a warning."""
    code, report, _ = analyze(str(TICKETS / "jax-16078.md"))
    (found,) = report["findings"]
    assert code == 0 and (found["code"], found["severity"]) == ("FWK213", "warning")
    assert "XLA_PYTHON_CLIENT_PREALLOCATE=false" in found["remediation"]["text"]
    (item,) = messages.read(["RuntimeError: cuDNN error: CUDNN_STATUS_NOT_INITIALIZED"])["evidence"]
    assert (item["kind"], item["status"]) == ("cudnn_did_not_start", "CUDNN_STATUS_NOT_INITIALIZED")
    assert messages.read(["cudnnStatus_t: CUDNN_STATUS_SUCCESS = 0"]) is None


def test_the_kernels_api_mismatch_names_both_versions_and_a_lost_gpu_its_causes() -> None:
    """NVRM's "API mismatch", wrapped over two lines (nvidia-docker#182): the libraries' and the module's versions in
    the title. Xid 79 (open-gpu-kernel-modules#1151): the catalogue's action, and the causes to check if it recurs."""
    _, report, _ = analyze(str(TICKETS / "nvidia-docker-182.md"))
    (found,) = report["findings"]
    assert found["title"].endswith("different versions (libraries 367.44, kernel module 367.35)")
    _, report, _ = analyze(str(TICKETS / "open-gpu-kernel-modules-1151-comment.md"))
    (found,) = [f for f in report["findings"] if "Xid 79" in f["title"]]
    assert found["remediation"]["text"].startswith("Reboot the machine.") and "power" in found["remediation"]["text"]


def test_bf16_asked_of_a_gpu_without_it_is_a_note_not_a_stack_fault() -> None:
    """vllm#730: a V100 (7.0) and a model in bfloat16; the thread's fix was --dtype half. The stack is fine."""
    code, report, _ = analyze(str(TICKETS / "vllm-730.md"))
    (found,) = report["findings"]
    assert code == 0 and (found["code"], found["severity"]) == ("FWK214", "info")
    assert "Tesla V100-SXM2-32GB (compute capability 7.0)" in found["title"] and "--dtype half" in found["remediation"]["text"]


def test_the_system_and_versions_read_through_windows_and_markdown_spellings() -> None:
    """WSL written out is WSL, never native Windows (its commands differ); a Python built by MSVC and ComfyUI's
    "OS: nt" are Windows; a template's bold markup between a field and its value does not hide the value."""
    from gpudoctor.pastes.forms import prose

    def said(line: str) -> dict:
        return prose.read([line]) or {}

    assert said("I am on Windows Subsystem for Linux with an RTX 3060").get("os") == "wsl"
    assert said("Python version: 3.12.10 (tags/v3.12.10:0cc3b2a, Apr  8 2025) [MSC v.1943 64 bit (AMD64)]").get("os") == "windows"
    assert said("- **OS:** nt").get("os") == "windows"
    assert said("- **PyTorch Version:** 2.8.0+cu129").get("torch_version") == "2.8.0+cu129"
    assert said("The NT kernel and my ntfs disk").get("os") is None


def test_a_listing_beside_a_failure_in_one_block_keeps_the_failure(tmp_path: Path) -> None:
    """The host's `nvidia-smi -L` and the container's failure pasted in one fence: the failure is what is judged."""
    path = tmp_path / "t.md"
    path.write_text("```\n$ nvidia-smi -L\nGPU 0: NVIDIA A10 (UUID: GPU-f15ae561-1111-2222-3333-444455556666)\n"
                    "$ docker exec -it vllm nvidia-smi\nFailed to initialize NVML: Unknown Error\n```\n", encoding="utf-8")
    code, report, _ = analyze(str(path))
    assert code == 1 and [f["code"] for f in report["findings"]] == ["DRV006"]


def test_each_message_is_read_for_what_it_says_and_no_more(tmp_path: Path) -> None:
    """XLA's ptxas-by-version warning: it still compiles with that ptxas, it does not fall back. PyTorch's cuDNN
    INTERNAL_ERROR comes mid-run and is not cuDNN failing to start; a pasted cuDNN mismatch names the cause itself.
    A jaxlib with no CUDA platform on a machine with no GPU shown is a warning. The toolkit's own start-up error
    means it is installed. A recent driver names the client in its API mismatch."""
    def findings_of(text: str) -> dict:
        path = tmp_path / "t.md"
        path.write_text(text, encoding="utf-8")
        return {f["code"]: f for f in analyze(str(path))[1].get("findings") or []}

    ptxas = findings_of("W asm_compiler.cc:111] *** WARNING *** You are using ptxas 10.1.243, which is older than 11.1.")
    assert ptxas["FWK212"]["title"].startswith("XLA compiles with ptxas 10.1.243") and "driver instead" not in ptxas["FWK212"]["title"]
    assert messages.read(["RuntimeError: cuDNN error: CUDNN_STATUS_INTERNAL_ERROR"]) is None
    both = findings_of("Loaded runtime CuDNN library: 7.4.1 but source was compiled with: 7.6.0\n"
                       "E cuda_dnn.cc:334] Could not create cudnn handle: CUDNN_STATUS_INTERNAL_ERROR\n")
    assert "FWK204" in both and "FWK213" not in both
    jax = findings_of('RuntimeError: Unable to initialize backend \'gpu\': NOT_FOUND: Could not find registered platform '
                      'with name: "cuda". Available platform names are: Host Interpreter')
    assert jax["FWK207"]["severity"] == "warning"
    toolkit = findings_of("nvidia-container-cli: initialization error: nvml error: driver not loaded: unknown.")
    assert "toolkit is installed" in toolkit["CTR007"]["remediation"]["text"]
    nvrm = findings_of("NVRM: API mismatch: the client 'nvidia-smi' (pid 4121) has the version 595.84, but\n"
                       "NVRM: this kernel module has the version 595.71.  Please make sure\n")
    assert nvrm["DRV020"]["title"].endswith("(libraries 595.84, kernel module 595.71)")


def test_container_cli_info_stops_a_gpu_at_the_end_of_its_block() -> None:
    text = ("NVRM version:   410.104\nCUDA version:   10.0\n\nDevice Index:   0\nModel:          TITAN Xp\n"
            "Architecture:   6.1\n\nModel name:            AMD EPYC 7R13\nModel:                 1\n")
    from gpudoctor.pastes import nvidia_smi

    assert [(g["name"], g["compute_capability"]) for g in nvidia_smi.parse_cli_info(text)["gpus"]] == [("TITAN Xp", "6.1")]


def test_tensorflow_leaving_an_old_gpu_out_is_an_error_with_tensorflows_fix() -> None:
    """tensorflow#25329: libtensorflow 1.13.1's C library ignores a GTX 970 (5.2) below its minimum, 6.0."""
    code, report, _ = analyze(str(TICKETS / "tensorflow-25329-comment.md"))
    (found,) = report["findings"]
    assert code == 1 and found["code"] == "FWK201" and found["title"].startswith("TensorFlow leaves GeForce GTX 970 out")
    assert "TF_CUDA_COMPUTE_CAPABILITIES" in found["remediation"]["text"] and "torch" not in " ".join(found["remediation"]["commands"])


def test_a_framework_that_gave_no_reason_is_not_said_to_have_given_one() -> None:
    """collect_env's "Is CUDA available: No" carries no message: the fix runs the framework to get its own."""
    _, report, _ = analyze(str(TICKETS / "pytorch-43058.md"))
    (found,) = [f for f in report["findings"] if f["code"] == "FWK002"]
    assert found["detail"] == "It gave no reason." and "message above" not in found["remediation"]["text"]


def test_pytorch_warning_without_its_first_line_is_read() -> None:
    (item,) = messages.read(_lines("clover-edition-159.md"))["evidence"]
    assert (item["gpu"], item["sm"]) == ("NVIDIA GeForce RTX 3060 Laptop GPU", "sm_86") and "sm_75" in item["supported"]
    lines = ["The current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 sm_75 sm_80 sm_86.",
             "If you want to use the NVIDIA GeForce RTX 3060 GPU with PyTorch, please check the instructions"]
    assert messages.read(lines) is None  # the GPU's sm_86 is in the list: nothing is wrong


def test_runtime_wheel_pins_give_pytorchs_cuda_never_the_toolkit(tmp_path: Path) -> None:
    path = tmp_path / "freeze.txt"
    path.write_text("torch==2.1.0\nnvidia-cuda-runtime-cu12==12.1.105\nnvidia-cudnn-cu12==8.9.2.26\n", encoding="utf-8")
    _, report, _ = analyze(str(path))
    torch = report["facts"]["frameworks"]["torch"]["info"]
    assert (torch["built_cuda"], torch["runtime_cuda"]) == ("12.1", "12.1") and "toolkit" not in report["facts"]


def test_wsl_is_judged_by_wsls_rules(tmp_path: Path) -> None:
    """WSL 2 runs the Windows driver: the advice names Windows and never a Linux driver or kernel module."""
    code, report, _ = analyze(str(TICKETS / "wsl-3847.md"))
    (found,) = [f for f in report["findings"] if f["code"] == "DRV002"]
    assert code == 1 and report["facts"]["host"]["wsl"] is True and "Windows" in found["remediation"]["text"]
    assert "modprobe" not in json.dumps(found)
    code, report, _ = analyze(str(TICKETS / "stable-diffusion-161.md"))
    (found,) = [f for f in report["findings"] if f["code"] == "FWK203"]
    assert "never install a Linux NVIDIA driver inside WSL" in found["remediation"]["text"]
    path = tmp_path / "uname.md"
    path.write_text("Windows 11, `uname -r`: 5.15.153.1-microsoft-standard-WSL2\n\nRuntimeError: The NVIDIA driver on your "
                    "system is too old (found version 11040).\n", encoding="utf-8")
    _, report, _ = analyze(str(path))
    assert report["facts"]["host"]["wsl"] is True
    assert "on Windows" in next(f for f in report["findings"] if f["code"] == "FWK202")["remediation"]["text"]


def test_wsl_1_is_told_apart_from_wsl_2(tmp_path: Path) -> None:
    """WSL 1's kernel release (4.4.0-19041-Microsoft) has no GPU: DRV025, and no "sees no GPU" beside it; WSL 2's
    (microsoft-standard) is WSL 2 and gets no such finding."""
    code, report, _ = analyze(str(TICKETS / "diffusers-shivam-18.md"))
    assert code == 1 and [f["code"] for f in report["findings"]] == ["DRV025"]
    path = tmp_path / "env.txt"
    wsl1 = COLLECT_ENV.format(available="False").replace("Linux-5.15.0-1057-aws-x86_64", "Linux-4.4.0-19041-Microsoft-x86_64")
    path.write_text(wsl1, encoding="utf-8")
    code, report, _ = analyze(str(path))
    assert code == 1 and report["facts"]["host"]["wsl_version"] == 1 and "DRV025" in {f["code"] for f in report["findings"]}
    path.write_text(wsl1.replace("4.4.0-19041-Microsoft", "5.15.153.1-microsoft-standard-WSL2"), encoding="utf-8")
    _, report, _ = analyze(str(path))
    assert report["facts"]["host"]["wsl"] is True and "wsl_version" not in report["facts"]["host"]
    assert "DRV025" not in {f["code"] for f in report["findings"]}


def test_macos_is_never_told_to_install_cuda(tmp_path: Path) -> None:
    """macOS has had no CUDA since 10.2: a framework asking for it there is an error whose fix is the Apple GPU's
    backend or an NVIDIA machine, never a CUDA wheel."""
    path = tmp_path / "mac.md"
    path.write_text("On my MacBook Pro M2 (macOS 14):\n\n```\nAssertionError: Torch not compiled with CUDA enabled\n```\n",
                    encoding="utf-8")
    code, report, _ = analyze(str(path))
    (found,) = [f for f in report["findings"] if f["code"] == "FWK205"]
    assert code == 1 and "MPS" in found["remediation"]["text"] and "pytorch.org" not in json.dumps(found)


def test_a_rocm_ticket_is_said_to_be_outside_the_nvidia_checks() -> None:
    """A +rocm collect_env (CUDA available: True, an AMD GPU): one note that names the AMD stack and where it was
    read, every area not checked (no [✓]), "nothing judged" in words, and a reply with ROCm's own commands."""
    name = str(TICKETS / "pytorch-145670.md")
    code, report, _ = analyze(name)
    (found,) = report["findings"]
    assert code == 0 and found["code"] == "FWK210" and found["severity"] == "info"
    assert "a ROCm build (+rocm)" in found["detail"] and "pytorch-145670.md, line 10" in found["detail"]
    assert set(report["summary"]["areas"].values()) == {"skip"}
    text = CliRunner().invoke(cli, ["analyze", name]).stdout
    assert "[✓]" not in text and "[OK]" not in text and "nothing judged" in text and "No problems found" not in text
    assert "Frameworks: not checked: an AMD ROCm stack" in text
    reply = CliRunner().invoke(cli, ["analyze", "--format", "markdown", name]).stdout
    assert "**Verdict: not judged: an AMD GPU stack (ROCm).**" in reply and "rocminfo" in reply
    assert "nothing wrong" not in reply and "pipx run gpudoctor" not in reply


@pytest.mark.parametrize("name", ["rocm-legacy-rocm-build-3485.md", "rocm-legacy-rocm-build-2354.md", "pytorch-70036.md",
                                  "pytorch-44106-comment.md"])
def test_each_rocm_form_is_read_as_rocm(name: str) -> None:
    """pip list's +rocm, rocminfo's headings, HIP's own errors, collect_env's ROCm lines."""
    _, report, _ = analyze(str(TICKETS / name))
    assert [f["code"] for f in report["findings"]] == ["FWK210"] and report["facts"]["rocm"]["signs"]


def test_a_rocm_build_beside_an_nvidia_gpu_is_judged_as_nvidias(tmp_path: Path) -> None:
    """nvidia-smi lists an NVIDIA GPU: the machine is NVIDIA's, and a ROCm PyTorch on it is FWK001, as in `check`."""
    env = COLLECT_ENV.format(available="False").replace("2.4.0+cu124", "2.1.2+rocm5.6").replace(
        "CUDA used to build PyTorch: 12.4", "CUDA used to build PyTorch: N/A\nROCM used to build PyTorch: 5.6.31061-8c743ae5d")
    path = tmp_path / "env.txt"
    path.write_text(env, encoding="utf-8")
    code, report, stderr = analyze(str(path))
    assert code == 1 and "FWK001" in {f["code"] for f in report["findings"]} and "rocm" not in report["facts"]
    assert "beside an NVIDIA driver or GPU" in stderr


def test_no_rocm_sign_in_a_cuda_paste_or_an_amd_cpu() -> None:
    """A CUDA collect_env prints its ROCm lines as N/A, and an AMD CPU is "with Radeon Graphics": neither is a sign."""
    assert rocm.read(["ROCM used to build PyTorch: N/A", "HIP runtime version: N/A", "MIOpen runtime version: N/A",
                      "Model name: AMD Ryzen 7 6800U with Radeon Graphics", ">>> torch.version.hip", "None",
                      "I tried ROCm before switching to my RTX 3090"]) is None
    assert rocm.read(["GPU models and configuration: AMD Radeon RX 7900 XTX"])["signs"][0]["what"] == "an AMD GPU in a GPU list"
    assert rocm.read([">>> torch.version.hip", "'5.6.31061-8c743ae5d'"])["signs"][0]["line"] == 1


def test_what_the_reporter_says_they_saw_is_read_as_a_statement_only() -> None:
    """ "is_available() is False", TensorFlow's "Num GPUs Available: 0" and "fell off the bus" count as what happened;
    a question, a condition or a denial does not."""
    said = [("torch.cuda.is_available() is False.", "no_gpu_seen"), ("and `torch.cuda.is_available()` returns `False`", "no_gpu_seen"),
            ("Num GPUs Available:  0", "no_gpu_seen"), ("gpu randomly falls off the bus when playing games", "gpu_lost_said"),
            ("[PhysicalDevice(name='/physical_device:XLA_GPU:0', device_type='XLA_GPU')]", "gpu_present")]
    for line, kind in said:
        assert [e["kind"] for e in observed.read([line])["evidence"]] == [kind], line
    for line in ("Why does torch.cuda.is_available() return False?", "If torch.cuda.is_available() is False, use the CPU.",
                 "torch.cuda.is_available() no longer returns False after the reinstall",
                 "Could the GPU have fallen off the bus?", "It did not fall off the bus this time.",
                 "print('Num GPUs Available: ', len(tf.config.list_physical_devices('GPU')))"):
        assert observed.read([line]) is None, line


def test_a_framework_that_sees_no_gpu_is_an_error_only_beside_a_gpu(tmp_path: Path) -> None:
    """A named RTX 3060 makes PyTorch's "no GPU" an error (FWK211); without a GPU in the paste it is a warning, since a
    machine without one answers the same; a pasted cause (a CPU-only build) is said instead of it."""
    path = tmp_path / "body.md"
    path.write_text("I have an RTX 3060.\n\n```\n>>> import torch\n>>> torch.cuda.is_available()\nFalse\n```\n", encoding="utf-8")
    code, report, _ = analyze(str(path))
    (found,) = report["findings"]
    assert code == 1 and found["code"] == "FWK211" and found["severity"] == "error"
    assert "torch.cuda.is_available() printed False" in found["detail"]
    path.write_text("```\n>>> import torch\n>>> torch.cuda.is_available()\nFalse\n```\n", encoding="utf-8")
    code, report, _ = analyze(str(path))
    assert code == 0 and [(f["code"], f["severity"]) for f in report["findings"]] == [("FWK211", "warning")]
    path.write_text("I have an RTX 3060 and torch.cuda.is_available() is False.\n\nAssertionError: Torch not compiled with "
                    "CUDA enabled\n", encoding="utf-8")
    _, report, _ = analyze(str(path))
    assert [f["code"] for f in report["findings"]] == ["FWK205"]


def test_answers_written_as_comments_after_the_code(tmp_path: Path) -> None:
    """ "tf.config.list_physical_devices('GPU') # [] is returned" beside "torch.cuda.is_available() # true is
    returned" on native Windows: TensorFlow sees no GPU where PyTorch sees one, and the fix names TensorFlow's
    end of native-Windows GPU builds (tensorflow-60156)."""
    code, report, _ = analyze(str(TICKETS / "tensorflow-60156.md"))
    (found,) = report["findings"]
    assert code == 1 and found["code"] == "FWK211" and found["severity"] == "error"
    assert "where PyTorch sees a GPU" in found["title"] and "no GPU build for native Windows" in found["remediation"]["text"]
    assert [e["kind"] for e in observed.read(["torch.cuda.is_available()  # False"])["evidence"]] == ["no_gpu_seen"]
    assert observed.read(["ok = torch.cuda.is_available()  # check first"]) is None


def test_vllms_gpu_blocks_show_work_on_the_gpu() -> None:
    """vLLM prints "# GPU blocks: N" after a profiling run on the GPU: work reached it (vllm-2418, healthy)."""
    code, report, _ = analyze(str(TICKETS / "vllm-2418.md"))
    assert code == 0 and [f["code"] for f in report["findings"]] == ["FWK208"]


def test_tensorflows_found_device_shows_a_gpu_is_there(tmp_path: Path) -> None:
    """TensorFlow's "Found device 0 with properties" is its CUDA driver listing a GPU: beside "Num GPUs Available: 0"
    TensorFlow's missing GPU is an error, not a warning."""
    path = tmp_path / "log.txt"
    path.write_text("2022-12-26 04:48:40.485508: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1720] Found device 0 with "
                    "properties: \nNum GPUs Available:  0\n", encoding="utf-8")
    code, report, _ = analyze(str(path))
    (found,) = report["findings"]
    assert code == 1 and found["code"] == "FWK211" and found["severity"] == "error" and "'Found device'" in found["title"]


def test_cuda_driver_initialization_failed_is_error_3() -> None:
    """PyTorch's "CUDA driver initialization failed, you might not have a CUDA gpu" (wenet-700): DRV023."""
    code, report, _ = analyze(str(TICKETS / "wenet-700.md"))
    (found,) = report["findings"]
    assert code == 1 and found["code"] == "DRV023" and "error 3" in found["title"]


def test_the_reporters_words_never_outrank_the_pastes_answer(tmp_path: Path) -> None:
    """The healthy case of tests/fixtures/pastes/pytorch-40682.md: the reporter says is_available() is False, the
    collect_env they pasted says True (two TITAN RTX); the paste's answer stands and nothing is an error."""
    pasted = (PASTES / "pytorch-40682.md").read_text(encoding="utf-8")
    path = tmp_path / "body.md"
    path.write_text("torch.cuda.is_available() returns False on my machine.\n\n" + pasted, encoding="utf-8")
    code, report, _ = analyze(str(path))
    assert code == 0 and "FWK211" not in {f["code"] for f in report["findings"]}


def test_a_gpu_said_to_fall_off_the_bus_is_an_error_unless_the_log_says_it() -> None:
    code, report, _ = analyze(str(TICKETS / "open-gpu-kernel-modules-507.md"))
    (found,) = report["findings"]
    assert code == 1 and found["code"] == "DRV024" and "falls off the bus" in found["detail"]


# --- evidence outranks inference ------------------------------------------------------------------------

COLLECT_ENV = """PyTorch version: 2.4.0+cu124
Is debug build: False
CUDA used to build PyTorch: 12.4
OS: Ubuntu 22.04.4 LTS (x86_64)
Python version: 3.10.12 (main) [GCC 11.4.0] (64-bit runtime)
Python platform: Linux-5.15.0-1057-aws-x86_64-with-glibc2.35
Is CUDA available: {available}
GPU models and configuration: GPU 0: NVIDIA A100-SXM4-80GB
Nvidia driver version: 470.239.06
"""


def test_cuda_that_started_under_an_old_driver_is_not_called_broken(tmp_path: Path) -> None:
    """Driver 470 runs CUDA 11.4; a cu124 build that reports CUDA available ran through the forward-compatibility
    package, so no CMP001. The same paste with CUDA unavailable keeps the matrix's answer."""
    path = tmp_path / "env.txt"
    path.write_text(COLLECT_ENV.format(available="True"), encoding="utf-8")
    code, report, _ = analyze(str(path))
    assert code == 0 and "CMP001" not in {f["code"] for f in report["findings"]}
    path.write_text(COLLECT_ENV.format(available="False"), encoding="utf-8")
    _, report, _ = analyze(str(path))
    assert "CMP001" in {f["code"] for f in report["findings"]}


def test_collect_env_with_the_frameworks_own_no_driver_message(tmp_path: Path) -> None:
    text = ("UserWarning: CUDA initialization: Found no NVIDIA driver on your system. Please check that you have an "
            "NVIDIA GPU and installed a driver\n" + COLLECT_ENV.format(available="False").replace(
                "GPU 0: NVIDIA A100-SXM4-80GB", "Could not collect").replace("470.239.06", "Could not collect"))
    path = tmp_path / "env.txt"
    path.write_text(text, encoding="utf-8")
    code, report, _ = analyze(str(path))
    assert code == 1 and "FWK203" in {f["code"] for f in report["findings"]}


def test_two_interpreters_are_a_contradiction_not_a_merge(tmp_path: Path) -> None:
    text = COLLECT_ENV.format(available="True") + "\n```\n>>> import torch\n>>> torch.cuda.is_available()\nFalse\n```\n"
    path = tmp_path / "body.md"
    path.write_text(text, encoding="utf-8")
    _, report, stderr = analyze(str(path))
    found = {f["code"]: f for f in report["findings"]}
    assert "FWK206" in found and "True in collect_env" in found["FWK206"]["title"]
    assert report["facts"]["frameworks"]["torch"]["info"]["cuda_available"] is True  # collect_env's, not merged
    assert "two Python environments?" in stderr


def test_prose_that_denies_a_message_is_not_evidence() -> None:
    assert messages.read(["I no longer get Found no NVIDIA driver on your system after the reinstall"]) is None
    assert messages.read(["RuntimeError: Found no NVIDIA driver on your system."])["evidence"][0]["kind"] == "no_driver"


def test_a_live_report_has_no_evidence_and_skips_these_checks() -> None:
    from gpudoctor.checks import messages as checks
    from gpudoctor.checks.registry import run_check
    from gpudoctor.findings import SKIP

    for check in checks.CHECKS:
        result = run_check(check, {"nvml": {"init": {"ok": True}}})
        assert result.status == SKIP and "live check" in result.reason, (check.id, result)


# --- bounds ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("line", [
    "x" * 1_000_000,
    ("with CUDA capability sm_" * 40_000),
    ("Could not load dynamic library '" + "a" * 200) * 4000,
    (">>> torch.cuda.is_available()\n" * 30_000),
    ("- TensorFlow version: " + "1." * 400 + "\n") * 2000,
    ("torch" + " " * 50 + "2.0\n") * 15_000,
    ("ROCM used to build PyTorch: hip runtime hip error gfx radeon rocm\n" * 20_000),
])
def test_a_one_megabyte_body_is_read_in_linear_time(line: str) -> None:
    text = line[:1_000_000]
    start = time.perf_counter()
    find_pastes(text, "big.md")
    # linear, bounded expressions: about 0.1-0.3 s idle; a backtracking one would take minutes, so the bound is loose
    # enough for a shared, loaded runner
    assert time.perf_counter() - start <= 3.0


def test_the_one_scan_finds_a_line_exactly_when_it_holds_a_message_word() -> None:
    """The factored expression that picks the lines worth reading matches where a plain substring test of every
    word does, on the whole corpus and on each word alone."""
    words = messages.TRIGGER_WORDS
    assert all(messages._TRIGGER.search(word) for word in words)
    for path in sorted(TICKETS.glob("*.md")):
        for line in path.read_text(encoding="utf-8").lower().split("\n"):
            assert bool(messages._TRIGGER.search(line)) == any(w in line for w in words), (path.name, line)


def test_untrusted_text_stays_text() -> None:
    line = "RuntimeError: Found no NVIDIA driver on your system <script>alert(1)</script> token=ghp_" + "a" * 36
    result = CliRunner().invoke(cli, ["analyze", "--format", "markdown", "-"], input=line + "\n")
    assert result.exit_code == 1
    assert "<script>" not in result.stdout and "ghp_" + "a" * 36 not in result.stdout
