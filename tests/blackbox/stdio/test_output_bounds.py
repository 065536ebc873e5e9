"""The runner: no shell, bounded output, and no process outliving its call."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def _peak_rss_of_call(tmp_path: Path, tool_text: str, tool: str) -> tuple[int, str]:
    path = tmp_path / "big.toml"
    path.write_text(tool_text)
    # VmHWM, not ru_maxrss: ru_maxrss survives exec, so it would count the forking pytest process.
    code = ("import sys\nsys.argv = ['mcpwrap', 'call', sys.argv[1], sys.argv[2]]\n"
            "from mcpwrap.cli.main import main\ntry:\n    main()\nexcept SystemExit:\n    pass\n"
            "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0].split()[1]\n"
            "print('PEAK', hwm, file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", code, str(path), tool], check=False, capture_output=True, text=True, timeout=120)
    peak_kib = int(done.stderr.rsplit("PEAK", 1)[1])
    return peak_kib // 1024, done.stdout


def test_500mb_output_is_capped_with_bounded_memory(tmp_path: Path) -> None:
    peak_mib, stdout = _peak_rss_of_call(tmp_path, """
[tools.big]
command = ["head", "-c", "500000000", "/dev/zero"]
max_output = "1MiB"
timeout = "60s"
""", "big")
    assert "[output truncated: " in stdout
    assert peak_mib < 150, peak_mib


def test_stderr_flood_is_bounded(tmp_path: Path) -> None:
    peak_mib, stdout = _peak_rss_of_call(tmp_path, """
[tools.flood]
shell = "head -c 200000000 /dev/zero | tr '\\\\0' 'e' >&2; echo survived"
timeout = "60s"
""", "flood")
    assert "survived" in stdout
    assert peak_mib < 150, peak_mib
