"""An S3-compatible server on loopback for the object-storage tests: moto's server mode (the
``moto[server]`` package of the dev extras) in its own process -- a real HTTP endpoint that s3fs,
boto3 and Hadoop's S3A connector talk to, not an in-process mock.

    with S3Server().start() as s3:
        s3.endpoint_url            # http://127.0.0.1:<port>
        s3.create_bucket("drover-a")

Each server starts empty; ``stop()`` (or leaving the ``with``) ends the process.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

import httpx

from harness import http
from harness.localserver import stop_process
from harness.nodes import free_port

#: any credentials work: moto checks none unless asked to
ACCESS_KEY = "drover-test"
SECRET_KEY = "drover-test-secret"
REGION = "us-east-1"


class S3Server:
    def __init__(self, port: int | None = None, log_path: Path | None = None) -> None:
        self.port = port or free_port()
        self.log_path = log_path
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> S3Server:
        exe = shutil.which("moto_server", path=str(Path(sys.executable).parent))
        command = [exe] if exe else [sys.executable, "-m", "moto.server"]
        log = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL  # noqa: SIM115
        self._proc = subprocess.Popen(
            [*command, "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while True:
            if self._proc.poll() is not None:
                raise RuntimeError(f"moto_server exited with {self._proc.returncode}")
            try:
                if http.get(self.endpoint_url, timeout=1.0).status_code < 500:
                    return self
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"moto_server did not answer on {self.endpoint_url}")
            time.sleep(0.1)

    def client(self):  # type: ignore[no-untyped-def]
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name=REGION,
        )

    def create_bucket(self, name: str) -> None:
        self.client().create_bucket(Bucket=name)

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            stop_process(self._proc)
        self._proc = None

    def __enter__(self) -> S3Server:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
