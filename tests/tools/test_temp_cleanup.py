"""The suite's helpers that make directories outside pytest's tmp_path remove them when their process ends: the
mqadmin home (tests/support/mqadmin.py) and the live fuzz broker's store (fuzz/live_broker.py); ``./dev test`` left
``rmq-mqadmin-home-*`` and ``rmq-fuzz-live-*`` in /tmp."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from support.helpers import subprocess_env

ROOT = Path(__file__).resolve().parents[2]


def _made_then_gone(code: str) -> None:
    env = subprocess_env()
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "tests"), str(ROOT / "fuzz"), env.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    made = r.stdout.strip().splitlines()[-1]
    assert made.startswith(os.path.realpath("/")) and os.path.basename(made), made
    assert not os.path.exists(made), f"{made} left behind"


def test_mqadmin_home_is_removed_at_exit() -> None:
    _made_then_gone(
        "from support.mqadmin import mqadmin_home; import os; h = mqadmin_home(); assert os.path.isdir(h); print(h)"
    )


def test_live_fuzz_broker_store_is_removed_at_exit() -> None:
    code = (
        "import tempfile, live_broker\n"
        "made = []\n"
        "real = tempfile.mkdtemp\n"
        "tempfile.mkdtemp = lambda **kw: made.append(real(**kw)) or made[-1]\n"
        "live_broker.run(50, seed=3)\n"
        "print(made[0])\n"
    )
    _made_then_gone(code)
