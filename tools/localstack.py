"""LocalStack in host mode, without Docker: its virtual environments, start, stop and status.

LocalStack runs from its own Python 3.13 venv (`.venvs/localstack`) and runs Lambda functions as local
processes on a second venv that holds only boto3 (`.venvs/lambda-runtime`), through the runtime executor
plugin in `infra/localstack/executor`. Everything a stack writes stays under `<root>/.localstack/<port>/`
(its pid file, LocalStack's home, its leases and the marker its function processes carry), so stacks on
two ports of one checkout never stop or clean up each other.

    python -m tools.localstack up|down|status [--root PATH] [--port N]
"""

# Only the standard library and pdfbatch's stdlib-only config and checkout at module level: this is
# imported by test fixtures and the deploy tooling, and must stay cheap and importable from any environment.

from __future__ import annotations

import argparse
import contextlib
import fcntl
import glob
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from pdfbatch.checkout import find_checkout, stack_home
from pdfbatch.config import DEFAULT_LOCALSTACK_PORT, LOCALSTACK_PORT_ENV, local_endpoint, local_port
from pdfbatch.errors import ConfigError

DEFAULT_PORT = DEFAULT_LOCALSTACK_PORT
PORT_ENV = LOCALSTACK_PORT_ENV
PYTHON313_ENV = "PDFBATCH_PYTHON313"  # an explicit python3.13 binary wins over discovery
# secretsmanager: the functions read the MySQL credentials and the API key there; cloudwatch: the template's
# alarms and dashboard; events: tally.announce puts each final batch's completion event on the default bus.
SERVICES = (
    "s3",
    "sqs",
    "lambda",
    "apigateway",
    "iam",
    "sts",
    "logs",
    "cloudformation",
    "secretsmanager",
    "cloudwatch",
    "events",
)
START_TIMEOUT = 90.0
# Names shared with the executor plugin (infra/localstack/executor): it reads these from its environment.
LAMBDA_PYTHON_ENV = "PDFBATCH_LAMBDA_PYTHON"
HOME_ENV = "PDFBATCH_LOCALSTACK_HOME"
UNTRIMMED_ENV = "PDFBATCH_LOCALSTACK_UNTRIMMED"  # bench only: LocalStack as it comes (see _spawn)
_STAMP = ".pdfbatch-stamp"
_AUTO_STOP = "auto-stop"  # present while LocalStack was started by a lease holder (see release())
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # the endpoint is always local


class LocalStackError(Exception):
    """LocalStack could not be set up, started or stopped; the message says what to do."""


@dataclass(frozen=True)
class Layout:
    """Where everything lives under the repository root, for the stack on `port`."""

    root: Path
    port: int = DEFAULT_PORT

    @property
    def requirements(self) -> Path:
        """LocalStack's pinned requirements."""
        return self.root / "infra" / "localstack" / "requirements.txt"

    @property
    def runtime_requirements(self) -> Path:
        """The Lambda runtime interpreter's requirements (boto3 only)."""
        return self.root / "infra" / "localstack" / "runtime-requirements.txt"

    @property
    def executor(self) -> Path:
        """The runtime executor plugin package."""
        return self.root / "infra" / "localstack" / "executor"

    @property
    def localstack_venv(self) -> Path:
        """LocalStack's own venv."""
        return self.root / ".venvs" / "localstack"

    @property
    def runtime_venv(self) -> Path:
        """The venv whose interpreter runs Lambda handlers."""
        return self.root / ".venvs" / "lambda-runtime"

    @property
    def localstack_python(self) -> Path:
        """LocalStack's interpreter."""
        return self.localstack_venv / "bin" / "python"

    @property
    def runtime_python(self) -> Path:
        """The Lambda runtime interpreter."""
        return self.runtime_venv / "bin" / "python"

    @property
    def home(self) -> Path:
        """Everything this port's LocalStack writes at run time (its function processes carry it too)."""
        return stack_home(self.root, self.port)

    @property
    def log_file(self) -> Path:
        """LocalStack's log (the previous run's is kept as .1)."""
        return self.home / "logs" / "localstack.log"

    @property
    def pid_file(self) -> Path:
        """Pid of the running LocalStack (also its process group id)."""
        return self.home / "localstack.pid"


