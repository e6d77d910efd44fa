"""An ImageSpec as a Dockerfile, rendered so that every user value stays data (pure: no flytekit, no I/O).

Every install step is an exec-form ``RUN ["argv0", ...]`` (a JSON array, which the Dockerfile parser decodes
with a JSON decoder and runs without a shell), so a package name reaches pip/apt/conda as one argv element
whatever characters it holds. Package names are checked anyway (PEP 508, Debian, conda match specs), so a
typo such as ``"numpy; rm -rf /"`` is refused at render time rather than by pip in the cluster. ``commands``
are shell commands by definition: each is one ``RUN ["/bin/sh", "-c", "<command>"]``, JSON-encoded, so a
newline inside it stays inside that RUN (it cannot start a new Dockerfile instruction). ``ENV`` values are
double-quoted with ``\\``, ``"`` and ``$`` escaped (the Dockerfile lexer's only escapes inside double quotes),
so ``$(curl evil)`` is a literal; control characters, which no Dockerfile quoting can carry, are refused.

>>> recipe = Recipe(base_image="python:3.11-slim", packages=("numpy==2.1.0",), env=(("MODE", "a $b"),))
>>> print(render_dockerfile(recipe))
FROM python:3.11-slim
USER root
WORKDIR /root
RUN ["python3", "-m", "pip", "install", "--no-cache-dir", "numpy==2.1.0"]
ENV MODE="a \\$b"
<BLANKLINE>
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from typing import Any, Optional

#: Where the build context's files (ImageSpec ``source_root`` / ``copy``) go in the image, as flytekit's builder does.
IMAGE_ROOT = "/root"
#: The folder of the build context whose contents are copied to ``IMAGE_ROOT``.
CONTEXT_FILES_DIR = "root"
#: The name of a ``requirements`` file in the build context.
CONTEXT_REQUIREMENTS = "requirements.txt"

# Debian policy 5.6.1: lowercase alphanumerics and + - ., at least two characters, starting alphanumeric;
# an optional :arch and =version (epoch:upstream-revision, as apt-get accepts `pkg=version`).
_APT = re.compile(r"[a-z0-9][a-z0-9+.\-]+(:[a-z0-9][a-z0-9\-]*)?(=[A-Za-z0-9.+~:\-]+)?")
# A conda match spec without spaces: [channel::]name[version[=build]] ("numpy>=1.26", "pytorch::pytorch=2.3").
_CONDA = re.compile(r"([A-Za-z0-9_][A-Za-z0-9_.\-]*::)?[A-Za-z0-9_][A-Za-z0-9_.\-]*([=<>!~][A-Za-z0-9_.*+!=<>,|\-]*)?")
_CONDA_CHANNEL = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-/:]*")
_ENV_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# An image reference: [host[:port]/]path[:tag][@digest], lowercase path components (distribution's grammar,
# simplified); no `$` (FROM would substitute build args), no whitespace.
_IMAGE = re.compile(
    r"([A-Za-z0-9.\-]+(:[0-9]+)?/)?[a-z0-9]+([._\-]+[a-z0-9]+)*(/[a-z0-9]+([._\-]+[a-z0-9]+)*)*"
    r"(:[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127})?(@[a-z0-9]+:[a-f0-9]{32,})?"
)
_PYTHON_VERSION = re.compile(r"3\.[0-9]{1,2}")
_PLATFORM = re.compile(r"[a-z0-9]+/[a-z0-9_]+(/[a-z0-9]+)?")

__all__ = [
    "CONTEXT_FILES_DIR",
    "CONTEXT_REQUIREMENTS",
    "IMAGE_ROOT",
    "UNSUPPORTED",
    "Recipe",
    "check_base_image",
    "check_pip_requirement",
    "recipe_from_image_spec",
    "render_dockerfile",
]


def _has_control(text: str) -> bool:
    return any(ord(c) < 32 or ord(c) == 127 for c in text)


def check_pip_requirement(field: str, value: object) -> str:
    """A PEP 508 requirement (``numpy``, ``torch==2.3.*``, ``pkg[extra]>=1; python_version>"3.9"``, ``x @ url``)."""
    from packaging.requirements import InvalidRequirement, Requirement

    if not isinstance(value, str):
        raise TypeError(f"{field} must hold str, got {value!r} ({type(value).__name__})")
    if _has_control(value):
        raise ValueError(f"{field} {value!r} is not a PEP 508 requirement: control characters")
    try:
        Requirement(value)
    except InvalidRequirement as e:
        raise ValueError(f"{field} {value!r} is not a PEP 508 requirement: {str(e).splitlines()[0]}") from None
    return value


def _check_match(field: str, value: object, pattern: re.Pattern[str], what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{field} must hold str, got {value!r} ({type(value).__name__})")
    if not pattern.fullmatch(value):
        raise ValueError(f"{field} {value!r} is not {what}")
    return value


def check_base_image(field: str, value: object) -> str:
    """An image reference a ``FROM`` line can carry literally."""
    return _check_match(field, value, _IMAGE, "an image reference ([host[:port]/]path[:tag][@digest], lowercase path)")


@dataclass(frozen=True)
class Recipe:
    """What the Dockerfile installs, checked: every field is data for an argv or a quoted ENV value.

    Build one from an ImageSpec with :func:`recipe_from_image_spec`; ``files`` (the build context's files
    copied to ``/root``) and ``requirements`` only say whether those exist, their bytes travel in the context.
    """

    base_image: str
    packages: tuple[str, ...] = ()
    apt_packages: tuple[str, ...] = ()
    conda_packages: tuple[str, ...] = ()
    conda_channels: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    commands: tuple[str, ...] = ()
    python_exec: str = "python3"
    pip_index: Optional[str] = None
    pip_extra_index_url: tuple[str, ...] = ()
    pip_extra_args: tuple[str, ...] = ()
    requirements: bool = False
    files: bool = False
    entrypoint: Optional[tuple[str, ...]] = None
    image_id: Optional[str] = None

    def __post_init__(self) -> None:
        check_base_image("ImageSpec.base_image", self.base_image)
        for p in self.packages:
            check_pip_requirement("ImageSpec.packages", p)
        for p in self.apt_packages:
            _check_match("ImageSpec.apt_packages", p, _APT, "a Debian package name (Debian policy 5.6.1, [=version])")
        for p in self.conda_packages:
            _check_match("ImageSpec.conda_packages", p, _CONDA, "a conda match spec ([channel::]name[version])")
        for c in self.conda_channels:
            _check_match("ImageSpec.conda_channels", c, _CONDA_CHANNEL, "a conda channel name or URL")
        for key, value in self.env:
            _check_match("ImageSpec.env", key, _ENV_KEY, "an environment variable name ([A-Za-z_][A-Za-z0-9_]*)")
            if not isinstance(value, str):
                raise TypeError(f"ImageSpec.env[{key!r}] must be a str, got {value!r} ({type(value).__name__})")
            if _has_control(value):
                raise ValueError(
                    f"ImageSpec.env[{key!r}] {value!r} holds a control character (newline, tab, ...): "
                    "a Dockerfile ENV line cannot carry it"
                )
        for command in self.commands:
            if not isinstance(command, str) or not command.strip():
                raise ValueError(f"ImageSpec.commands {command!r} must be a non-empty shell command")
            if "\x00" in command:
                raise ValueError(f"ImageSpec.commands {command!r} holds a NUL character")
        for field, url in [
            ("pip_index", self.pip_index),
            *(("pip_extra_index_url", u) for u in self.pip_extra_index_url),
        ]:
            if url is not None and (not isinstance(url, str) or not url or not all("!" <= c <= "~" for c in url)):
                raise ValueError(f"ImageSpec.{field} {url!r} is not a URL (printable ASCII, no whitespace)")
        for arg in self.pip_extra_args:
            if _has_control(arg):
                raise ValueError(f"ImageSpec.pip_extra_args {arg!r} holds a control character")
        if not self.python_exec or not all("!" <= c <= "~" for c in self.python_exec):
            raise ValueError(f"ImageSpec.python_exec {self.python_exec!r} is not an executable path")
        for item in self.entrypoint or ():
            if not isinstance(item, str) or "\x00" in item:
                raise ValueError(f"ImageSpec.entrypoint {self.entrypoint!r} must be a list of str")


def _run(*argv: str) -> str:
    # ensure_ascii: the Dockerfile stays ASCII; JSON escapes keep newlines and quotes inside the string.
    return "RUN " + json.dumps(list(argv), ensure_ascii=True)


def _env_value(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$")
    return f'"{escaped}"'


def render_dockerfile(recipe: Recipe) -> str:
    """The Dockerfile of ``recipe``: exec-form RUN lines, quoted ENV values, the context copied to /root."""
    lines = [f"FROM {recipe.base_image}", "USER root", f"WORKDIR {IMAGE_ROOT}"]
    if recipe.apt_packages:
        lines.append(_run("apt-get", "update"))
        lines.append(_run("apt-get", "install", "-y", "--no-install-recommends", *recipe.apt_packages))
        lines.append(_run("rm", "-rf", "/var/lib/apt/lists"))
    if recipe.conda_packages:
        channels = [arg for c in recipe.conda_channels for arg in ("-c", c)]
        lines.append(_run("conda", "install", "-y", *channels, *recipe.conda_packages))
    if recipe.packages or recipe.requirements:
        pip = [recipe.python_exec, "-m", "pip", "install", "--no-cache-dir"]
        if recipe.pip_index:
            pip += ["--index-url", recipe.pip_index]
        for url in recipe.pip_extra_index_url:
            pip += ["--extra-index-url", url]
        pip += list(recipe.pip_extra_args)
        if recipe.requirements:
            lines.append(f"COPY {json.dumps([CONTEXT_REQUIREMENTS, '/tmp/' + CONTEXT_REQUIREMENTS])}")
            pip += ["-r", "/tmp/" + CONTEXT_REQUIREMENTS]
        lines.append(_run(*pip, *recipe.packages))
    if recipe.files:
        lines.append(f"COPY {json.dumps([CONTEXT_FILES_DIR + '/', IMAGE_ROOT + '/'])}")
    for command in recipe.commands:
        lines.append(_run("/bin/sh", "-c", command))
    env = list(recipe.env)
    if recipe.image_id is not None:
        # flytekit's ImageSpec.is_container() compares this with the spec's id inside the task's pod.
        env.append(("_F_IMG_ID", recipe.image_id))
    for key, value in env:
        lines.append(f"ENV {key}={_env_value(value)}")
    if recipe.entrypoint is not None:
        lines.append("ENTRYPOINT " + json.dumps(list(recipe.entrypoint), ensure_ascii=True))
    return "\n".join(lines) + "\n"


#: ImageSpec fields this builder refuses when set: each needs a feature it does not have (named in the message).
UNSUPPORTED = {
    "cuda": "use a CUDA base image",
    "cudnn": "use a CUDA base image",
    "pip_secret_mounts": "kaniko has no build secrets; use a private index URL the cluster can reach",
    "registry_config": "the registry credentials are the platform's Secret (KUBEJOBS_IMAGE_BUILD_REGISTRY_SECRET)",
    "runtime_packages": "not supported by the kaniko builder",
    "builder_options": "the kaniko builder takes no options (configure it with KUBEJOBS_IMAGE_BUILD_*)",
    "builder_config": "the kaniko builder takes no builder images",
}


def default_python_version() -> str:
    import sys

    return f"{sys.version_info.major}.{sys.version_info.minor}"


def recipe_from_image_spec(spec: Any, *, has_files: bool = False, flytekit_version: Optional[str] = None) -> Recipe:
    """The checked recipe of a flytekit ``ImageSpec`` (read by attribute: this module imports no flytekit).

    Without ``base_image`` the base is ``python:<python_version>-slim-bookworm`` (the version defaults to this
    interpreter's) and ``flytekit==<flytekit_version>`` is installed unless ``packages`` name flytekit; with a
    ``base_image``, ``python_version`` is refused (the base image's Python is used, nothing installs another).
    """
    for field, why in UNSUPPORTED.items():
        if getattr(spec, field, None):
            raise ValueError(
                f"ImageSpec.{field} {getattr(spec, field)!r} is not supported by the kaniko builder: {why}"
            )
    spec_platform = getattr(spec, "platform", None) or "linux/amd64"
    if not isinstance(spec_platform, str) or not _PLATFORM.fullmatch(spec_platform):
        raise ValueError(f"ImageSpec.platform {spec_platform!r}: the kaniko builder builds one platform (os/arch)")
    packages = list(spec.packages or ())
    base_image = spec.base_image
    if base_image is None:
        version = spec.python_version or default_python_version()
        if not isinstance(version, str) or not _PYTHON_VERSION.fullmatch(version):
            raise ValueError(f"ImageSpec.python_version {version!r} is not a Python version such as '3.11'")
        base_image = f"python:{version}-slim-bookworm"
        if flytekit_version and not any(_requirement_name(p) == "flytekit" for p in packages if isinstance(p, str)):
            packages.insert(0, f"flytekit=={flytekit_version}")
    elif spec.python_version is not None:
        raise ValueError(
            f"ImageSpec.python_version {spec.python_version!r} with a base_image: the kaniko builder uses the "
            "base image's Python (leave python_version unset, or base_image unset for python:<version>-slim)"
        )
    if not isinstance(base_image, str):
        raise TypeError(f"ImageSpec.base_image must be a str (or an ImageSpec built first), got {base_image!r}")
    env = spec.env or {}
    if not isinstance(env, dict):
        raise TypeError(f"ImageSpec.env must be a dict of str, got {env!r}")
    extra_args = spec.pip_extra_args
    entrypoint = spec.entrypoint
    return Recipe(
        base_image=base_image,
        packages=tuple(packages),
        apt_packages=tuple(spec.apt_packages or ()),
        conda_packages=tuple(spec.conda_packages or ()),
        conda_channels=tuple(spec.conda_channels or ()),
        env=tuple((k, v) for k, v in env.items()),
        commands=tuple(spec.commands or ()),
        python_exec=spec.python_exec or "python3",
        pip_index=spec.pip_index,
        pip_extra_index_url=tuple(spec.pip_extra_index_url or ()),
        pip_extra_args=tuple(shlex.split(extra_args)) if extra_args else (),
        requirements=bool(spec.requirements),
        files=has_files,
        entrypoint=tuple(entrypoint) if entrypoint is not None else None,
        image_id=getattr(spec, "id", None),
    )


def _requirement_name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._\-]*", requirement)
    return re.sub(r"[-_.]+", "-", match.group(0)).lower() if match else ""
