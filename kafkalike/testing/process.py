"""Run ``kafkalike serve`` as a real process, the way a user starts it, for tests.

The broker binds port 0 and announces the bound address on its ready line; this waits for
that line (an event, not a sleep), keeps draining the output, and can stop the broker
cleanly (SIGTERM) or kill it (SIGKILL) to test recovery. Its data directory is on disk, so a
restart keeps everything that was flushed.

    with BrokerProcess(tmp_path / "data", ["log.flush.interval.messages=1"]) as broker:
        ...  # broker.bootstrap
        broker.kill()
        broker.restart()

The pytest plugin's ``kafka_broker_process`` fixture starts these and checks them after the test.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path

READY = re.compile(r"kafkalike ready on (\S+):(\d+)")
# Lines that show a broker bug, whatever the clients did.
BROKER_ERROR = re.compile(r"Traceback|\bERROR\b|\bCRITICAL\b")


class BrokerProcess:
    def __init__(
        self,
        data_dir: Path,
        overrides: Iterable[str] = (),
        port: int = 0,
        ready_timeout_s: float = 60.0,
        args: Iterable[str] = (),
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        """``args``: more ``kafkalike serve`` arguments (``--config FILE`` ...). ``cwd``: the
        broker's working directory (this process's by default), which ``python -m`` puts first
        on the broker's import path; ``env``: variables set for the broker on top of this
        process's environment (``PYTHONPATH`` names the tree whose kafkalike it runs)."""
        self.data_dir = Path(data_dir).absolute()  # the same directory whatever ``cwd`` is
        self.overrides = list(overrides)
        self.args = list(args)
        self.cwd = cwd
        self.env = dict(env or {})
        self.port = port
        self.ready_timeout_s = ready_timeout_s
        self.proc: subprocess.Popen[str] | None = None
        self.output: list[str] = []
        self.host = "127.0.0.1"
        self._drainer: threading.Thread | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def logged_errors(self, since: int = 0) -> list[str]:
        """The output lines from line ``since`` on that report an error or a traceback."""
        return [line for line in self.output[since:] if BROKER_ERROR.search(line)]

    def command(self) -> list[str]:
        """The broker's command line."""
        args = [
            sys.executable,
            "-m",
            "kafkalike",
            "serve",
            "--listen",
            f"127.0.0.1:{self.port}",
            "--data-dir",
            str(self.data_dir),
        ]
        for item in self.overrides:
            args += ["--override", item]
        return args + self.args

    def environment(self) -> dict[str, str]:
        """The broker's environment: this process's, with ``env`` set."""
        return {**os.environ, "PYTHONUNBUFFERED": "1", **self.env}

    def start(self) -> BrokerProcess:
        self.proc = subprocess.Popen(
            self.command(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=self.cwd,
            env=self.environment(),
        )
        lines: queue.Queue[str | None] = queue.Queue()
        self._drainer = threading.Thread(target=self._drain, args=(self.proc, lines), daemon=True)
        self._drainer.start()
        while True:
            try:
                line = lines.get(timeout=self.ready_timeout_s)
            except queue.Empty:
                self.kill()
                raise RuntimeError("broker did not become ready:\n" + "".join(self.output)) from None
            if line is None:
                raise RuntimeError("broker exited before it was ready:\n" + "".join(self.output))
            match = READY.search(line)
            if match:
                self.host, self.port = match.group(1), int(match.group(2))
                return self

    def _drain(self, proc: subprocess.Popen[str], lines: queue.Queue[str | None]) -> None:
        assert proc.stdout is not None
        with proc.stdout:  # closed at EOF, so no pipe outlives the process
            for line in proc.stdout:
                self.output.append(line)
                lines.put(line)
        lines.put(None)

    def stop(self, timeout_s: float = 30.0) -> int:
        """SIGTERM and wait: the broker flushes and exits."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout_s)
        self._join_drainer()
        return code

    def kill(self) -> None:
        """SIGKILL: no flush, no clean-shutdown marker."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)
            self._join_drainer()

    def _join_drainer(self) -> None:
        """After the process exits: its last output is in ``output`` and its pipe is closed."""
        if self._drainer is not None:
            self._drainer.join(30)

    def restart(self) -> BrokerProcess:
        """Start again on the same port and data directory."""
        return self.start()

    def __enter__(self) -> BrokerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.stop()
            except subprocess.TimeoutExpired:
                self.kill()
