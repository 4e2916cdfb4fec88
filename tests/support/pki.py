"""A throw-away certificate authority for tests of TLS over loopback: a CA, a server
certificate for prometheus.test and 127.0.0.1, and a client certificate, made by the openssl
command line (a prerequisite: skipped where it is missing, failed with CI=true).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.prerequisites import need_program


@dataclass(frozen=True)
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def _openssl(command: str, *, cwd: Path) -> None:
    # No argument of these commands contains a space.
    subprocess.run(['openssl', *command.split()], cwd=cwd, check=True, capture_output=True)


def make_pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """A throw-away CA, a server certificate for prometheus.test and 127.0.0.1, a client one.

    Made with the openssl command line (`tests.support.prerequisites`: skipped where it is missing,
    failed with CI=true): the `cryptography` package is not in the project's environment.
    """
    need_program('openssl')
    d = tmp_path_factory.mktemp('pki')
    ec = '-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes'
    _openssl(
        f'req -x509 {ec} -keyout ca.key -out ca.pem -days 2 -subj /CN=test-ca'
        ' -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign',
        cwd=d,
    )
    for name, extensions in (
        ('server', 'subjectAltName=DNS:prometheus.test,IP:127.0.0.1\nextendedKeyUsage=serverAuth'),
        ('client', 'extendedKeyUsage=clientAuth'),
    ):
        (d / f'{name}.ext').write_text(
            f'{extensions}\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n'
            'authorityKeyIdentifier=keyid\nsubjectKeyIdentifier=hash\n'
        )
        _openssl(f'req {ec} -keyout {name}.key -out {name}.csr -subj /CN={name}', cwd=d)
        _openssl(
            f'x509 -req -in {name}.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out {name}.pem'
            f' -days 2 -extfile {name}.ext',
            cwd=d,
        )
    return Pki(d / 'ca.pem', d / 'server.pem', d / 'server.key', d / 'client.pem', d / 'client.key')
