#!/usr/bin/env bash
# Issue 27's many-core yardstick on the lent machine: unpack a JRE and Apache 4.9.7's jars, install the release
# wheel with --target, run benches/bench_scale.py (node of N vs one rmq_core broker vs one Apache broker).
#   devicekit/run.sh [bench_scale args...]     ($OUT receives the log and JSON; the kit: benches/device/make_kit.sh)
set -uo pipefail
ROOT=$PWD; KIT=$ROOT/devicekit; OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
T=${DEVTMP:-/tmp/devkit}; mkdir -p "$T/stub"
PY=${PY:-python3}
t0=$(date +%s)
"$PY" - "$KIT" "$T" <<'PYEOF'
import sys, tarfile, os
kit, t = sys.argv[1], sys.argv[2]
with tarfile.open(os.path.join(kit, "jre.tar.xz")) as tf: tf.extractall(t)
lib = os.path.join(os.getcwd(), "compat/apache/target/lib"); os.makedirs(lib, exist_ok=True)
with tarfile.open(os.path.join(kit, "apache-lib.tar")) as tf: tf.extractall(lib)
PYEOF
cp "$KIT/apache-build-stamp" compat/apache/target/.build-stamp
printf '#!/bin/sh\necho "mvn stub: not on this machine" >&2; exit 1\n' > "$T/stub/mvn"; chmod +x "$T/stub/mvn"
export PATH="$T/jre/bin:$T/stub:$PATH" JAVA_HOME="$T/jre"
"$PY" -m pip install -q --no-index --no-deps --disable-pip-version-check --target "$T/py" "$KIT"/wheels/*.whl || exit 3
export PYTHONPATH="$T/py"
echo "setup $(( $(date +%s) - t0 )) s; $(nproc) cores; $(free -g | awk '/Mem/{print $2}') GiB; $("$PY" -V)"
"$PY" -c 'import rmq_core, rmq_core._core, uvloop, orjson; print("rmq_core from", rmq_core.__file__)' || exit 4
java -version 2>&1 | head -1
compat/apache/build.sh 2>&1 | tail -1
"$PY" benches/bench_scale.py --json "$OUT/scale.json" "$@" 2>&1 | tee "$OUT/scale.log"
echo "total $(( $(date +%s) - t0 )) s"
