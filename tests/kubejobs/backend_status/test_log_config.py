"""``LogConfig``: Flyte's ``plugins.logs`` keys and defaults (flyte-backend-behaviour.md §2.3, §5)."""

from __future__ import annotations

import doctest
from typing import Any

import pytest
from flytekitplugins.kubejobs.backend import logs as logs_module
from flytekitplugins.kubejobs.backend import status as status_module
from flytekitplugins.kubejobs.backend.logs import LogConfig, MessageFormat, TemplateLogPlugin


def test_defaults_are_propellers() -> None:
    config = LogConfig()
    assert config.kubernetes_enabled is True
    assert config.kubernetes_template_uri == (
        "http://localhost:30082/#!/log/{{ .namespace }}/{{ .podName }}/pod?namespace={{ .namespace }}"
    )
    assert config.kubernetes_url == ""
    assert (config.cloudwatch_enabled, config.stackdriver_enabled) == (False, False)
    assert (config.templates, dict(config.dynamic_log_links)) == ((), {})
    assert LogConfig.from_flyte_config({}) == config


def test_every_key_is_read() -> None:
    section = {
        "kubernetes-enabled": False,
        "kubernetes-url": "https://k",
        "kubernetes-template-uri": "https://k/{{ .podName }}",
        "cloudwatch-enabled": True,
        "cloudwatch-region": "eu-west-1",
        "cloudwatch-log-group": "g",
        "cloudwatch-template-uri": "https://cw",
        "stackdriver-enabled": True,
        "gcp-project": "p",
        "stackdriver-logresourcename": "r",
        "stackdriver-template-uri": "https://sd",
        "templates": [{"displayName": "T", "templateUris": ["https://t"], "messageFormat": 2}],
        "dynamic-log-links": {"ide": {"displayName": "IDE", "templateUris": ["https://ide"]}},
    }
    config = LogConfig.from_flyte_config(section)
    assert config == LogConfig(
        kubernetes_enabled=False,
        kubernetes_url="https://k",
        kubernetes_template_uri="https://k/{{ .podName }}",
        cloudwatch_enabled=True,
        cloudwatch_region="eu-west-1",
        cloudwatch_log_group="g",
        cloudwatch_template_uri="https://cw",
        stackdriver_enabled=True,
        gcp_project="p",
        stackdriver_logresourcename="r",
        stackdriver_template_uri="https://sd",
        templates=(TemplateLogPlugin("T", ("https://t",), MessageFormat.JSON),),
        dynamic_log_links={"ide": TemplateLogPlugin("IDE", ("https://ide",))},
    )


def test_section_overlays_a_base_and_keeps_what_it_leaves_out() -> None:
    base = LogConfig.empty()
    config = LogConfig.from_flyte_config({"cloudwatch-enabled": True}, base=base)
    assert (config.kubernetes_enabled, config.cloudwatch_enabled) == (False, True)
    assert LogConfig.from_flyte_config({"templates": None}).templates == ()


@pytest.mark.parametrize(
    ("section", "error", "names"),
    [
        ({"kubernetes-enabeld": True}, ValueError, "kubernetes-enabeld"),
        ({"kubernetes-enabled": "yes"}, TypeError, "plugins.logs.kubernetes-enabled"),
        ({"kubernetes-url": 3}, TypeError, "plugins.logs.kubernetes-url"),
        ({"templates": {"displayName": "x"}}, TypeError, "plugins.logs.templates"),
        ({"templates": [{"displayName": "x", "templateUris": "https://one"}]}, TypeError, "templateUris"),
        ({"templates": [{"displayName": "x", "templateUri": ["u"]}]}, ValueError, "templateUri"),
        ({"templates": [{"displayName": "x", "messageFormat": "XML"}]}, ValueError, "messageFormat"),
        ({"dynamic-log-links": ["ide"]}, TypeError, "plugins.logs.dynamic-log-links"),
    ],
)
def test_bad_sections_name_the_key(section: dict[str, Any], error: Any, names: str) -> None:
    with pytest.raises(error, match=names.replace(".", r"\.")):
        LogConfig.from_flyte_config(section)


def test_direct_construction_is_checked() -> None:
    with pytest.raises(TypeError, match=r"LogConfig\.kubernetes_enabled"):
        LogConfig(kubernetes_enabled="true")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"LogConfig\.templates\[0\]"):
        LogConfig(templates=({"displayName": "x"},))  # type: ignore[arg-type]
    assert TemplateLogPlugin("x", ["u"], "json").message_format is MessageFormat.JSON  # type: ignore[arg-type]


@pytest.mark.parametrize("module", [logs_module, status_module], ids=lambda m: m.__name__)
def test_docstring_examples_run(module: Any) -> None:
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
