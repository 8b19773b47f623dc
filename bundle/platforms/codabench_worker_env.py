"""Codabench's compute worker ``.env`` (codabench_v2.md §3.12): the recipe for a competition
whose submissions run on the organizer's own workers, and what no key of the worker sets.

The keys and their meaning are the worker's (``compute_worker/compute_worker.py`` at
``88fa830b``, ``celery_config.py``); the values are the docs' where the docs give one. Only what
the spec says goes in (its queue, its image); the broker URL, which holds the organizer's own
RabbitMQ login, stays a placeholder with the place to copy it from.
"""
from __future__ import annotations

# The docs' values (Compute-Worker-Management---Setup.md): the host folder the worker's
# docker-compose.yml mounts at /codabench, and every GPU of the host as one CDI device.
HOST_DIRECTORY = "/codabench"
ALL_GPUS = "nvidia.com/gpu=all"
# Queue-Management.md and the site's user menu (src/templates/base.html).
QUEUE_PAGE = "the user menu, My Resources > Queues (/queues/ on the site)"


def wanted(spec) -> bool:
    """A queue of the organizer's own, or a GPU image, which only such workers can serve
    (Codabench's default queue has no GPU worker started with USE_GPU)."""
    return bool(spec.codabench_queue) or spec.gpu_image


def not_set(spec) -> list[str]:
    """What the organizer must see to on the worker's host, since no key of the worker sets it
    (§3.12)."""
    return [f"the image pull: the worker pulls {spec.docker_image} before every job and has no "
            "pull policy, so every worker's host must reach the image's registry "
            f"('docker pull {spec.docker_image}' beforehand only makes the first pull short)",
            "memory, CPUs and GPU memory: the worker puts no limit on a job's containers; the "
            "ingestion's sandbox holds participant code to the pages' memory limit, the machine "
            "you choose is the rest (the ingestion log prints it for every submission)"]


def _queue_lines(spec) -> list[str]:
    if spec.codabench_queue:
        where = (f"# The queue: {spec.codabench_queue} (codabench_queue in the spec). Its "
                 "workers run every submission of the competition.")
    else:
        where = ("# This spec names no queue: until it does (codabench_queue: the vhost UUID of "
                 "a queue of yours), submissions go to Codabench's default queue, whose "
                 "workers give no container a GPU.")
    return [where,
            "# BROKER_URL is the queue's, and a secret (your RabbitMQ login is in it): copy it "
            f"from Codabench, {QUEUE_PAGE}: the queue's document icon copies it, its eye icon "
            "shows it.",
            f"BROKER_URL=<paste the broker URL of queue {spec.codabench_queue or 'UUID'} here>",
            "# TLS to the broker, which codabench.org's needs. Any value turns it on, False "
            "included: delete the line for a broker without TLS. The worker does not check the "
            "broker's certificate.",
            "BROKER_USE_SSL=True"]


def _engine_lines(spec) -> list[str]:
    lines = [f"# The host folder mounted at /codabench in the worker's container "
             f"(docker-compose.yml: {HOST_DIRECTORY}:{HOST_DIRECTORY}); its data/ folder is "
             "/app/data in every container of a job.",
             f"HOST_DIRECTORY={HOST_DIRECTORY}",
             "CONTAINER_ENGINE_EXECUTABLE=docker",
             "#"]
    if spec.gpu_image:
        return lines + [
            f"# The competition's image, {spec.docker_image}, is a GPU image: every container "
            "of a job gets the GPUs below, a CDI device (install the NVIDIA Container Toolkit "
            "on the host; 'nvidia-ctk cdi list' names each card, to give one instead of all).",
            "USE_GPU=True",
            f"GPU_DEVICE={ALL_GPUS}"]
    return lines + [f"# The competition's image, {spec.docker_image}, is not a GPU image: its "
                    "containers get no GPU.",
                    "USE_GPU=False"]


def worker_env(spec, bundle_name: str, promised: list[str]) -> str:
    """The ``.env`` text: ``promised`` are the pages' lines about the machine, quoted whole."""
    promise = ([f"#  * {line}" for line in promised]
               or ["#  (none: every phase of this bundle scores uploaded prediction files)"])
    lines = [
        f"# Codabench compute worker .env for {bundle_name}, written by build_bundle.py from "
        f"{spec.path.name}: build again rather than edit it, BROKER_URL aside.",
        "# Keys as the worker reads them (docs/platform/codabench_v2.md §3.12). Save it as .env "
        "next to the worker's docker-compose.yml (its env_file), then: docker compose up -d",
        "# One KEY=VALUE a line, and no comment after a value: Docker would keep it as part of "
        "the value.",
        "#",
        *_queue_lines(spec),
        "#",
        *_engine_lines(spec),
        "#",
        "# No network for a job's containers (the ingestion, where participant code runs, and "
        "the scoring): the pages tell participants not to rely on it, and the programs need "
        "none. The worker's own downloads and the image pull are not affected.",
        "COMPETITION_CONTAINER_NETWORK_DISABLED=True",
        "#",
        "# What the pages promise participants about the machine (the evaluation page, "
        "\"Budgets, sandbox and hardware\"). The worker takes one job at a time and limits none "
        "of it: give each worker a machine that keeps it.",
        *promise,
        "#",
        "# Not set by the worker (no key does it):",
        *[f"# - {note}" for note in not_set(spec)],
        "# Leave CODALAB_IGNORE_CLEANUP_STEP unset: it keeps every job's folder on the host, the "
        "scoring step's reference data included.",
    ]
    return "\n".join(lines) + "\n"
