#!/usr/bin/env bash
# Installs a built wheel into a fresh virtual environment per Python (3.11, 3.12, 3.13 from pyenv) and checks it
# works there: pip install with no Rust toolchain on PATH and only binary packages (nothing is compiled), then
# the base install holding only rmq_core, orjson and uvloop, "rmq_core[spark]" resolving PySpark (pip --dry-run),
# round_trip.py (name server + broker + producer + pull consumer through the public API), the CPython layout checks
# (tests/store/test_cpython_layout.py) and `rmq-core serve`
# started, answering `rmq-core topic list`, and stopped with SIGTERM (exit 0).
#   compat/wheel/check_wheel.sh [dist/rmq_core-*.whl]      (./dev wheel runs it after building)
# Env: CHECK_WHEEL_PYTHONS="3.11 3.12 3.13" (minor versions to test; each must exist under ~/.pyenv/versions).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$(dirname "$HERE")")
WHEEL=${1:-$(ls "$ROOT"/dist/rmq_core-*.whl 2>/dev/null | head -1)}
[ -f "$WHEEL" ] || { echo "check_wheel: no wheel (build one with ./dev wheel)" >&2; exit 2; }
WHEEL=$(cd "$(dirname "$WHEEL")" && pwd)/$(basename "$WHEEL")
PYTHONS=${CHECK_WHEEL_PYTHONS:-3.11 3.12 3.13}
# what `pip install rmq_core` may bring on Linux, sorted: orjson (frames' JSON) and uvloop (the brokers' and clients'
# event loop, c748c81); anything more belongs in an extra. ./dev test runs this check on the dev wheel (Python 3.11),
# so a new base dependency fails CI until this line and the README's install section agree with it.
BASE_INSTALL="orjson rmq-core uvloop"
WORK=$(mktemp -d /tmp/rmq-check-wheel.XXXXXX)
SERVE_PID=""
cleanup() {
  if [ -n "$SERVE_PID" ]; then kill "$SERVE_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
# a PATH with no Rust toolchain (no ~/.cargo/bin) and no pyenv shims: what a user without a compiler set-up has
CLEAN_PATH=$(printf '%s' "$PATH" | tr ':' '\n' | grep -v -e '/\.cargo/bin' -e '/\.pyenv/' -e '/\.venv/' | paste -sd: -)

fail=0
for minor in $PYTHONS; do
  py=$(ls -d "$HOME"/.pyenv/versions/"$minor".*/bin/python"$minor" 2>/dev/null | sort -V | tail -1)
  if [ -z "$py" ]; then echo "check_wheel: Python $minor not found under ~/.pyenv/versions" >&2; fail=1; continue; fi
  env_dir=$WORK/venv-$minor
  "$py" -m venv "$env_dir"
  start=$(date +%s.%N)
  if ! env -i HOME="$HOME" PATH="$env_dir/bin:$CLEAN_PATH" "$env_dir/bin/pip" install -q --disable-pip-version-check \
      --only-binary=:all: "$WHEEL" </dev/null >"$WORK/pip-$minor.log" 2>&1; then
    echo "FAIL python $minor: pip install"; cat "$WORK/pip-$minor.log"; fail=1; continue
  fi
  secs=$(echo "$(date +%s.%N) - $start" | bc)
  # the base install is what the client and broker need (orjson), nothing more
  installed=$("$env_dir/bin/python" -m pip list --format=freeze --disable-pip-version-check --exclude pip --exclude setuptools | cut -d= -f1 | tr 'A-Z_' 'a-z-' | sort | paste -sd' ' -)
  if [ "$installed" != "$BASE_INSTALL" ]; then echo "FAIL python $minor: the base install pulled: $installed"; fail=1; continue; fi
  # the spark extra pulls PySpark (resolved, not installed: --dry-run)
  env -i HOME="$HOME" PATH="$env_dir/bin:$CLEAN_PATH" "$env_dir/bin/pip" install -q --disable-pip-version-check --dry-run \
    --report "$WORK/spark-$minor.json" "rmq_core[spark] @ file://$WHEEL" </dev/null >"$WORK/spark-$minor.log" 2>&1 || true
  spark=$("$env_dir/bin/python" -c 'import json, sys; r = json.load(open(sys.argv[1])); print(" ".join(sorted(i["metadata"]["name"].lower() + "==" + i["metadata"]["version"] for i in r["install"])))' "$WORK/spark-$minor.json" 2>/dev/null || true)
  case " $spark " in *" pyspark=="*) ;; *) echo "FAIL python $minor: rmq_core[spark] does not pull pyspark: ${spark:-$(cat "$WORK/spark-$minor.log")}"; fail=1; continue ;; esac
  if env -i HOME="$HOME" PATH="$env_dir/bin:$CLEAN_PATH" command -v cargo rustc >/dev/null 2>&1; then
    echo "check_wheel: cargo/rustc still on the clean PATH" >&2; exit 1
  fi
  # round trip, from a directory outside the source tree so that only the installed wheel is importable
  mkdir -p "$WORK/run-$minor" && cd "$WORK/run-$minor"
  if ! out=$(env -i HOME="$HOME" PATH="$env_dir/bin:$CLEAN_PATH" "$env_dir/bin/python" "$HERE/round_trip.py" "$WORK/run-$minor/store" 2>&1); then
    echo "FAIL python $minor: round trip"; echo "$out"; fail=1; continue
  fi
  # every CPython layout assumption of the native module, in this interpreter (rust/rmq-py/src/cpython/mod.rs)
  if ! layout=$(env -i HOME="$HOME" PATH="$env_dir/bin:$CLEAN_PATH" "$env_dir/bin/python" "$ROOT/tests/store/test_cpython_layout.py" 2>&1); then
    echo "FAIL python $minor: CPython layout assumptions"; echo "$layout"; fail=1; continue
  fi
  echo "layout python $minor: $(printf '%s\n' "$layout" | grep -c '^ok ') checks ok, $(printf '%s\n' "$layout" | tail -1)"
  # rmq-core serve on free ports; its first line names the addresses. The output files exist before the child opens
  # them: the loop below may read before the forked child has run its redirections (a loaded machine did)
  : >"$WORK/serve-$minor.out"; : >"$WORK/serve-$minor.err"
  env -i HOME="$HOME" PATH="$env_dir/bin:$CLEAN_PATH" "$env_dir/bin/rmq-core" serve --namesrv-port 0 --port 0 \
    --dir "$WORK/run-$minor/serve-store" >"$WORK/serve-$minor.out" 2>"$WORK/serve-$minor.err" </dev/null &
  SERVE_PID=$!
  ns=""
  for _ in $(seq 1 200); do
    ns=$(sed -n 's/^rmq-core serve: name server \([0-9.]*:[0-9]*\),.*/\1/p' "$WORK/serve-$minor.out")
    [ -n "$ns" ] && break
    kill -0 "$SERVE_PID" 2>/dev/null || break
    sleep 0.05
  done
  if [ -z "$ns" ]; then echo "FAIL python $minor: rmq-core serve did not start"; cat "$WORK/serve-$minor.err"; fail=1; SERVE_PID=""; continue; fi
  topics=""
  for _ in $(seq 1 100); do  # the broker registers its topics right after it starts listening
    topics=$(env -i HOME="$HOME" PATH="$env_dir/bin:$CLEAN_PATH" "$env_dir/bin/rmq-core" topic list -n "$ns" 2>&1 || true)
    printf '%s\n' "$topics" | grep -qx TBW102 && break
    sleep 0.05
  done
  kill -TERM "$SERVE_PID"
  rc=0; wait "$SERVE_PID" || rc=$?
  SERVE_PID=""
  if ! printf '%s\n' "$topics" | grep -qx TBW102; then echo "FAIL python $minor: topic list answered: $topics"; fail=1; continue; fi
  if [ "$rc" -ne 0 ]; then echo "FAIL python $minor: rmq-core serve exited $rc after SIGTERM"; cat "$WORK/serve-$minor.err"; fail=1; continue; fi
  grep -q "shutting down" "$WORK/serve-$minor.out" || { echo "FAIL python $minor: serve did not shut down cleanly"; fail=1; continue; }
  printf 'OK   python %s: pip install %.1f s (only binary packages, no cargo on PATH) installed [%s]; [spark] resolves [%s]; round trip %s; serve %s answered topic list (%s topics), SIGTERM exit 0\n' \
    "$("$env_dir/bin/python" -c 'import sys; print(sys.version.split()[0])')" "$secs" "$installed" "$spark" "$out" "$ns" "$(printf '%s\n' "$topics" | grep -c .)"
done
exit $fail
