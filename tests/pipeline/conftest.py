"""Spark fixtures: one local Spark session and one JetStream server of each kind for tests/pipeline.

Package-scoped: the JVM and the servers go away when this package's tests are done, before the
rest of the suite runs.

* ``spark`` — the session (``local[2,2]``: two cores, a failed task is retried once), with the
  ``jetstream`` source registered.  Workers run this interpreter (``PYSPARK_PYTHON``) and import
  this worktree's ``pipeline`` (``PYTHONPATH``).  Skips with the reason when pyspark is not
  installed or no ``java`` can be found.
* ``js`` — parametrised over ``trijet`` and ``reference``: a running ``-js`` server shared by
  the package's tests (each uses its own stream names).
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.servers import KINDS, REPO_ROOT, ServerProcess, reference_binary, start_server


def spark_unavailable() -> str | None:
    """Why Spark tests cannot run here, or None."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return "pyspark not installed (pip install -e .[spark])"
    java_home = os.environ.get("JAVA_HOME")
    if shutil.which("java") is None and not (java_home and Path(java_home, "bin/java").exists()):
        return "no java on PATH or JAVA_HOME (Spark needs Java 17+; ./dev test installs it)"
    return None


@pytest.fixture(scope="package")
def spark() -> Iterator[Any]:
    reason = spark_unavailable()
    if reason:
        pytest.skip(reason)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")
    from pyspark.sql import SparkSession

    from pipeline.jetstream import JetStreamDataSource

    jvm = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"
    session = (
        SparkSession.builder.master("local[2,2]")
        .appName("trijet-pipeline-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.extraJavaOptions", jvm)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.streaming.noDataMicroBatches.enabled", "false")
        .config("spark.executorEnv.PYTHONPATH", os.environ["PYTHONPATH"])
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    session.dataSource.register(JetStreamDataSource)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="package")
def js_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ServerProcess]]:
    started: dict[str, ServerProcess] = {}
    try:
        yield started
    finally:
        for sp in started.values():
            sp.stop()


@pytest.fixture(params=KINDS)
def js(
    request: pytest.FixtureRequest,
    js_servers: dict[str, ServerProcess],
    tmp_path_factory: pytest.TempPathFactory,
) -> ServerProcess:
    kind = str(request.param)
    if kind == "reference" and reference_binary() is None:
        pytest.skip("reference nats-server not installed")
    sp = js_servers.get(kind)
    if sp is None or not sp.alive():
        wd = tmp_path_factory.mktemp(f"spark-{kind}")
        sp = start_server(kind, ["-js", "-sd", str(wd / "store")], workdir=wd)  # type: ignore[arg-type]
        js_servers[kind] = sp
    return sp
