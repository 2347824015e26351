"""binlake on a real standalone cluster: a master and a worker started here with pyspark's
``spark-class``, the worker in a clean environment (no PYTHONPATH to this checkout, its own working
directory), so executors see neither the driver's relative paths nor its source tree. ``sync`` and
``format("binlog")`` from relative paths must equal a local run; executors must import binlake from
the zip the driver shipped."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from binlake.demo import compare_to_truth
from binlake.generate import generate
from binlake.spark import session
from binlake.spark.sinks.delta import delta_tables, read_delta

JDK = Path("/usr/lib/jvm/java-17-openjdk-amd64")

# the driver, run in its own process (a test run's process may already hold a local SparkSession, and
# a JVM's working directory is the one it started in), from the directory holding the series: the
# CLI's sync, then format("binlog"), and where executors found binlake: JSON on the last stdout line
DRIVER = """
import json, os, sys
from binlake.cli import main
master, target = sys.argv[1:]
code = main(["sync", "bin", "--to", f"delta:{target}", "--master", master])
from binlake.spark.session import spark_session
spark = spark_session(master)
rows = sorted(spark.read.format("binlog").load("bin").toJSON().collect())

def probe(_):
    import binlake.spark.source as s
    return {"file": s.__file__, "cwd": os.getcwd(), "pythonpath": os.environ.get("PYTHONPATH", "")}

seen = spark.sparkContext.parallelize([0], 1).map(probe).collect()[0]
print(json.dumps({"code": code, "rows": rows, "executor": seen}))
"""


def spark_class() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / "spark-class"


def java_home() -> str:
    if os.environ.get("JAVA_HOME"):
        return os.environ["JAVA_HOME"]
    if JDK.exists():
        return str(JDK)
    java = shutil.which("java")
    if java is None:
        pytest.skip(
            "Java 17 is needed for a standalone Spark cluster (apt-get install openjdk-17-jre-headless)"
        )
    return str(Path(java).resolve().parents[1])


def daemon_env(home: Path) -> dict[str, str]:
    """A clean environment for master and worker: no PYTHONPATH, no venv, nothing of the driver's."""
    import pyspark

    conf = home / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "JAVA_HOME": java_home(),
        "SPARK_HOME": str(Path(pyspark.__file__).parent),
        "SPARK_CONF_DIR": str(conf),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_DAEMON_MEMORY": "512m",
    }


