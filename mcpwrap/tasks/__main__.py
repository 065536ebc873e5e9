"""`python -m mcpwrap.tasks STORE ID SECRET`: a task's detached supervisor (`supervisor.main`).

It leaves without the interpreter's teardown, as `mcpwrap call` does (`cli.main.entry`): unwinding
every module trio and the runner loaded takes CPU right after the task's terminal status is visible,
when a client may be creating its next task. The exit handlers still run (the runner's cgroup
clean-up is one) and stdio is flushed.
"""

import atexit
import os
import sys

from mcpwrap.tasks.supervisor import main

code = main()
atexit._run_exitfuncs()
sys.stdout.flush()
sys.stderr.flush()
os._exit(code)
