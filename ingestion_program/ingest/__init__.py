"""The ingestion program: runs each task's training code in a sandboxed, time-boxed child."""
