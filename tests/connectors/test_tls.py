"""TLS end to end: a private CA, a server that speaks TLS only (Debian's redis-server), and
a worker process that runs a job through it; mutual TLS (the client's certificate); a wrong
CA refused with one clear line. The settings' names are the same in the URL's query, the
keyword arguments and the environment (``echomq.connectors.tls``)."""

from __future__ import annotations

import asyncio
import pathlib
from collections.abc import Iterator

import pytest

from echomq import AsyncConnector, Connector, errors
from echomq.connectors import tls, urls
from echomq.tasks.app import App
from echomq.verbs import jobs
from tests.support import tls as support
from tests.support.cli import echomq, popen
from tests.support.polling import wait_for

pytestmark = pytest.mark.skipif(support.missing() is not None,
                                reason=support.missing() or "")


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> support.PKI:
    return support.make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def one_way(pki: support.PKI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    with support.tls_server(pki, tmp_path_factory.mktemp("tls1"), mutual=False) as port:
        yield port


@pytest.fixture(scope="module")
def mutual(pki: support.PKI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    with support.tls_server(pki, tmp_path_factory.mktemp("tls2"), mutual=True) as port:
        yield port


def run_one_job(tmp_path: pathlib.Path, url: str, env: dict[str, str], queue: str,
                tls_kw: dict[str, str]) -> None:
    """Enqueue through an App (``tls_kw`` its keyword arguments) and let an ``echomq worker``
    process (settings from ``env`` and the URL) run it."""
    app = App(url, **tls_kw)

    @app.task(queue=queue, name="tls_app.double")
    def double(n: int) -> int:
        return 2 * n

    (tmp_path / "tls_app.py").write_text(
        "from echomq import App\napp = App()\n"
        f"@app.task(queue='{queue}', keep_result=60)\ndef double(n):\n    return 2 * n\n")
    try:
        jid = double.enqueue(21)
        proc = popen("worker", "tls_app:app", url=url, cwd=tmp_path, env=env)
        try:
            wait_for(lambda: jobs.stats(app.connector(), queue)["completed"] == 1, 20,
                     "the worker ran the job over TLS")
        finally:
            proc.terminate()
            err = proc.communicate(timeout=15)[1].decode()
        assert proc.returncode == 0, err
        assert app.job(jid).result == 42
    finally:
        app.close()


@pytest.mark.slow
def test_a_private_ca_by_url_query_and_environment(tmp_path, pki, one_way, queue):
    plain = f"valkeys://127.0.0.1:{one_way}/0"
    # the worker reads the CA from the URL's query; the producer from its keyword argument
    run_one_job(tmp_path, f"{plain}?tls_ca={pki.ca}", {}, queue, {})
    run_one_job(tmp_path, plain, {"ECHOMQ_TLS_CA": str(pki.ca)}, queue + "e",
                {"tls_ca": str(pki.ca)})


@pytest.mark.slow
def test_mutual_tls_takes_the_client_certificate(tmp_path, pki, mutual, queue):
    url = f"valkeys://127.0.0.1:{mutual}/0"
    env = {"ECHOMQ_TLS_CA": str(pki.ca), "ECHOMQ_TLS_CERT": str(pki.client_cert),
           "ECHOMQ_TLS_KEY": str(pki.client_key)}
    run_one_job(tmp_path, url, env, queue,
                {"tls_ca": str(pki.ca), "tls_cert": str(pki.client_cert),
                 "tls_key": str(pki.client_key)})
    # without a certificate the server hangs up during the handshake
    with pytest.raises(errors.WireError):
        Connector.connect(f"{url}?tls_ca={pki.ca}")


def test_the_async_connector_and_the_verify_modes(pki, one_way):
    url = f"valkeys://127.0.0.1:{one_way}/0"

    async def ping(**kw: str) -> None:
        conn = await AsyncConnector.connect(url, **kw)
        await conn.call("PING")
        await conn.close()

    asyncio.run(ping(tls_ca=str(pki.ca)))
    asyncio.run(ping(tls_verify="none"))  # no CA: verification off
    # by IP the certificate's name matches (127.0.0.1 is in its SAN); "ca" skips the name
    with Connector.connect(f"valkeys://localhost:{one_way}/0?tls_ca={pki.ca}&tls_verify=ca"):
        pass


def test_a_wrong_ca_is_refused_with_one_clear_line(pki, one_way):
    url = f"valkeys://127.0.0.1:{one_way}/0?tls_ca={pki.other_ca}"
    with pytest.raises(errors.WireError, match="certificate verify failed"):
        Connector.connect(url)
    done = echomq("stats", "--url", url)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"echomq: TLS: the server at 127.0.0.1:{one_way} sent a "
                               "certificate no CA you trust signed")
    assert "tls_ca" in lines[0] and "ECHOMQ_TLS_CA" in lines[0]


def test_settings_are_refused_before_any_io(tmp_path, pki):
    with pytest.raises(errors.ConfigError, match="plain URL"):
        Connector.connect(f"valkey://127.0.0.1:1/0?tls_ca={pki.ca}")
    with pytest.raises(errors.ConfigError, match="plain URL"):
        App("valkey://127.0.0.1:1/0", tls_ca=str(pki.ca))
    with pytest.raises(errors.ConfigError, match="no such file"):
        App("valkeys://127.0.0.1:1/0", tls_ca=str(tmp_path / "nope.pem"))
    with pytest.raises(errors.ConfigError, match="tls_cert needs tls_key"):
        App("valkeys://127.0.0.1:1/0", tls_cert=str(pki.client_cert))
    with pytest.raises(errors.ConfigError, match="tls_verify must be one of"):
        App("valkeys://127.0.0.1:1/0?tls_verify=maybe")
    done = echomq("stats", "--url", f"valkeys://127.0.0.1:1/0?tls_ca={tmp_path}/nope.pem")
    assert done.returncode == 1 and "no such file" in done.stderr


def test_the_names_are_the_same_everywhere(pki):
    target = urls.parse(f"valkeys+cluster://a:1,b:2/0?tls_ca={pki.ca}&socket_timeout=5")
    assert target.tls and dict(target.tls_query) == {"tls_ca": str(pki.ca)}
    assert "tls_ca" not in target.url and "socket_timeout=5" in target.url
    env = {tls.ENV[n]: v for n, v in (("tls_ca", str(pki.ca)), ("tls_verify", "ca"))}
    got = tls.resolve(True, {}, {}, env)
    assert got == tls.TLS(str(pki.ca.resolve()), None, None, "ca")
    # a keyword argument wins over the query, which wins over the environment
    got = tls.resolve(True, {"tls_verify": "none"}, {"tls_verify": "full"}, env)
    assert got is not None and got.verify == "full"
    got = tls.resolve(True, {"tls_verify": "none"}, {}, env)
    assert got is not None and got.verify == "none"
    assert tls.resolve(False, {}, {}, env) is None  # a plain URL ignores the environment
    assert tls.NAMES == ("tls_ca", "tls_cert", "tls_key", "tls_verify")
    assert [tls.ENV[n] for n in tls.NAMES] == ["ECHOMQ_TLS_CA", "ECHOMQ_TLS_CERT",
                                               "ECHOMQ_TLS_KEY", "ECHOMQ_TLS_VERIFY"]


def test_a_missing_client_certificate_is_one_line_too(pki, mutual):
    done = echomq("stats", "--url", f"valkeys://127.0.0.1:{mutual}/0?tls_ca={pki.ca}")
    assert done.returncode == 1
    [line] = done.stderr.strip().splitlines()
    assert "client certificate" in line and "tls_cert and tls_key" in line


@pytest.mark.slow
def test_a_cluster_over_tls_runs_a_job(tmp_path, pki, queue):
    with support.tls_cluster(pki, tmp_path / "cluster") as ports:
        nodes = ",".join(f"127.0.0.1:{p}" for p in ports)
        url = f"valkeys+cluster://{nodes}?tls_ca={pki.ca}"
        run_one_job(tmp_path, url, {}, queue, {})
        run_one_job(tmp_path, f"valkeys+cluster://{nodes}", {"ECHOMQ_TLS_CA": str(pki.ca)},
                    queue + "e", {"tls_ca": str(pki.ca)})
