#!/usr/bin/env bash
# Builds ./devicekit (git-ignored, ~40 MiB): what benches/bench_scale.py needs on a lent many-core machine that has
# Python 3.12 but no Java, Maven or network: a JRE made with jlink (tar.xz), Apache RocketMQ 4.9.7's server jars
# (compat/apache/target/lib without bcprov/bcpkix/bcutil/zstd-jni/rocketmq-tools, which the broker does not load
# here), the release wheel (maturin --zig, manylinux2014), orjson, uvloop and pytest for cp312, and run.sh.
#   benches/device/make_kit.sh            then, on the device (carry ["devicekit"]):
#   OUT=$OUT devicekit/run.sh --brokers 8 --clients 1,4,8 --rounds 2 --apache-jvm runbroker
# Issue 27's figures were taken this way (16 cores: about 140 s for three sides, two rounds).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD; KIT=$ROOT/devicekit; VENV=$ROOT/.venv
TMP=$(mktemp -d /tmp/devicekit.XXXXXX); trap 'rm -rf "$TMP"' EXIT
compat/apache/build.sh >/dev/null </dev/null
rm -rf "$KIT"; mkdir -p "$KIT/wheels"
PATH="$VENV/bin:$PATH" "$VENV/bin/maturin" build --release --zig --compatibility manylinux2014 --quiet -o "$TMP/wheel" </dev/null
cp "$TMP"/wheel/rmq_core-*.whl "$KIT/wheels/"
"$VENV/bin/pip" download -q --disable-pip-version-check --only-binary=:all: --python-version 3.12 \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --implementation cp --abi cp312 \
  -d "$KIT/wheels" "orjson>=3.9,<4" "uvloop>=0.19" pytest </dev/null
jlink --add-modules java.base,java.desktop,java.naming,java.sql,java.logging,java.xml,java.management,jdk.management,jdk.sctp,jdk.unsupported,jdk.crypto.ec \
  --strip-debug --no-header-files --no-man-pages --output "$TMP/jre"
(cd "$TMP" && tar cJf "$KIT/jre.tar.xz" jre)
(cd compat/apache/target/lib && tar cf "$KIT/apache-lib.tar" $(ls | grep -v -e bcprov -e bcpkix -e bcutil -e zstd-jni -e rocketmq-tools))
cp compat/apache/target/.build-stamp "$KIT/apache-build-stamp"
cp benches/device/run.sh "$KIT/run.sh"
du -sh "$KIT"
