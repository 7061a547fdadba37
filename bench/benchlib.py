"""Helpers shared by the benchmark scripts: their command-line options, scratch directories,
free loopback ports, waiting for a listener, process CPU from /proc, and the lab Dovecot the
mail-store benchmarks read."""
import atexit
import os
import re
import resource
import shutil
import socket
import subprocess
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


def cpu_children():
    """User+system CPU seconds of this script's finished children."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


class StoreLab:
    """`mailbench lab dovecot` (the binary `mb`), filled; stopped and removed on exit. Knows
    the port of `protocol` (IMAP, POP3), the users file and Dovecot's master pid."""

    def __init__(self, mb, tmp, protocol, users, per_user, size_k, doveconf=()):
        self.log = open(os.path.join(tmp, "lab.out"), "w+")
        extra = [a for kv in doveconf for a in ("--doveconf", kv)]
        self.proc = subprocess.Popen([mb, "lab", "dovecot", "--users", str(users), "--fill", str(per_user),
                                      "--fill-size", f"{size_k}k"] + extra, stdout=self.log, stderr=subprocess.STDOUT)
        deadline, text = time.time() + 120, ""
        while time.time() < deadline:
            self.log.seek(0)
            text = self.log.read()
            if "users and passwords" in text or self.proc.poll() is not None:
                break
            time.sleep(0.2)
        port = re.search(protocol + r" on 127\.0\.0\.1:(\d+)", text)
        users_file = re.search(r"\(for --users-file\) in (\S+);", text)
        conf = re.search(r"config (\S+)", text)
        if not (port and users_file and conf):
            self.proc.terminate()
            raise SystemExit(f"the lab did not start:\n{text}")
        self.port, self.users = int(port.group(1)), users_file.group(1)
        pidfile = os.path.join(os.path.dirname(conf.group(1)), "run", "master.pid")
        self.master = int(open(pidfile).read().strip())

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.proc.terminate()
        self.proc.wait(timeout=60)


def measure_client(tool, lab, cmd, parse):
    """Runs a client to completion: its parsed counts, wall time, its CPU and the lab
    store's (its process tree, exited children included) over the same span."""
    before_c, before_s = cpu_children(), tree_cpu(lab.master)
    t0 = time.time()
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    wall = time.time() - t0
    cpu, store = cpu_children() - before_c, tree_cpu(lab.master) - before_s
    if out.returncode != 0:
        raise SystemExit(f"{tool} failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
    return {"tool": tool, "wall_s": wall, "cpu_s": cpu, "store_cpu_s": store, **parse(out)}


def emit(text, out_dir, name):
    """Prints a benchmark's report and, with --out, keeps it as `out_dir/name` (the folder
    made when missing)."""
    print(text, end="")
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
        with open(os.path.join(out_dir, name), "w") as f:
            f.write(text)
