"""A Ray head node of a test's own (`ray start --head` on a free port, its own temp folder and HOME), stopped by
killing its session: never `ray stop`, which would stop every Ray instance on a shared machine."""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator


@contextlib.contextmanager
def ray_head(tmp_path: Path, num_cpus: int = 2, cwd: Path | None = None) -> Iterator[tuple[str, dict[str, str]]]:
    """(address, env): the head's address, and an environment whose RAY_ADDRESS names it (so `address=auto`
    joins this cluster, not another one on the machine) and whose HOME holds no stale Ray token. The head and its
    workers run in `cwd` (default tmp_path): a job's relative output folder (Hydra's `multirun/...`) lands there,
    as on a machine where the user started `ray start --head` in the folder they work in."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    tmp = tempfile.mkdtemp(prefix="ray54c-", dir="/tmp")  # short: Ray's socket paths are length-limited
    ray_cli = str(Path(sys.executable).with_name("ray"))
    home = tmp_path / "ray-home"  # a Ray token someone left in ~/.ray/auth_token makes the head and clients disagree
    home.mkdir(parents=True, exist_ok=True)
    address = f"127.0.0.1:{port}"
    env = {"HOME": str(home), "RAY_ADDRESS": address, "RAY_TMPDIR": tmp}  # its clients share the head's temp folder
    full = {**os.environ, **env}
    head = subprocess.Popen([ray_cli, "start", "--head", "--block", f"--port={port}", f"--num-cpus={num_cpus}",
                             "--include-dashboard=false", f"--temp-dir={tmp}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, env=full, cwd=cwd or tmp_path)
    try:
        for _ in range(60):  # the head is up when `ray status` reaches it
            if subprocess.run([ray_cli, "status", f"--address={address}"], capture_output=True, timeout=60,
                              env=full).returncode == 0:
                break
            assert head.poll() is None, "ray start --head exited"
            time.sleep(2)
        yield address, env
    finally:
        os.killpg(head.pid, signal.SIGKILL)  # the head and what it started, in its own session
        head.wait(timeout=60)
        shutil.rmtree(tmp, ignore_errors=True)
