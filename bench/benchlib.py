"""Helpers shared by the benchmark scripts: their command-line options, scratch directories,
free loopback ports, waiting for a listener, and process CPU from /proc."""
import atexit
import os
import shutil
import socket
import sys
import tempfile
import time


def _help_asked():
    """`-h`/`--help` prints the running script's docstring (its usage) and exits."""
    if "-h" in sys.argv or "--help" in sys.argv:
        print((sys.modules["__main__"].__doc__ or "").strip())
        sys.exit(0)


def arg(name, default):
    """The value after `name` on the command line, as `default`'s type, else `default`."""
    _help_asked()
    if name not in sys.argv:
        return default
    i = sys.argv.index(name)
    try:
        return type(default)(sys.argv[i + 1])
    except (IndexError, ValueError):
        kind = "number" if isinstance(default, (int, float)) else "value"
        raise SystemExit(f"{name} needs a {kind} after it (see --help)")


def flag(name):
    """True when `name` is on the command line."""
    _help_asked()
    return name in sys.argv


def scratch(prefix):
    """A temporary directory removed when the script exits, however it exits."""
    path = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, path, True)
    return path


def free_port():
    """A free TCP port on 127.0.0.1 (bound and released)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port, what="a server"):
    """Waits (up to 10 s) until something accepts on 127.0.0.1:port."""
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"{what} did not start: nothing listens on {port}")


def _cpu_ticks(pid):
    """(user, system) clock ticks of a live process."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]), int(fields[12])


def proc_cpu(pid):
    """User+system CPU seconds of a live process."""
    return sum(_cpu_ticks(pid)) / os.sysconf("SC_CLK_TCK")


def proc_sys(pid):
    """System (kernel) CPU seconds of a live process."""
    return _cpu_ticks(pid)[1] / os.sysconf("SC_CLK_TCK")


def tree_cpu(root):
    """User+system CPU seconds of a process tree: every live process under `root` (itself
    included) plus what exited children left in their parents' cutime/cstime. The same sum
    `mailbench relay` reports for the system under test."""
    parent, ticks = {}, {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(name)
        parent[pid] = int(fields[1])
        ticks[pid] = sum(int(x) for x in fields[11:15])
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        total += ticks.get(pid, 0)
        stack.extend(p for p, pp in parent.items() if pp == pid)
    return total / os.sysconf("SC_CLK_TCK")