@dataclass(frozen=True)
class Handle:
    """A running LocalStack: where it answers and whether this call started it."""

    endpoint: str
    pid: int | None
    started: bool


@dataclass(frozen=True)
class Status:
    """What `status` reports."""

    endpoint: str
    pid: int | None
    healthy: bool
    services: dict[str, str]
    rss_mb: float


def _say(message: str) -> None:
    print(f"localstack: {message}", file=sys.stderr, flush=True)


def default_endpoint() -> str:
    """http://127.0.0.1:4566, or the port in PDFBATCH_LOCALSTACK_PORT (config.local_endpoint)."""
    try:
        return local_endpoint()
    except ConfigError as exc:
        raise LocalStackError(str(exc)) from exc


def port_of(endpoint: str | None) -> int:
    """The gateway port of `endpoint` (default: default_endpoint())."""
    return local_port(endpoint or default_endpoint())


def layout_for(root: Path, endpoint: str | None = None) -> Layout:
    """The layout of the stack answering at `endpoint` (default: default_endpoint())."""
    return Layout(root.resolve(), port_of(endpoint))


def find_root(start: Path | None = None) -> Path:
    """The repository root: the nearest folder above `start` (default: cwd) holding infra/localstack.

    The installed package's own checkout only when `start` is in none: tooling acts on the checkout it is
    run from, even when its venv's package was installed from another clone.
    """
    root = find_checkout(start)
    if root is not None:
        return root
    raise LocalStackError("Cannot find the pdfbatch checkout: run from inside it or pass --root.")


# --- Python 3.13 and the virtual environments ----------------------------------------------------------


