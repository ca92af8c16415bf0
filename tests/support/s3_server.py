"""An S3 API server for the tests: moto's server mode (``moto.server.ThreadedMotoServer``) on
127.0.0.1, started once per test process; the code under test is boto3 over real HTTP. Each
caller gets a bucket of its own (:func:`fresh_s3_url`). Credentials are test values set in the
environment the tests run with, and ``ANYCODE_S3_ENDPOINT`` points at the server. When moto's
server mode is missing, the caller is skipped with the reason.
"""
from __future__ import annotations

import atexit
import itertools
import os

import pytest

_server: dict = {}
_buckets = itertools.count(1)
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "anycode-test", "AWS_SECRET_ACCESS_KEY": "anycode-test",
               "AWS_DEFAULT_REGION": "us-east-1"}


def endpoint() -> str:
    """The server's ``http://127.0.0.1:PORT`` (started on first use)."""
    if "url" not in _server:
        try:
            from moto.server import ThreadedMotoServer
        except ImportError:
            pytest.skip('moto\'s S3 server is not installed (pip install "moto[server]")')
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        host, port = server.get_host_and_port()
        _server.update(server=server, url=f"http://{host}:{port}")
        atexit.register(server.stop)
    return _server["url"]


def fresh_s3_url(monkeypatch: pytest.MonkeyPatch | None = None) -> str:
    """``s3://BUCKET/anycode`` of a new, empty bucket; the environment (via ``monkeypatch`` when
    given) holds the test credentials and ``ANYCODE_S3_ENDPOINT``."""
    import boto3

    url = endpoint()
    env = {**CREDENTIALS, "ANYCODE_S3_ENDPOINT": url}
    for name, value in env.items():
        if monkeypatch is not None:
            monkeypatch.setenv(name, value)
        else:
            os.environ[name] = value
    bucket = f"anycode-test-{os.getpid()}-{next(_buckets)}"
    boto3.client("s3", endpoint_url=url, region_name="us-east-1", aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                 aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"]).create_bucket(Bucket=bucket)
    return f"s3://{bucket}/anycode"
