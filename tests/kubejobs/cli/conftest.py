"""The example task modules are loaded by `kubejobs render` (as pyflyte would), not collected as test modules."""

collect_ignore = ["cli_example_tasks.py", "cli_official_tasks.py"]
