"""Disk figures as RocketMQ reports them (UtilAll#getDiskPartitionSpaceUsedPercent, MixAll#humanReadableByteCount).

- ``disk_partition_space_used_percent(path)``: the used share of the partition holding ``path`` as 4.9 computes it —
  used = total - free (``getFreeSpace``, f_bfree), the share of used + usable (``getUsableSpace``, f_bavail), rounded
  up to hundredths; ``-1.0`` when the path does not exist.
- ``human_readable_byte_count(n)``: ``"512 B"``, ``"1.5 KiB"``, ``"252.0 GiB"`` (binary units, one decimal).

Pure functions (they read the file system's statistics).
"""

from __future__ import annotations

import math
import os


def disk_partition_space_used_percent(path: str) -> float:
    if not path or not os.path.exists(path):
        return -1.0
    st = os.statvfs(path)
    total = st.f_blocks * st.f_frsize
    if total <= 0:
        return -1.0
    used = total - st.f_bfree * st.f_frsize
    entire = used + st.f_bavail * st.f_frsize
    if entire <= 0:
        return -1.0
    result = used * 100 // entire + (1 if used * 100 % entire else 0)
    return result / 100.0


def human_readable_byte_count(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    exp = int(math.log(n) / math.log(1024))
    return f"{n / 1024**exp:.1f} {'KMGTPE'[exp - 1]}iB"
