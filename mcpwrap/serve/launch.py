"""`mcpwrap serve` on stdio, from spawn to exit: the front answers while the trio driver imports in a
thread, then `stdio.serve` takes over (or never runs, if the session ends first; see `front`).

Nothing here is imported before the first answers that the front does not need: trio, the runner
and the driver load in the import thread.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from mcpwrap.config import model as config_module
from mcpwrap.serve.common import FLUSH_S, STOP_SIGNALS, Options, file_signature, log, new_core, prepare, stderr
from mcpwrap.serve.front import LOADED, Front

if TYPE_CHECKING:
    import threading

FRONT_SWITCH_S = 0.0005           # the GIL switch interval while trio imports: how long a request may wait for it


def run(config: config_module.Config, options: Options, after_first_answers: Callable[[], None]) -> int:
    """`mcpwrap serve` on stdio: the front while the driver imports, then trio, or never if the session
    ends first. `after_first_answers` runs once the requests already waiting at start are answered
    (start-up checks whose findings only go to stderr), before the driver's import begins."""
    prepare(options)
    try:
        front = Front(new_core(config, options))
        signature = file_signature(config.path) if options.watch else None   # before any request: no change missed
        if not serve_front(front, config, after_first_answers):
            return 0
        import trio                       # loaded by now, with the driver

        from mcpwrap.serve import stdio
        gc.freeze()                       # as `prepare`'s: what the import made lives as long as the server
        return trio.run(stdio.serve, config, options, front, signature)
    finally:
        stderr.flush(FLUSH_S)


def serve_front(front: Front, config: config_module.Config, after_first_answers: Callable[[], None]) -> bool:
    """Serve with the front while the driver imports in a thread; True once it has, to hand over."""
    wake, loaded = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    failure: list[BaseException] = []
    importer = None
    previous = signal.set_wakeup_fd(loaded)
    for signum in STOP_SIGNALS:                   # kept until trio's receiver takes over: see stdio.serve
        audited = signum == signal.SIGHUP and config.audit is not None     # SIGHUP reopens it, never stops
        signal.signal(signum, _nothing_yet if audited else front.caught)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(FRONT_SWITCH_S)
    try:
        with front:
            front.answer_waiting(wake)
            after_first_answers()
            import threading              # only now: the answers already due are written (see common.StderrLog)

            gate, ended = threading.Lock(), list[bool]()
            importer = threading.Thread(target=import_driver, args=(config, loaded, failure, gate, ended),
                                        name="mcpwrap-import", daemon=True)
            importer.start()
            if front.serve(wake):
                importer.join()           # it has written `loaded`: it is ending
                if failure:
                    raise failure[0]
                return True
            front.finish(wake)
        with gate:                        # a containment set up meanwhile is whole (and removed at exit); none
            ended.append(True)            # is set up after: the session ends without waiting for trio's import
        return False
    finally:
        sys.setswitchinterval(interval)
        signal.set_wakeup_fd(previous)
        if importer is None or not importer.is_alive():   # else it still writes `loaded` once done
            os.close(wake)
            os.close(loaded)


def _nothing_yet(signum: int, frame: object) -> None:
    """SIGHUP before trio, with an audit trail: nothing is open yet to reopen, and the server goes on."""


def import_driver(config: config_module.Config, loaded: int, failure: list[BaseException], gate: threading.Lock,
                   ended: list[bool]) -> None:
    """In a thread: import trio, the runner and the driver; unless the session `ended` in the
    front meanwhile, say which containment is in force (setting it up)."""
    try:
        from mcpwrap.run import process as runner  # noqa: F401
        from mcpwrap.serve import stdio  # noqa: F401  (imported for the hand-over)
        with gate:
            if not ended:
                log(f"mcpwrap: serving {len(config.tools)} tool(s) from {config.path}; "
                    f"containment: {runner.containment()}")
    except BaseException as exc:  # re-raised by the front at the hand-over
        failure.append(exc)
    finally:
        os.write(loaded, LOADED)

