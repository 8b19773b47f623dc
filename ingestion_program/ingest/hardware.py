"""The machine the budgets were spent on: a budget in seconds means nothing without it."""
from __future__ import annotations

import os
import platform
import shutil
import subprocess


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _gpus() -> list[str]:
    if not shutil.which("nvidia-smi"):
        return []
    try:
        listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in listing.stdout.splitlines() if line.strip()]


def describe_hardware() -> dict:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    try:
        memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")   # no psutil needed
    except (ValueError, OSError):
        memory = 0
    return {"cpu": _cpu_model(), "cores": cores, "memory_gib": round(memory / 2 ** 30, 1),
            "gpus": _gpus(),
        "python": platform.python_version(), "platform": platform.platform()}
