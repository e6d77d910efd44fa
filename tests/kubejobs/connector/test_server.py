"""`kubejobs serve`'s TLS settings: both files or neither, each one readable PEM, refused before anything binds.
Serving itself (health, TLS handshakes, jobs over gRPC) is tested in tests/e2e/test_served_connector.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from flytekitplugins.kubejobs.cli import main
from flytekitplugins.kubejobs.connector.server import TlsFiles, server_credentials


@pytest.mark.parametrize(
    ("cert", "key", "missing"), [("tls.crt", None, "--tls-key-file"), (None, "tls.key", "--tls-cert-file")]
)
def test_half_a_tls_configuration_is_refused(cert: str | None, key: str | None, missing: str) -> None:
    with pytest.raises(ValueError, match=f"without {missing}"):
        TlsFiles.from_options(cert, key)


def test_an_unreadable_or_non_pem_file_is_named(tmp_path: Path) -> None:
    key = tmp_path / "tls.key"
    key.write_text("-----BEGIN PRIVATE KEY-----\n")
    with pytest.raises(ValueError, match=r"cannot read the TLS certificate '.*/absent\.crt'"):
        server_credentials(TlsFiles(tmp_path / "absent.crt", key))
    cert = tmp_path / "tls.crt"
    cert.write_bytes(b"\x00not a certificate")
    with pytest.raises(ValueError, match=r"the TLS certificate '.*/tls\.crt' is not a PEM file"):
        server_credentials(TlsFiles(cert, key))


def test_the_cli_fails_in_one_line_before_serving(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["serve", "--port", "0", "--tls-cert-file", str(tmp_path / "tls.crt")])
    assert result.exit_code == 1
    assert "--tls-cert-file was given without --tls-key-file" in result.output