def _is_python313(candidate: str) -> bool:
    try:
        done = subprocess.run(  # noqa: S603 - a python binary we are probing
            [candidate, "--version"], capture_output=True, text=True, timeout=20, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and (done.stdout + done.stderr).strip().startswith("Python 3.13")


def find_python313() -> str:
    """A working python3.13 binary, or LocalStackError saying how to get one."""
    candidates: list[str] = []
    if explicit := os.environ.get(PYTHON313_ENV):
        candidates.append(explicit)
    # A pyenv shim exists on PATH even when the global pyenv version is not 3.13 (and then it fails),
    # so every candidate is run, not just found.
    if on_path := shutil.which("python3.13"):
        candidates.append(on_path)
    pyenv_roots = [os.environ.get("PYENV_ROOT", ""), str(Path.home() / ".pyenv")]
    if shutil.which("pyenv"):
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            done = subprocess.run(
                ["pyenv", "root"],  # noqa: S607 - pyenv found on PATH just above
                capture_output=True,
                text=True,
                timeout=20,
                check=False,
            )
            pyenv_roots.insert(0, done.stdout.strip())
    for pyenv_root in filter(None, pyenv_roots):
        candidates += sorted(glob.glob(f"{pyenv_root}/versions/3.13*/bin/python3.13"), reverse=True)
    candidates += ["/usr/local/bin/python3.13", "/usr/bin/python3.13"]
    seen: set[str] = set()
    for candidate in candidates:
        if candidate in seen:
            continue
        seen.add(candidate)
        if _is_python313(candidate):
            return candidate
    raise LocalStackError(
        "LocalStack needs python3.13 and none was found: install it (e.g. `pyenv install 3.13`) "
        f"or set {PYTHON313_ENV} to a python3.13 binary."
    )


def _digest(*parts: bytes) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(len(part).to_bytes(8, "big") + part)
    return digest.hexdigest()


def _run(argv: Sequence[str | Path], what: str) -> None:
    done = subprocess.run(  # noqa: S603 - our own pip/venv commands
        [str(arg) for arg in argv], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        raise LocalStackError(f"{what} failed (exit {done.returncode}); last lines:\n{tail}")


def _venv_ok(python: Path) -> bool:
    return python.exists() and _is_python313(str(python))


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive flock on `path`: serialises setup and start across processes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def ensure_environments(root: Path, endpoint: str | None = None) -> Layout:
    """Create or refresh .venvs/localstack and .venvs/lambda-runtime; instant when nothing changed.

    The venvs are shared by every port's stack; the layout returned is the one of `endpoint`'s stack.
    """
    layout = layout_for(root, endpoint)
    for required in (layout.requirements, layout.runtime_requirements, layout.executor / "pyproject.toml"):
        if not required.is_file():
            raise LocalStackError(f"{required} is missing: is {layout.root} a pdfbatch checkout?")
    # The executor is installed editable, so its code is live; only its metadata (entry point) counts here.
    ls_stamp = _digest(
        layout.requirements.read_bytes(), (layout.executor / "pyproject.toml").read_bytes(), b"py3.13"
    )
    rt_stamp = _digest(layout.runtime_requirements.read_bytes(), b"py3.13")
    with _locked(layout.root / ".venvs" / ".lock"):
        ls_fresh = _stamp_matches(layout.localstack_venv, ls_stamp) and layout.localstack_python.exists()
        rt_fresh = _stamp_matches(layout.runtime_venv, rt_stamp) and layout.runtime_python.exists()
        if ls_fresh and rt_fresh:
            return layout
        python = find_python313()
        if not ls_fresh:
            _prepare_venv(layout.localstack_venv, python, with_pip=True)
            _say("installing LocalStack and the executor plugin into .venvs/localstack (about a minute)")
            pip: list[str | Path] = [
                layout.localstack_python,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ]
            _run([*pip, "-r", layout.requirements], "pip install -r infra/localstack/requirements.txt")
            _run([*pip, "--no-deps", "-e", layout.executor], "pip install -e infra/localstack/executor")
            (layout.localstack_venv / _STAMP).write_text(ls_stamp)
        if not rt_fresh:
            # No pip inside: the runtime holds what AWS's runtime does. LocalStack's pip installs into it.
            _prepare_venv(layout.runtime_venv, python, with_pip=False)
            _say("installing the Lambda runtime (boto3) into .venvs/lambda-runtime")
            _run(
                [
                    layout.localstack_python,
                    "-m",
                    "pip",
                    "--python",
                    layout.runtime_python,
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                    "-r",
                    layout.runtime_requirements,
                ],
                "pip install -r infra/localstack/runtime-requirements.txt",
            )
            (layout.runtime_venv / _STAMP).write_text(rt_stamp)
        _say("environments ready")
    return layout


def _stamp_matches(venv: Path, stamp: str) -> bool:
    try:
        return (venv / _STAMP).read_text().strip() == stamp
    except OSError:
        return False


def _prepare_venv(venv: Path, python: str, with_pip: bool) -> None:
    # Requirements changed but the venv works: install over it (fast). A broken or missing one is rebuilt.
    if _venv_ok(venv / "bin" / "python"):
        return
    _say(f"creating {venv.name} venv with {python}")
    argv: list[str | Path] = [python, "-m", "venv", "--clear", venv]
    if not with_pip:
        argv.insert(3, "--without-pip")
    _run(argv, f"creating the venv {venv}")


# --- health ----------------------------------------------------------------------------------------------


def health(endpoint: str, timeout: float = 2.0) -> dict[str, str] | None:
    """Service states from GET /_localstack/health, or None when nothing answers there."""
    try:
        with _NO_PROXY.open(f"{endpoint.rstrip('/')}/_localstack/health", timeout=timeout) as response:
            body = json.loads(response.read() or b"{}")
    except (OSError, ValueError):
        return None
    services = body.get("services") if isinstance(body, dict) else None
    return {str(k): str(v) for k, v in services.items()} if isinstance(services, dict) else None


def is_ready(endpoint: str) -> bool:
    """True when every service pdfbatch needs is available (or already running)."""
    services = health(endpoint)
    return services is not None and all(services.get(name) in ("available", "running") for name in SERVICES)


def _port_open(endpoint: str) -> bool:
    parts = urlsplit(endpoint)
    with socket.socket() as sock:
        sock.settimeout(1.0)
        return sock.connect_ex((parts.hostname or "127.0.0.1", parts.port or DEFAULT_PORT)) == 0


# --- processes -------------------------------------------------------------------------------------------

_children: dict[int, subprocess.Popen[bytes]] = {}  # LocalStacks started by this process, to reap them


def _alive(pid: int) -> bool:
    if (child := _children.get(pid)) is not None:
        return child.poll() is None
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"  # a zombie has exited; only its parent has not reaped it yet


def _read_pid(layout: Layout) -> int | None:
    try:
        pid = int(layout.pid_file.read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if _alive(pid) else None


def _log_tail(layout: Layout, lines: int = 25) -> str:
    try:
        return "\n".join(layout.log_file.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def start(
    root: Path, endpoint: str | None = None, timeout: float = START_TIMEOUT, lease: bool = False
) -> Handle:
    """Start LocalStack unless it already answers at `endpoint`; safe to call from several processes.

    With `lease`, this process also holds a lease: see release().
    """
    endpoint = (endpoint or default_endpoint()).rstrip("/")
    layout = layout_for(root, endpoint)
    if not lease and is_ready(endpoint):
        return Handle(endpoint, _read_pid(layout), started=False)
    if not is_ready(endpoint):
        ensure_environments(root, endpoint)
    with _locked(layout.home / "start.lock"):
        # Whoever held the lock before us may have just started it.
        pid = _read_pid(layout)
        started = False
        if not is_ready(endpoint):
            if pid is None:
                if _port_open(endpoint):
                    raise LocalStackError(f"Something other than a healthy LocalStack listens at {endpoint}.")
                pid, started = _spawn(layout, endpoint), True
            else:
                _say(f"LocalStack (pid {pid}) is starting; waiting for it")
            _wait_ready(layout, endpoint, pid, timeout)
        if lease:
            # Taken under the lock, so a release() elsewhere cannot stop LocalStack between start and lease.
            (layout.home / "leases").mkdir(parents=True, exist_ok=True)
            (layout.home / "leases" / str(os.getpid())).write_text(endpoint)
            if started:
                (layout.home / _AUTO_STOP).touch()
    return Handle(endpoint, pid, started=started)


def release(root: Path, endpoint: str | None = None) -> bool:
    """Drop this process's lease; stop LocalStack if a lease holder started it and no live holder is left."""
    # Test sessions (and other tools) share one LocalStack: the session that started it must not stop it
    # under another session still using it, and the last one out must not leave it running.
    layout = layout_for(root, endpoint)
    leases = layout.home / "leases"
    with _locked(layout.home / "start.lock"):
        (leases / str(os.getpid())).unlink(missing_ok=True)
        live = False
        for holder in leases.glob("*") if leases.is_dir() else []:
            if holder.name.isdigit() and _alive(int(holder.name)):
                live = True
            else:
                holder.unlink(missing_ok=True)  # a holder that died without releasing
        if live or not (layout.home / _AUTO_STOP).exists():
            return False
        (layout.home / _AUTO_STOP).unlink()
        stop(root, endpoint)
    return True


def _spawn(layout: Layout, endpoint: str) -> int:
    parts = urlsplit(endpoint)
    host, port = parts.hostname or "127.0.0.1", parts.port or DEFAULT_PORT
    for sub in ("tmp", "filesystem", "cache", "logs"):
        (layout.home / sub).mkdir(parents=True, exist_ok=True)
    if layout.log_file.exists():
        layout.log_file.replace(layout.log_file.with_suffix(".log.1"))
    # The caller's environment minus anything that would steer LocalStack's interpreter elsewhere.
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env.update(
        {
            "GATEWAY_LISTEN": f"{host}:{port}",
            "SERVICES": ",".join(SERVICES),
            "PERSISTENCE": "0",
            # Offline, the analytics hook fails on DNS at shutdown and the process then hangs forever.
            "DISABLE_EVENTS": "1",
            # LocalStack's DNS server would try to bind port 53 on this machine; nothing here needs it.
            "DNS_ADDRESS": "0",
            # LocalStack's SQS emulation puts AWS/SQS metrics into its CloudWatch emulation: a PutMetricData
            # request (through its HTTP gateway, into sqlite) for every message sent, received and deleted.
            # A py-spy profile of a 320-PDF batch found that behind ~45% of LocalStack's CPU. Nothing local
            # reads those metrics (on AWS, SQS publishes them itself), so the local stack does without.
            # PDFBATCH_LOCALSTACK_UNTRIMMED=1 keeps them and Twisted's parse (bench/localstack_trims.py).
            "SQS_DISABLE_CLOUDWATCH_METRICS": "0" if os.environ.get(UNTRIMMED_ENV) else "1",
            # On AWS each environment has its own CPU; here background functions' environments run at
            # niceness 10 so the status API (and LocalStack serving it) answers while a batch runs
            # (the executor plugin's NICE_ENV; PDFBATCH_BACKGROUND_NICE=0 runs everything alike).
            "PDFBATCH_BACKGROUND_NICE": os.environ.get("PDFBATCH_BACKGROUND_NICE", "10"),
            # LocalStack guesses it runs in a container when /.dockerenv exists (as on CI machines), then
            # writes to /var/lib/localstack; pin host mode so every machine uses the folders below.
            "OVERRIDE_IN_DOCKER": "0",
            "LAMBDA_RUNTIME_EXECUTOR": "local",
            LAMBDA_PYTHON_ENV: str(layout.runtime_python),
            HOME_ENV: str(layout.home),
            "TMPDIR": str(layout.home / "tmp"),
            "FILESYSTEM_ROOT": str(layout.home / "filesystem"),
            "XDG_CACHE_HOME": str(layout.home / "cache"),
        }
    )
    _say(f"starting LocalStack at {endpoint} (log: {layout.log_file.relative_to(layout.root)})")
    with layout.log_file.open("ab") as log:
        process = subprocess.Popen(  # noqa: S603 - LocalStack's own interpreter and module
            [str(layout.localstack_python), "-m", "localstack.runtime.main"],
            cwd=layout.home,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # detached, and its own process group so `down` can stop all of it
        )
    _children[process.pid] = process
    layout.pid_file.write_text(f"{process.pid}\n")
    return process.pid


def _wait_ready(layout: Layout, endpoint: str, pid: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if is_ready(endpoint):
            return
        if not _alive(pid):
            _say(f"LocalStack exited during startup; last log lines:\n{_log_tail(layout)}")
            raise LocalStackError(f"LocalStack exited during startup: see {layout.log_file}.")
        time.sleep(0.25)
    _say(f"LocalStack not ready after {timeout:.0f} s; last log lines:\n{_log_tail(layout)}")
    stop(layout.root, endpoint)
    raise LocalStackError(f"LocalStack did not become ready at {endpoint} within {timeout:.0f} s.")


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def lambda_processes() -> Iterator[tuple[int, dict[str, str]]]:
    """(pid, environment) of every readable process of a Lambda execution environment here (those the
    executor plugin started: each carries AWS_LAMBDA_FUNCTION_NAME; the PDF reader it forks too)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue  # gone meanwhile, or not ours to read
        env = dict(v.decode("utf-8", "replace").split("=", 1) for v in raw if b"=" in v)
        if "AWS_LAMBDA_FUNCTION_NAME" in env:
            yield int(entry.name), env


def _leftovers(home: Path) -> list[int]:
    """Processes carrying our HOME_ENV marker: LocalStack's helpers and Lambda function processes."""
    marker = f"{HOME_ENV}={home}".encode()
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if marker in (entry / "environ").read_bytes().split(b"\0") and _alive(int(entry.name)):
                found.append(int(entry.name))
    return found


def stop(root: Path, endpoint: str | None = None, timeout: float = 30.0) -> bool:
    """Stop the LocalStack of `endpoint`'s port and every process it left; True if something was running.

    A stack on another port of the same checkout is left alone: its pid file and marker are its own.
    """
    layout = layout_for(root, endpoint)
    pid = _read_pid(layout)
    if pid is not None:
        _say(f"stopping LocalStack (pid {pid})")
        _signal_group(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _alive(pid):
            _say("LocalStack ignored SIGTERM; killing it")
            _signal_group(pid, signal.SIGKILL)
        if (child := _children.pop(pid, None)) is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=5)
    # Function processes live in sessions of their own, outside LocalStack's process group.
    leftovers = _leftovers(layout.home)
    for leftover in leftovers:
        _signal_group(leftover, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.kill(leftover, signal.SIGKILL)
    with contextlib.suppress(FileNotFoundError):
        layout.pid_file.unlink()
    (layout.home / _AUTO_STOP).unlink(missing_ok=True)
    shutil.rmtree(layout.home / "leases", ignore_errors=True)
    return pid is not None or bool(leftovers)


def _rss_mb(pid: int) -> float:
    """Resident memory of `pid` and all its descendants, in MB."""
    total_kb = 0
    pending = [pid]
    while pending:
        current = pending.pop()
        with contextlib.suppress(OSError, ValueError):
            for line in Path(f"/proc/{current}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total_kb += int(line.split()[1])
        with contextlib.suppress(OSError, ValueError):
            for task in Path(f"/proc/{current}/task").iterdir():
                pending += [int(c) for c in (task / "children").read_text().split()]
    return total_kb / 1024


def status(root: Path, endpoint: str | None = None) -> Status:
    """Whether LocalStack runs, answers, and how much memory it holds."""
    endpoint = (endpoint or default_endpoint()).rstrip("/")
    pid = _read_pid(layout_for(root, endpoint))
    services = health(endpoint) or {}
    return Status(
        endpoint=endpoint,
        pid=pid,
        healthy=is_ready(endpoint),
        services=services,
        rss_mb=_rss_mb(pid) if pid else 0.0,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: up, down or status."""
    parser = argparse.ArgumentParser(prog="python -m tools.localstack", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("up", "down", "status"))
    parser.add_argument("--root", type=Path, help="the pdfbatch checkout (default: found from the cwd)")
    parser.add_argument("--port", type=int, help=f"gateway port (default: ${PORT_ENV} or {DEFAULT_PORT})")
    args = parser.parse_args(argv)
    endpoint = f"http://127.0.0.1:{args.port}" if args.port else None
    try:
        root = args.root or find_root()
        if args.command == "up":
            began = time.monotonic()
            handle = start(root, endpoint)
            # An operator's `up` means "keep it running": no test session should stop it when it ends.
            (layout_for(root, endpoint).home / _AUTO_STOP).unlink(missing_ok=True)
            took = f" in {time.monotonic() - began:.1f} s" if handle.started else " (already running)"
            _say(f"ready at {handle.endpoint}{took}")
        elif args.command == "down":
            if not stop(root, endpoint):
                _say("not running")
        else:
            state = status(root, endpoint)
            print(
                json.dumps(
                    {
                        "endpoint": state.endpoint,
                        "pid": state.pid,
                        "healthy": state.healthy,
                        "rss_mb": round(state.rss_mb, 1),
                        "services": state.services,
                    },
                    indent=2,
                )
            )
            return 0 if state.healthy else 3
    except LocalStackError as exc:
        _say(str(exc))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
