"""The fork server of the suite's served control planes (tests/support/forked.py starts one per
test process): it imports the server once, then forks a child for each `firstlume serve` it is
asked for. The child is the real server, as `python -m firstlume serve …` would be: its own
process, environment, working directory, log file, listening socket, executors and exit code; it
only skips the interpreter's start and the imports, which cost about 2 s of CPU per served
control plane (the suite starts hundreds, on 2 cores).

Protocol, one JSON object per line: the test process writes {"argv", "env", "cwd", "log",
"status"} on stdin and reads {"pid"} back on stdout; when a child exits, its exit code (negative:
the signal that ended it, as subprocess.Popen.returncode says) is written to the "status" file.
Nothing else runs here: no thread and no event loop exists when the server forks.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import signal
import sys

# What `firstlume serve` imports, before any fork (cli.cmd_serve imports these lazily).
import uvicorn
import uvicorn.lifespan.on
import uvicorn.loops.auto
import uvicorn.protocols.http.auto
import uvicorn.protocols.websockets.websockets_sansio_impl  # noqa: F401

import firstlume.app
import firstlume.cli
import firstlume.logs

PR_SET_PDEATHSIG = 1


def _die_with(parent_signal: int) -> None:
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, parent_signal)


def _serve_child(request: dict[str, object], wakeup: int) -> None:
    """In the forked child: becomes `firstlume <argv>` and never returns."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        os.close(wakeup)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        _die_with(signal.SIGTERM)  # as die_with_parent: never outlive the suite
        log = os.open(str(request["log"]), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        os.close(null)
        # In place: modules that captured os.environ (as a default argument) see the new one.
        os.environ.clear()
        os.environ.update(request["env"])  # type: ignore[arg-type]
        os.chdir(str(request["cwd"]))
        argv = [str(arg) for arg in request["argv"]]  # type: ignore[attr-defined]
        sys.argv = ["firstlume", *argv]
        code = firstlume.cli.main(argv)
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _reap(statuses: dict[int, str]) -> None:
    while statuses:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        path = statuses.pop(pid, None)
        if path is None:
            continue
        code = os.waitstatus_to_exitcode(status)
        with open(path + ".tmp", "w") as handle:
            handle.write(str(code))
        os.replace(path + ".tmp", path)


def main() -> None:
    _die_with(signal.SIGKILL)  # the test process is gone: so is this, and so (SIGTERM) its children
    wakeup_read, wakeup_write = os.pipe()
    os.set_blocking(wakeup_read, False)
    os.set_blocking(wakeup_write, False)
    signal.set_wakeup_fd(wakeup_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    statuses: dict[int, str] = {}
    requests = sys.stdin.buffer
    while True:
        ready, _, _ = select.select([requests, wakeup_read], [], [])
        if wakeup_read in ready:
            with contextlib.suppress(BlockingIOError):
                os.read(wakeup_read, 4096)
            _reap(statuses)
        if requests in ready:
            line = requests.readline()
            if not line:
                return  # the test process closed the pipe
            request = json.loads(line)
            pid = os.fork()
            if pid == 0:
                os.close(wakeup_read)
                _serve_child(request, wakeup_write)
            statuses[pid] = str(request["status"])
            sys.stdout.write(json.dumps({"pid": pid}) + "\n")
            sys.stdout.flush()
            _reap(statuses)


if __name__ == "__main__":
    main()
