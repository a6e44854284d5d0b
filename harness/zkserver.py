"""A private ZooKeeper server for tests and chaos runs that stop, restart or wipe it.

Never the shared server of DROVER_TEST_ZK_HOSTS: this one has its own port and data directory and
is started the way scripts/services.sh starts ZooKeeper (Debian's jars, QuorumPeerMain, zoo.cfg).

    server = ZkServer(free_port(), tmp_path / "zk")
    server.start()              # answers "srvr" within the deadline, or raises
    server.stop()               # SIGTERM (SIGKILL after a deadline); sessions survive in data_dir
    server.restart()            # stop + start, keeping the data
    server.stop(wipe=True)      # ... and delete the data directory
    server.close()              # stop if running; always call it (a fixture's finally)
"""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

from harness.localserver import LocalServer
from harness.nodes import free_port

__all__ = ["ZkServer", "free_port", "srvr"]

ZK_CLASSPATH = "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar"
JVM_OPTS = ["-Xmx128m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"]


def srvr(port: int, timeout: float = 1.0) -> str:
    """The server's answer to the ``srvr`` four-letter command ("" when it does not answer)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            sock.sendall(b"srvr")
            chunks = []
            while chunk := sock.recv(4096):
                chunks.append(chunk)
            return b"".join(chunks).decode("utf-8", "replace")
    except OSError:
        return ""


class ZkServer(LocalServer):
    """One standalone ZooKeeper server on 127.0.0.1:``port`` with data in ``data_dir``."""

    name = "ZooKeeper"

    def __init__(
        self, port: int, data_dir: Path, tick_time: int = 500, *, deadline: float = 30.0
    ) -> None:
        self.data_dir = Path(data_dir)
        self.tick_time = tick_time
        super().__init__(port, self.data_dir.parent / f"zk-{port}.log", deadline)

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    def serving(self) -> bool:
        return "Mode: " in srvr(self.port)

    def _write_config(self) -> Path:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        config = self.data_dir.parent / f"zoo-{self.port}.cfg"
        config.write_text(
            "\n".join(
                [
                    f"tickTime={self.tick_time}",
                    "initLimit=10",
                    "syncLimit=5",
                    f"minSessionTimeout={2 * self.tick_time}",
                    f"maxSessionTimeout={40 * self.tick_time}",
                    f"dataDir={self.data_dir}",
                    f"clientPort={self.port}",
                    "clientPortAddress=127.0.0.1",
                    "admin.enableServer=false",
                    "4lw.commands.whitelist=srvr",
                    "maxClientCnxns=0",
                    "",
                ]
            )
        )
        return config

    def start(self) -> None:
        """Start the server and wait until it serves requests; raise RuntimeError if it won't."""
        self._refuse_if_running()
        config = self._write_config()
        argv = [
            "java",
            *JVM_OPTS,
            "-cp",
            ZK_CLASSPATH,
            "org.apache.zookeeper.server.quorum.QuorumPeerMain",
            str(config),
        ]
        self._launch(argv, self.serving, poll=0.05, kill_late=False)

    def stop(self, *, wipe: bool = False, kill: bool = False) -> None:
        """Stop the server (SIGKILL at once with ``kill``); ``wipe`` deletes its data afterwards."""
        self._terminate(kill=kill, timeout=10)
        if wipe:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def restart(self) -> None:
        self.stop()
        self.start()

    def close(self) -> None:
        """Stop the server if it runs (safe to call twice)."""
        self.stop(kill=True)
