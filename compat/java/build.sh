#!/usr/bin/env bash
# Builds the Java interop harness (compat/java): Apache RocketMQ's Java client from Maven Central plus the small
# JSON-lines programs in src/. Idempotent and needs no standard input: it rebuilds only when pom.xml or a source file
# changed since the last good build (target/.build-stamp holds their hash). Maven's repository is the default ~/.m2
# unless MAVEN_REPO_LOCAL is set. Progress goes to stderr; the last line on stdout is the class path:
#   target/rmq-compat-java.jar:target/lib/*   (absolute paths)
# `build.sh VERSION` (e.g. 5.5.0) builds the same programs against that rocketmq-client into target-VERSION/.
# `build.sh grpc5` builds the 5.x gRPC client harness (grpc5/: rocketmq-client-java) into grpc5/target/.
set -euo pipefail
cd "$(dirname "$0")"
VERSION=${1:-}
if [ "$VERSION" = grpc5 ]; then
  cd grpc5
  VERSION=
fi
HERE=$PWD
OUT=$HERE/target
version_opt=()
if [ -n "$VERSION" ]; then
  OUT=$HERE/target-$VERSION
  version_opt=("-Drocketmq.version=$VERSION" "-Dharness.build.dir=$OUT")
fi
STAMP=$OUT/.build-stamp
JAR=$OUT/rmq-compat-java.jar

command -v mvn >/dev/null 2>&1 || { echo "compat/java/build.sh: mvn (Maven 3.8+) is not on PATH" >&2; exit 2; }
command -v java >/dev/null 2>&1 || { echo "compat/java/build.sh: java (JDK 17) is not on PATH" >&2; exit 2; }

hash=$( (find pom.xml src -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum; echo "$VERSION") | sha256sum | cut -d' ' -f1)
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$hash" ] && [ -f "$JAR" ] && [ -d "$OUT/lib" ]; then
  echo "compat/java: up to date" >&2
else
  echo "compat/java: building (mvn package, dependencies from Maven Central)" >&2
  rm -f "$STAMP"
  rm -rf "$OUT/lib"
  repo_opt=()
  [ -n "${MAVEN_REPO_LOCAL:-}" ] && repo_opt=("-Dmaven.repo.local=$MAVEN_REPO_LOCAL")
  # Maven 3.8's -q still writes ANSI resets (ESC[0m) on both streams, even with -B and style.color=never: stripped
  mvn -B -q -ntp -Dstyle.color=never "${repo_opt[@]}" "${version_opt[@]}" -f "$HERE/pom.xml" package </dev/null 2>&1 \
    | sed -e 's/\x1b\[[0-9;]*m//g' -e '/^$/d' >&2
  echo "$hash" > "$STAMP"
fi
echo "$JAR:$OUT/lib/*"
