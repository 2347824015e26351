"""Run a command again and again, killing it (SIGKILL, whole process group) at random moments, then
once to the end: the fault loop behind the exactly-once tests."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time


def kill_then_finish(
    cmd: list[str], *, seed: int = 7, runs: int = 4, window: tuple[float, float] = (8, 25)
) -> int:
    """Returns how many runs were killed; raises if the final run fails."""
    rng = random.Random(seed)
    kills = 0
    for delay in [rng.uniform(*window) for _ in range(runs)]:
        p = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        time.sleep(delay)
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            kills += 1
        p.wait()
    final = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert final.returncode == 0, final.stderr[-3000:]
    return kills
