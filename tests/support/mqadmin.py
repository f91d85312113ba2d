"""Running Apache's own ``mqadmin`` (rocketmq-tools 4.9.7, ``org.apache.rocketmq.tools.command.MQAdminStartup``, on
compat/apache's class path) from tests, and parsing what it prints.

``run_mqadmin(namesrv, command, *args)`` runs one sub-command in a fresh JVM (``-n namesrv`` is added) and returns
its stdout; the tool's logback configuration (``conf/logback_tools.xml`` under a private ROCKETMQ_HOME) sends its own
logs to a file, so stdout is exactly what a person sees. ``parse_table(text)`` splits the tool's fixed-width tables
into rows of ``{column: value}`` (the column boundaries are the header's words; mqadmin left-aligns every column with
``%-Ns`` so a header word starts where its values start). ``version="5.3.3"`` runs rocketmq-tools 5.3.3 instead
(compat/apache/build.sh 5.3.3 fetches it with the broker). ``parse_kv(text)`` reads ``key : value`` lines
(brokerStatus, getBrokerConfig).

Invariants: every JVM started here is waited for and killed if it overruns its timeout; a run whose stderr carries
a Java exception raises ``MQAdminError`` with the output (mqadmin itself catches exceptions, prints the stack trace to
stderr and exits 0, so the exit code alone says nothing). Thread-safety: functions only; safe from any thread.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import subprocess
import tempfile
from typing import Any

from support.apache_rocketmq import server_classpath

MQADMIN_MAIN = "org.apache.rocketmq.tools.command.MQAdminStartup"

JVM_OPTS = ["-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Drocketmq.client.logUseSlf4j=true"]

LOGBACK_TOOLS = """<configuration>
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>{log}</file>
    <encoder><pattern>%d{{HH:mm:ss.SSS}} %-5level [%thread] %logger{{20}} - %msg%n</pattern></encoder>
  </appender>
  <root level="WARN"><appender-ref ref="FILE"/></root>
</configuration>
"""

LOGBACK_STATUS = re.compile(r"\d\d:\d\d:\d\d,\d{3} \|-")

_home: str | None = None


class MQAdminError(AssertionError):
    """mqadmin failed: a Java exception on stderr, a timeout, or a non-zero exit."""


def mqadmin_home() -> str:
    """A ROCKETMQ_HOME holding only ``conf/logback_tools.xml`` (created once per process)."""
    global _home
    if _home is None:
        home = tempfile.mkdtemp(prefix="rmq-mqadmin-home-")
        atexit.register(shutil.rmtree, home, ignore_errors=True)  # the run leaves nothing in the temp directory
        os.makedirs(os.path.join(home, "conf"))
        with open(os.path.join(home, "conf", "logback_tools.xml"), "w", encoding="utf-8") as f:
            f.write(LOGBACK_TOOLS.format(log=os.path.join(home, "tools.log")))
        _home = home
    return _home


def run_mqadmin(
    namesrv: str, command: str, *args: object, timeout: float = 60.0, check: bool = True, version: str | None = None
) -> str:
    """Run ``mqadmin <command> -n <namesrv> <args>`` and return its stdout (stderr appended when ``check`` is off).
    ``version``: another rocketmq-tools release on compat/apache's class path (e.g. "5.3.3"; default 4.9.7)."""
    home = mqadmin_home()
    cmd = [
        "java",
        *JVM_OPTS,
        f"-Drocketmq.home.dir={home}",
        f"-Duser.home={home}",
        "-cp",
        server_classpath(version),
        MQADMIN_MAIN,
        command,
        "-n",
        namesrv,
        *(str(a) for a in args),
    ]
    env = dict(os.environ, ROCKETMQ_HOME=home)
    try:
        # cwd: consumerStatus writes each client's running info to ./<now>/<clientId>
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL, cwd=home
        )
    except subprocess.TimeoutExpired as e:
        raise MQAdminError(f"mqadmin {command} timed out after {timeout}s:\n{e.stdout}\n{e.stderr}") from None
    failed = proc.returncode != 0 or re.search(r"^\S*(Exception|Error)\b", proc.stderr, re.M) is not None
    if check and failed:
        raise MQAdminError(
            f"mqadmin {command} {' '.join(map(str, args))} failed (exit {proc.returncode}):\n"
            f"--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
        )
    # 5.x: the shaded logback prints its own configuration status ("HH:MM:SS,mmm |-INFO in …") on stdout
    out = "".join(ln for ln in proc.stdout.splitlines(keepends=True) if not LOGBACK_STATUS.match(ln))
    return out if check else out + proc.stderr


def parse_table(text: str, first_column: str | None = None) -> list[dict[str, str]]:
    """The rows of the first fixed-width table in ``text`` (header: the first line starting with ``first_column``,
    or the first non-empty line), up to the first blank line after a row. Columns start where the header's
    ``#Name`` words start (mqadmin names every column ``#…``; ``#Diff Total`` is one name); a header without ``#`` is
    split at its words. A row's cell is its text under the column's span, stripped."""
    lines = text.splitlines()
    start = 0
    if first_column is not None:
        for i, ln in enumerate(lines):
            if ln.lstrip().startswith(first_column):
                start = i
                break
        else:
            raise MQAdminError(f"no table with a {first_column!r} column in:\n{text}")
    else:
        while start < len(lines) and not lines[start].strip():
            start += 1
    header = lines[start]
    pattern = r"#[^#]*?(?=\s+#|\s*$)" if "#" in header else r"\S+"
    spans = [(m.start(), m.group(0).strip()) for m in re.finditer(pattern, header)]
    rows: list[dict[str, str]] = []
    for ln in lines[start + 1 :]:
        if not ln.strip():
            if rows:
                break
            continue
        row: dict[str, str] = {}
        for i, (pos, name) in enumerate(spans):
            end = spans[i + 1][0] if i + 1 < len(spans) else len(ln)
            row[name] = ln[pos:end].strip()
        rows.append(row)
    return rows


def parse_kv(text: str) -> dict[str, str]:
    """``key : value`` lines (``%-32s: %s``) into a dict; lines without `` : `` are skipped."""
    out: dict[str, str] = {}
    for ln in text.splitlines():
        m = re.match(r"^\s*(\S+)\s*:\s?(.*)$", ln)
        if m and not ln.lstrip().startswith("#"):
            out[m.group(1)] = m.group(2).strip()
    return out


def mask(value: Any) -> str:
    """A value with its addresses, ports and long numbers (timestamps, offsets in a run) made comparable."""
    s = str(value)
    s = re.sub(r"\d+\.\d+\.\d+\.\d+(:\d+)?", "<addr>", s)
    s = re.sub(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(,\d{3})?", "<time>", s)
    return s
