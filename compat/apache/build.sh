#!/usr/bin/env bash
# Fetches Apache RocketMQ's name server and broker (compat/apache/pom.xml: rocketmq-namesrv and rocketmq-broker from
# Maven Central) with all their dependencies into compat/apache/target/lib. Idempotent and needs no standard input:
# it runs Maven only when pom.xml changed since the last good fetch (target/.build-stamp holds its hash). Maven's
# repository is the default ~/.m2 unless MAVEN_REPO_LOCAL is set. Progress goes to stderr; the last line on stdout is
# the class path (absolute): target/lib/*
# `build.sh VERSION` (e.g. 5.3.3) fetches that release instead into target-VERSION/; a 5.x release also brings
# rocketmq-proxy (the pom's `proxy` profile), which tests/support/apache_proxy.py runs in the broker's JVM.
set -euo pipefail
cd "$(dirname "$0")"
HERE=$PWD
VERSION=${1:-}
OUT=$HERE/target
version_opt=()
if [ -n "$VERSION" ]; then
  OUT=$HERE/target-$VERSION
  version_opt=("-Drocketmq.version=$VERSION" "-Dapache.build.dir=$OUT")
  case $VERSION in 5.*) version_opt+=("-Drocketmq.proxy=true") ;; esac
fi
STAMP=$OUT/.build-stamp

command -v mvn >/dev/null 2>&1 || { echo "compat/apache/build.sh: mvn (Maven 3.8+) is not on PATH" >&2; exit 2; }

hash=$( (sha256sum pom.xml; echo "$VERSION") | sha256sum | cut -d' ' -f1)
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$hash" ] && [ -d "$OUT/lib" ]; then
  echo "compat/apache: up to date" >&2
else
  echo "compat/apache: fetching rocketmq-namesrv and rocketmq-broker (Maven Central)" >&2
  rm -f "$STAMP"
  rm -rf "$OUT/lib"
  repo_opt=()
  [ -n "${MAVEN_REPO_LOCAL:-}" ] && repo_opt=("-Dmaven.repo.local=$MAVEN_REPO_LOCAL")
  # Maven 3.8's -q still writes ANSI resets (ESC[0m) on both streams, even with -B and style.color=never: stripped
  mvn -B -q -ntp -Dstyle.color=never "${repo_opt[@]}" "${version_opt[@]}" -f "$HERE/pom.xml" package </dev/null 2>&1 \
    | sed -e 's/\x1b\[[0-9;]*m//g' -e '/^$/d' >&2
  echo "$hash" > "$STAMP"
fi
echo "$OUT/lib/*"
