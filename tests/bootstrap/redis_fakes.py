"""A real Redis for the cache tests: Debian's redis-server on loopback, TLS only (a test CA made with openssl) and
AUTH, as the managed Redis of each cloud is configured. Stop and start it to play an outage."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bootstrap_fakes import free_port

AUTH_TOKEN = "Cache-e2e_0123456789+abc="
"""A token of the form every cloud accepts (inferstack.components.argument_checks.CACHE_AUTH_TOKEN_PATTERN)."""


def missing_redis() -> str | None:
    for tool in ("redis-server", "redis-cli", "openssl"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (make test installs redis-server, redis-tools)"
    return None


def make_certificates(directory: Path) -> tuple[Path, Path, Path]:
    """(CA certificate, server certificate for 127.0.0.1, server key), made with openssl."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, ca, key, csr, cert = (directory / name for name in ("ca.key", "ca.pem", "server.key", "server.csr",
                                                                 "server.pem"))
    extensions = directory / "san.cnf"
    extensions.write_text("subjectAltName=IP:127.0.0.1\n")
    for command in (
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=inferstack test CA",
         "-keyout", str(ca_key), "-out", str(ca)],
        ["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", str(key), "-out",
         str(csr)],
        ["openssl", "x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial",
         "-days", "2", "-extfile", str(extensions), "-out", str(cert)],
    ):
        subprocess.run(command, check=True, capture_output=True, timeout=60)
    for path in (ca, cert, key):
        path.chmod(0o644)  # the chroot's nginx master reads the CA; redis-server runs as this user
    return ca, cert, key


@dataclass
class Redis:
    port: int
    ca: Path
    cert: Path
    key: Path
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        config = self.ca.with_name("redis.conf")  # the token in a file, never on a command line
        config.write_text(f"port 0\ntls-port {self.port}\nbind 127.0.0.1\ntls-cert-file {self.cert}\n"
                          f"tls-key-file {self.key}\ntls-ca-cert-file {self.ca}\ntls-auth-clients no\n"
                          f'requirepass "{AUTH_TOKEN}"\nsave ""\nappendonly no\n')
        config.chmod(0o600)
        self.process = subprocess.Popen(["redis-server", str(config)], stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while self.cli("PING", check=False).strip() != "PONG":
            assert self.process.poll() is None, "redis-server exited"
            assert time.monotonic() < deadline, "redis-server did not answer"
            time.sleep(0.1)

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=20)
            self.process = None
        deadline = time.monotonic() + 20
        while _listening(self.port):
            assert time.monotonic() < deadline, "redis-server still listening"
            time.sleep(0.1)

    def cli(self, *command: str, check: bool = True) -> str:
        result = subprocess.run(
            ["redis-cli", "--tls", "--cacert", str(self.ca), "-h", "127.0.0.1", "-p", str(self.port), *command],
            capture_output=True, text=True, timeout=30, env={**os.environ, "REDISCLI_AUTH": AUTH_TOKEN})
        if check:
            assert result.returncode == 0, result.stderr
        return result.stdout

    def keys(self) -> list[str]:
        return [line for line in self.cli("--scan", "--pattern", "inferstack:*").splitlines() if line]


def _listening(port: int) -> bool:
    with contextlib.closing(socket.socket()) as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1", port)) == 0


@contextlib.contextmanager
def redis_server(directory: Path) -> Iterator[Redis]:
    ca, cert, key = make_certificates(directory)
    server = Redis(free_port(), ca, cert, key)
    server.start()
    try:
        yield server
    finally:
        server.stop()
