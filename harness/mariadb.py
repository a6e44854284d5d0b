"""A private MariaDB server for chaos runs and tests that stop or restart the database.

Never the shared server on 127.0.0.1:3306: this one has its own port, data directory and socket
(initialised by ``mariadb-install-db`` in ~2 s on first start) and runs as the calling user.

    server = MariaDbServer(free_port(), tmp_path / "mariadb")
    server.start()              # answers a query within the deadline, or raises
    url = server.database("drover")   # CREATE DATABASE ... utf8mb4; its SQLAlchemy URL
    server.restart()            # SIGTERM + start, keeping the data (kill=True: SIGKILL)
    server.close()              # stop if running; always call it
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from harness.localserver import LocalServer

INSTALL_DB = "mariadb-install-db"
MARIADBD = "/usr/sbin/mariadbd"


class MariaDbServer(LocalServer):
    name = "MariaDB"

    def __init__(self, port: int, data_dir: Path, *, deadline: float = 60.0) -> None:
        self.base = Path(data_dir)
        self.data_dir = self.base / "data"
        super().__init__(port, self.base / "mariadb.log", deadline)

    @property
    def url(self) -> str:
        return f"mysql+pymysql://root@127.0.0.1:{self.port}"

    def _initialise(self) -> None:
        if (self.data_dir / "mysql").is_dir():
            return
        if shutil.which(INSTALL_DB) is None or not Path(MARIADBD).exists():
            raise RuntimeError("MariaDB is not installed (apt-get install mariadb-server)")
        self.base.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            [
                INSTALL_DB,
                "--no-defaults",
                f"--datadir={self.data_dir}",
                f"--user={_user()}",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"mariadb-install-db failed: {done.stderr.strip()[-500:]}")

    def _answers(self) -> bool:
        import pymysql

        try:
            conn = pymysql.connect(
                host="127.0.0.1", port=self.port, user="root", password="", connect_timeout=1
            )
        except pymysql.MySQLError:
            return False
        conn.close()
        return True

    def start(self) -> None:
        self._refuse_if_running()
        self._initialise()
        argv = [
            MARIADBD,
            "--no-defaults",
            f"--datadir={self.data_dir}",
            f"--port={self.port}",
            "--bind-address=127.0.0.1",
            f"--socket={self.base / 'mysqld.sock'}",
            f"--pid-file={self.base / 'mysqld.pid'}",
            f"--user={_user()}",
            "--skip-log-bin",
            "--innodb-buffer-pool-size=64M",
            "--max-connections=500",
            "--character-set-server=utf8mb4",
            "--collation-server=utf8mb4_general_ci",
        ]
        self._launch(argv, self._answers, poll=0.1, kill_late=True)

    def database(self, name: str) -> str:
        """Create database ``name`` (utf8mb4) if missing; its SQLAlchemy URL."""
        import pymysql

        conn = pymysql.connect(host="127.0.0.1", port=self.port, user="root", password="")
        try:
            with conn.cursor() as cur:
                cur.execute(f"CREATE DATABASE IF NOT EXISTS `{name}` CHARACTER SET utf8mb4")
            conn.commit()
        finally:
            conn.close()
        return f"{self.url}/{name}?charset=utf8mb4"

    def stop(self, *, kill: bool = False) -> None:
        self._terminate(kill=kill, timeout=60)

    def restart(self, *, kill: bool = False) -> None:
        self.stop(kill=kill)
        self.start()

    def close(self) -> None:
        self.stop(kill=True)


def _user() -> str:
    import pwd

    return pwd.getpwuid(os.getuid()).pw_name
