"""image_specs.py is loaded by `kubejobs image render` (as pyflyte would), not collected as a test module."""

collect_ignore = ["image_specs.py"]
