"""ImageSpecs that `kubejobs image render` loads in the CLI tests (not collected as a test module)."""

from flytekit import ImageSpec

training = ImageSpec(
    name="train",
    registry="registry.example:5000/ml",
    base_image="python:3.11-slim",
    packages=["numpy==2.1.0"],
    env={"MODE": "$(literal)"},
    builder="kaniko",
)

not_a_spec = "python:3.11-slim"
