"""Certificates and keys for the test control plane (the `cryptography` package; nothing leaves the machine)."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# Long enough that no rotator (the training operator's cert-controller renews 90 days ahead) replaces them.
VALIDITY = datetime.timedelta(days=3650)


def _pem_key(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    # RSA keys as PKCS#1 ("RSA PRIVATE KEY"): the training operator's cert-controller parses its CA key so.
    private_format = (
        serialization.PrivateFormat.TraditionalOpenSSL
        if isinstance(key, rsa.RSAPrivateKey)
        else serialization.PrivateFormat.PKCS8
    )
    return key.private_bytes(serialization.Encoding.PEM, private_format, serialization.NoEncryption())


@dataclass(frozen=True)
class KeyPair:
    cert: Path
    key: Path


class CertificateAuthority:
    """A self-signed CA that issues serving and client certificates into ``directory``."""

    def __init__(self, directory: Path, name: str, dns_names: tuple[str, ...] = (), rsa_key: bool = False) -> None:
        """``rsa_key``: an RSA CA key instead of an EC one (for consumers that only read RSA CA keys)."""
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey = (
            rsa.generate_private_key(public_exponent=65537, key_size=2048)
            if rsa_key
            else ec.generate_private_key(ec.SECP256R1())
        )
        now = datetime.datetime.now(datetime.timezone.utc)
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(True, False, True, False, False, True, True, False, False), critical=True
            )  # digital signature, key encipherment, cert sign, CRL sign
        )
        if dns_names:  # a CA that must also verify as a host name (cert-controller checks its CA that way)
            builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in dns_names]), False)
        self._cert = builder.sign(self._key, hashes.SHA256())
        self.pair = self._write(name, self._cert, self._key)

    @property
    def cert_pem(self) -> bytes:
        return self._cert.public_bytes(serialization.Encoding.PEM)

    @property
    def key_pem(self) -> bytes:
        return _pem_key(self._key)

    def _write(self, stem: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> KeyPair:
        pair = KeyPair(self.directory / f"{stem}.crt", self.directory / f"{stem}.key")
        pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        pair.key.write_bytes(_pem_key(key))
        pair.key.chmod(0o600)
        return pair

    def issue(
        self,
        stem: str,
        common_name: str,
        organizations: tuple[str, ...] = (),
        dns_names: tuple[str, ...] = (),
        ips: tuple[str, ...] = (),
    ) -> KeyPair:
        """A certificate for a server (when given names or IPs) or a client (CN = user, O = groups)."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
        attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
        server = bool(dns_names or ips)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(attributes))
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]),
                critical=False,
            )
        )
        if server:
            names: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
            names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        return self._write(stem, builder.sign(self._key, hashes.SHA256()), key)


def service_account_keys(directory: Path) -> KeyPair:
    """The RSA key pair that signs service-account tokens (``cert`` holds the public key)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pair = KeyPair(directory / "sa.pub", directory / "sa.key")
    pair.key.write_bytes(_pem_key(key))
    pair.key.chmod(0o600)
    pair.cert.write_bytes(
        key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return pair