def start(args: list[str], cwd: Path, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen(
            [str(spark_class()), *args],
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stopped as a whole in the finally
        )


def stop(proc: subprocess.Popen[bytes]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
            proc.wait(timeout=10)
            return
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue


def wait_for_worker(ui: int, procs: list[subprocess.Popen[bytes]], logs: list[Path]) -> None:
    """Until the master's status page lists one alive worker (the master's or worker's log on failure)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in procs):
            break
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=2) as r:
                if json.load(r).get("aliveworkers", 0) >= 1:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise AssertionError("the standalone cluster did not come up:\n" + "\n".join(tail(f) for f in logs))


def tail(log: Path) -> str:
    return f"--- {log.name}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-30:])


def bound_ports(log: Path, proc: subprocess.Popen[bytes]) -> tuple[int, int]:
    """The ports a master started with ``--port 0 --webui-port 0`` bound (from its log): ports
    picked free beforehand could be taken by another test before the master binds them, and Spark
    then moves to the next one silently (``spark.port.maxRetries``)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        text = log.read_text(errors="replace")
        rpc = re.search(r"Starting Spark master at spark://[^:]+:(\d+)", text)
        ui = re.search(r"Bound MasterWebUI to .*, and started at https?://[^:]+:(\d+)", text)
        if rpc and ui:
            return int(rpc.group(1)), int(ui.group(1))
        time.sleep(0.3)
    raise AssertionError("the standalone master did not start:\n" + tail(log))


@contextmanager
def standalone_cluster(home: Path) -> Iterator[str]:
    """A master and one worker (1 core, 1g) on 127.0.0.1, on ports they pick; yields the master URL."""
    env = daemon_env(home)
    logs = [home / "master.log", home / "worker.log"]
    work = home / "work"
    work.mkdir()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        procs.append(start(
            ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", "0",
             "--webui-port", "0"], home, env, logs[0],
        ))  # fmt: skip
        port, ui = bound_ports(logs[0], procs[0])
        procs.append(start(
            ["org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}", "--host", "127.0.0.1",
             "--cores", "1", "--memory", "1g", "--work-dir", str(work), "--webui-port", "0"],
            work, env, logs[1],
        ))  # fmt: skip
        wait_for_worker(ui, procs, logs)
        yield f"spark://127.0.0.1:{port}"
    finally:
        for p in reversed(procs):
            stop(p)


def tables(target: Path) -> dict[str, list[dict]]:
    return {n: sorted(read_delta(target, n).to_pylist(), key=str) for n in delta_tables(target)}


def run_driver(master: str, target: str, cwd: Path) -> dict[str, Any]:
    env = {**os.environ, "BINLAKE_DRIVER_MEMORY": "1g"}
    env.pop("SPARK_LOCAL_IP", None)  # the session decides (loopback: the master is on 127.0.0.1)
    run = subprocess.run(
        [sys.executable, "-c", DRIVER, master, target], cwd=cwd, env=env, capture_output=True, timeout=300
    )
    assert run.returncode == 0, run.stderr.decode(errors="replace")[-3000:]
    out: dict[str, Any] = json.loads(run.stdout.decode().strip().splitlines()[-1])
    assert out["code"] == 0
    return out


@pytest.mark.slow
def test_sync_and_binlog_source_on_a_standalone_cluster_equal_local(tmp_path: Path) -> None:
    data = tmp_path / "data"
    result = generate(data / "bin", seed=5, target_bytes=150_000, max_file_size=40_000, ddl_every=0)
    assert len(result.files) >= 3  # several partitions, so several executor tasks
    with standalone_cluster(tmp_path / "cluster") as master:
        out = run_driver(master, "lake", data)
    local = run_driver("local[*]", "lake-local", data)

    seen = out["executor"]
    assert ".zip" in seen["file"] and Path(seen["file"]).name == "source.py", seen  # the shipped zip
    assert Path(seen["cwd"]).resolve() != data.resolve()
    src = str(Path(session.__file__).resolve().parents[2])
    assert src not in seen["pythonpath"].split(os.pathsep), seen

    assert len(local["rows"]) > 100 and out["rows"] == local["rows"]
    got = tables(data / "lake")
    assert set(got) == {"shop.customers", "shop.orders", "shop.alltypes"}
    assert got == tables(data / "lake-local")
    assert all(
        synced == truth for synced, truth in compare_to_truth(result.truth_dir, data / "lake").values()
    )


def test_the_shipped_zip_is_the_package_the_driver_imported() -> None:
    import binlake

    package = Path(binlake.__file__).resolve().parent
    with zipfile.ZipFile(session.package_zip()) as zf:
        names = set(zf.namelist())
        assert zf.read("binlake/spark/source.py") == (package / "spark" / "source.py").read_bytes()
    assert {"binlake/__init__.py", "binlake/cli/__init__.py", "binlake/spark/stream.py"} <= names
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)
    expected = {
        f.relative_to(package.parent).as_posix()
        for f in package.rglob("*.py")
        if "__pycache__" not in f.parts
    }
    assert expected <= names


@pytest.mark.parametrize(
    ("master", "local", "loopback"),
    [
        ("local[*]", True, False),
        ("local", True, False),
        ("local-cluster[2,1,1024]", False, False),
        ("spark://127.0.0.1:7077", False, True),
        ("spark://localhost:7077", False, True),
        ("spark://10.1.2.3:7077", False, False),
        ("spark://127.0.0.1:7077,db2:7077", False, False),
        ("yarn", False, False),
    ],
)
def test_master_kinds(master: str, local: bool, loopback: bool) -> None:
    assert (session.is_local(master), session.on_loopback(master)) == (local, loopback)


def test_loopback_only_for_local_masters_and_the_callers_choice_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "environ", os.environ.copy())  # whatever it sets is undone
    os.environ.pop("SPARK_LOCAL_IP", None)
    session.set_up_environment("spark://10.1.2.3:7077")
    assert "SPARK_LOCAL_IP" not in os.environ  # executors elsewhere must reach the driver
    session.set_up_environment("local[2]")
    assert os.environ["SPARK_LOCAL_IP"] == "127.0.0.1"
    os.environ["SPARK_LOCAL_IP"] = "10.9.8.7"
    session.set_up_environment("local[2]")
    assert os.environ["SPARK_LOCAL_IP"] == "10.9.8.7"
