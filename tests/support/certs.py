"""Throw-away TLS material made with the ``openssl`` CLI (no Python crypto package needed).

``make_certs(dir)`` writes a CA, a server certificate for ``127.0.0.1``/``localhost``
signed by it, and a client certificate signed by it, and returns their paths.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

OPENSSL_TIMEOUT_S = 60


@dataclass(frozen=True)
class Certs:
    ca_cert: Path
    ca_key: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    peer_cert: Path  # both serverAuth and clientAuth: cluster peers (mutual TLS)
    peer_key: Path


def openssl_available() -> bool:
    return shutil.which("openssl") is not None


def _run(*args: str, cwd: Path) -> None:
    subprocess.run(
        ["openssl", *args],
        cwd=str(cwd),
        check=True,
        capture_output=True,
        timeout=OPENSSL_TIMEOUT_S,
    )


def _leaf(d: Path, name: str, cn: str, ext: str) -> None:
    extfile = d / f"{name}.ext"
    extfile.write_text(ext)
    _run("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", f"{name}-key.pem", cwd=d)
    _run(
        "req", "-new", "-key", f"{name}-key.pem", "-subj", f"/CN={cn}", "-out", f"{name}.csr", cwd=d
    )
    _run(
        "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca-key.pem",
        "-CAcreateserial", "-days", "2", "-sha256", "-extfile", extfile.name,
        "-out", f"{name}.pem", cwd=d,
    )  # fmt: skip


def make_certs(d: Path) -> Certs:
    """Create CA, server and client certificates in ``d``."""
    d.mkdir(parents=True, exist_ok=True)
    _run("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "ca-key.pem", cwd=d)
    _run(
        "req", "-x509", "-new", "-key", "ca-key.pem", "-sha256", "-days", "2",
        "-subj", "/CN=trijet test CA", "-out", "ca.pem",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d,
    )  # fmt: skip
    _leaf(
        d,
        "server",
        "localhost",
        "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n",
    )
    _leaf(
        d,
        "client",
        "trijet-test-client",
        "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=clientAuth\n",
    )
    _leaf(
        d,
        "peer",
        "localhost",
        "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n",
    )
    return Certs(
        d / "ca.pem",
        d / "ca-key.pem",
        d / "server.pem",
        d / "server-key.pem",
        d / "client.pem",
        d / "client-key.pem",
        d / "peer.pem",
        d / "peer-key.pem",
    )
