"""What the consumer-group tests share: members that report what they own and read, and waits.

A test starts several group members and waits for a state of all of them (an assignment that
splits the partitions, every message read). Members report to one ``Board``, a condition
variable, so a test waits on that condition with a deadline, never with a sleep.

Members run either in a thread of the test process (``ThreadMember``: the library's poll loop,
with its rebalance callbacks recorded) or as a separate OS process (``ChildMember``), which can
be killed with SIGKILL, so that it leaves the group without a LeaveGroup, mid-batch if need be.
A child is a test module run as a script (``python -m compat_tests.test_groups_<client>
member ...``); it reports on its standard output in JSON lines (``emit``) and, told to
``--hang-after`` N records, reports ``hung`` after processing the N-th and blocks until killed.

The scenarios every client runs (``share_partitions``, ``killed_member``, ``at_least_once``,
``at_most_once``, ``broker_restart``) are written once, here, against ``GroupClient``: what
each client's test module provides (create a topic, produce, start a member, read a group's
committed offsets and state through the admin API).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

from compat_tests.support import index_of

# Groups form at once, and a member that stops heartbeating is gone after SESSION_TIMEOUT_MS.
GROUP_BROKER_OVERRIDES = ("group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=500")
SESSION_TIMEOUT_MS = 2000
HEARTBEAT_INTERVAL_MS = 200
# Members that keep their place across a broker restart: a session longer than a restart takes
# (a process start, imports included, is 1-2 s here; more on a loaded machine).
RESTART_SESSION_MS = 10_000
# The longest any wait of these tests may take: several rebalances and session timeouts.
GROUP_TIMEOUT_S = 30.0
PARTITIONS = 6
REPO_ROOT = Path(__file__).resolve().parent.parent

# Assignment strategies, by their Kafka names; each client maps them to its own.
RANGE = "range"
ROUND_ROBIN = "roundrobin"
STICKY = "sticky"
COOPERATIVE_STICKY = "cooperative-sticky"

# The modes of a child member (see ``member_arguments``).
WATCH = "watch"  # read and report, never commit
AT_LEAST_ONCE = "at-least-once"  # process a batch, then commit it
AT_MOST_ONCE = "at-most-once"  # commit a batch, then process it


def payload(index: int) -> bytes:
    """A message value that names its index, as ``support.index_of`` reads it."""
    return b"%06d|group compatibility payload" % index


@dataclass(frozen=True)
class Got:
    """A record as a member read it."""

    partition: int
    offset: int
    value: bytes


class Board:
    """Where the members of one test report, under one condition, so a test can wait for any
    state of them all."""

    def __init__(self) -> None:
        self.changed = threading.Condition()
        self.members: list[MemberState] = []

    def wait(self, predicate: Callable[[], bool], what: str, timeout_s: float = GROUP_TIMEOUT_S) -> None:
        with self.changed:
            if not self.changed.wait_for(lambda: predicate() or self._failed() is not None, timeout_s):
                raise AssertionError(f"timed out after {timeout_s} s waiting for {what}; {self.describe()}")
            failed = self._failed()
            if failed is not None:
                raise AssertionError(f"member {failed.name} failed: {failed.error!r}") from failed.error

    def _failed(self) -> MemberState | None:
        return next((m for m in self.members if m.error is not None), None)

    def describe(self) -> str:
        return "; ".join(
            f"{m.name} owns {sorted(m.owned)}, read {len(m.records)}, revoked {m.revoked_partitions()}"
            for m in self.members
        )

    def split(self, members: Sequence[MemberState], partitions: int = PARTITIONS) -> None:
        """Wait until ``members`` own disjoint sets of partitions that cover the topic, each a fair share."""
        fair = {partitions // len(members), -(-partitions // len(members))}

        def done() -> bool:
            owned = [m.owned for m in members]
            return sorted(p for o in owned for p in o) == list(range(partitions)) and {len(o) for o in owned} <= fair

        self.wait(done, f"{[m.name for m in members]} to share {partitions} partitions")

    def read(self, members: Sequence[MemberState], indexes: Iterable[int]) -> None:
        """Wait until ``members`` together read every message in ``indexes``."""
        wanted = set(indexes)
        self.wait(
            lambda: wanted <= {index_of(g.value) for m in members for g in m.records},
            f"{[m.name for m in members]} to read {len(wanted)} messages",
        )


@dataclass(eq=False)
class MemberState:
    """What a member reported: what it owns now, what it read, its rebalance callbacks."""

    name: str
    board: Board
    owned: frozenset[int] = frozenset()
    records: list[Got] = field(default_factory=list)
    # ("assigned" | "revoked" | "lost", partitions) in callback order.
    callbacks: list[tuple[str, frozenset[int]]] = field(default_factory=list)
    error: BaseException | None = None

    def __post_init__(self) -> None:
        with self.board.changed:
            self.board.members.append(self)

    def report(
        self,
        owned: Iterable[int] | None = None,
        records: Iterable[Got] = (),
        callback: tuple[str, Iterable[int]] | None = None,
    ) -> None:
        with self.board.changed:
            if owned is not None:
                self.owned = frozenset(owned)
            self.records.extend(records)
            if callback is not None:
                self.callbacks.append((callback[0], frozenset(callback[1])))
            self.board.changed.notify_all()

    def fail(self, error: BaseException) -> None:
        with self.board.changed:
            self.error = error
            self.board.changed.notify_all()

    def revoked_partitions(self, since: int = 0) -> frozenset[int]:
        """Every partition a revoke (or lost) callback took away from this member, from its
        ``since``-th callback on."""
        with self.board.changed:
            return frozenset(p for kind, parts in self.callbacks[since:] if kind != "assigned" for p in parts)

    def indexes(self) -> list[int]:
        with self.board.changed:
            return [index_of(g.value) for g in self.records]

    def offsets(self, partition: int) -> list[int]:
        with self.board.changed:
            return [g.offset for g in self.records if g.partition == partition]


class ThreadMember(MemberState):
    """A member whose client is polled by a thread of its own until ``stop``.

    ``poll`` blocks briefly and returns what it read, ``owned`` is the client's assignment;
    ``close`` runs in the thread when it ends. Any exception fails the member, and every wait.
    """

    def start(
        self, poll: Callable[[], list[Got]], owned: Callable[[], Iterable[int]], close: Callable[[], None]
    ) -> ThreadMember:
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(poll, owned, close), name=self.name, daemon=True)
        self._thread.start()
        return self

    def _run(
        self, poll: Callable[[], list[Got]], owned: Callable[[], Iterable[int]], close: Callable[[], None]
    ) -> None:
        try:
            try:
                while not self._stopping.is_set():
                    got = poll()
                    self.report(owned(), got)
            finally:
                close()
        except BaseException as exc:  # reported to the waiting test
            self.fail(exc)

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(GROUP_TIMEOUT_S)
        assert not self._thread.is_alive(), f"{self.name} did not stop"
        if self.error is not None:
            raise AssertionError(f"member {self.name} failed: {self.error!r}") from self.error


class ChildMember(MemberState):
    """A member in its own OS process, running ``module`` as a script with ``member_arguments``."""

    def start(self, module: str, arguments: Sequence[str]) -> ChildMember:
        env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=str(REPO_ROOT))
        self.hung = False
        self.committed: dict[int, int] = {}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", module, "member", *arguments],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            cwd=REPO_ROOT,
        )
        assert self.proc.stdout is not None
        self._reader = threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True)
        self._reader.start()
        return self

    def _read(self, stdout: IO[str]) -> None:
        with stdout:
            for line in stdout:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue  # not ours: a library's own output
                self._handle(event)
        code = self.proc.wait()
        if code not in (0, -signal.SIGKILL):
            self.fail(RuntimeError(f"child member exited with {code}"))

    def _handle(self, event: dict[str, Any]) -> None:
        kind = event["event"]
        if kind == "owned":
            self.report(owned=event["partitions"])
        elif kind == "record":
            self.report(records=[Got(event["partition"], event["offset"], event["value"].encode())])
        elif kind in ("assigned", "revoked", "lost"):
            self.report(callback=(kind, event["partitions"]))
        elif kind == "committed":
            with self.board.changed:
                self.committed.update({int(p): o for p, o in event["offsets"].items()})
            self.report()
        elif kind == "hung":
            with self.board.changed:
                self.hung = True
            self.report()
        elif kind == "error":
            self.fail(RuntimeError(event["message"]))

    def kill(self) -> None:
        """SIGKILL: the member vanishes without a LeaveGroup or a last commit."""
        self.proc.kill()
        self.proc.wait(GROUP_TIMEOUT_S)
        self._reader.join(GROUP_TIMEOUT_S)
        if self.proc.stdin is not None:
            self.proc.stdin.close()


# -- the child's side ---------------------------------------------------------------------------


@dataclass(frozen=True)
class MemberArgs:
    bootstrap: str
    topic: str
    group: str
    mode: str
    strategy: str
    hang_after: int | None
    batch: int


def member_arguments(
    bootstrap: str, topic: str, group: str, mode: str, strategy: str, hang_after: int | None = None, batch: int = 10
) -> list[str]:
    args = [bootstrap, topic, group, mode, strategy, "--batch", str(batch)]
    if hang_after is not None:
        args += ["--hang-after", str(hang_after)]
    return args


def parse_member_arguments(argv: Sequence[str]) -> MemberArgs:
    parser = argparse.ArgumentParser()
    parser.add_argument("bootstrap")
    parser.add_argument("topic")
    parser.add_argument("group")
    parser.add_argument("mode", choices=[WATCH, AT_LEAST_ONCE, AT_MOST_ONCE])
    parser.add_argument("strategy")
    parser.add_argument("--hang-after", type=int)
    parser.add_argument("--batch", type=int, default=10)
    ns = parser.parse_args(argv)
    return MemberArgs(ns.bootstrap, ns.topic, ns.group, ns.mode, ns.strategy, ns.hang_after, ns.batch)


def emit(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


class Processor:
    """The child's processing: report each record, and hang after the configured count."""

    def __init__(self, hang_after: int | None) -> None:
        self.hang_after = hang_after
        self.count = 0

    def process(self, partition: int, offset: int, value: bytes) -> None:
        emit("record", partition=partition, offset=offset, value=value.decode())
        self.count += 1
        if self.count == self.hang_after:
            emit("hung")
            sys.stdin.read()  # until the test kills this process
            raise SystemExit(1)


def emit_committed(offsets: dict[int, int]) -> None:
    emit("committed", offsets={str(p): o for p, o in offsets.items()})


def next_offsets(records: Iterable[tuple[int, int]]) -> dict[int, int]:
    """The position after each partition's last record, from (partition, offset) pairs."""
    out: dict[int, int] = {}
    for partition, offset in records:
        out[partition] = max(out.get(partition, 0), offset + 1)
    return out


def stop_all(board: Board) -> None:
    """Stop every member of ``board``: threads end their poll loop and close, children are killed."""
    errors = []
    for member in board.members:
        try:
            if isinstance(member, ThreadMember):
                member.stop()
            elif isinstance(member, ChildMember):
                member.kill()
        except AssertionError as exc:
            errors.append(exc)
    if errors:
        raise errors[0]


# -- the scenarios every client runs -------------------------------------------------------------


class GroupClient(Protocol):
    """What a scenario needs of a client library."""

    # The module that, run as ``python -m MODULE member ARGS``, is a child member.
    module: str

    def create_topic(self, bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None: ...

    def produce(self, bootstrap: str, topic: str, indexes: range, partitions: int = PARTITIONS) -> None:
        """Message ``i`` (``payload(i)``) to partition ``i % partitions``; acknowledged before returning."""

    def start_member(
        self,
        board: Board,
        name: str,
        bootstrap: str,
        topic: str,
        group: str,
        strategy: str = RANGE,
        commit: bool = False,
        session_timeout_ms: int = SESSION_TIMEOUT_MS,
    ) -> ThreadMember:
        """A member subscribed to ``topic``, with ``name`` as its client id; with ``commit``, it
        commits what it read after each batch (and when partitions are revoked, where the
        library's rebalance callbacks may commit)."""

    def committed(self, bootstrap: str, group: str) -> dict[int, int]:
        """The group's committed offsets by partition, through the admin API."""

    def describe(self, bootstrap: str, group: str) -> tuple[str, int]:
        """The group's state (as Kafka names it: ``Stable``, ``Empty``...) and member count."""


def start_child(
    client: GroupClient, board: Board, name: str, bootstrap: str, topic: str, group: str, mode: str, **kw: Any
) -> ChildMember:
    return ChildMember(name, board).start(client.module, member_arguments(bootstrap, topic, group, mode, **kw))


def share_partitions(client: GroupClient, broker_bootstrap: str, topic: str) -> None:
    """Three members of a group split six partitions; two other groups each read everything."""
    bootstrap = broker_bootstrap
    client.create_topic(bootstrap, topic)
    board = Board()
    try:
        shared = [client.start_member(board, f"shared-{i}", bootstrap, topic, f"{topic}-shared") for i in range(3)]
        pair = [
            client.start_member(board, f"pair-{i}", bootstrap, topic, f"{topic}-pair", ROUND_ROBIN) for i in range(2)
        ]
        alone = client.start_member(board, "alone", bootstrap, topic, f"{topic}-alone")
        board.split(shared)
        board.split(pair)
        board.split([alone])
        client.produce(bootstrap, topic, range(60))
        for group in (shared, pair, [alone]):
            board.read(group, range(60))
        # In a stable group each message is read once, by the owner of its partition.
        assert [len(m.owned) for m in shared] == [2, 2, 2]
        for member in shared:
            assert {g.partition for g in member.records} == member.owned
            assert all(index_of(g.value) % PARTITIONS == g.partition for g in member.records)
        assert sorted(i for m in shared for i in m.indexes()) == list(range(60))
    finally:
        stop_all(board)


def killed_member(client: GroupClient, bootstrap: str, topic: str, strategy: str, cooperative: bool) -> None:
    """A member killed with SIGKILL loses its partitions to the others after its session times
    out, and a new member takes its share: with a sticky strategy nobody else's partitions move,
    and with the cooperative protocol they are not even revoked. Members commit only when the
    protocol is eager (when revoked), so partitions that stayed are read on without going back."""
    group = f"{topic}-group"
    client.create_topic(bootstrap, topic)
    board = Board()
    try:
        a = client.start_member(board, "a", bootstrap, topic, group, strategy, commit=not cooperative)
        b = client.start_member(board, "b", bootstrap, topic, group, strategy, commit=not cooperative)
        doomed = start_child(client, board, "doomed", bootstrap, topic, group, WATCH, strategy=strategy)
        board.split([a, b, doomed])
        before = {m.name: m.owned for m in (a, b, doomed)}
        marks = {m.name: len(m.callbacks) for m in (a, b)}
        client.produce(bootstrap, topic, range(60))
        board.read([a, b, doomed], range(60))

        killed_at = time.monotonic()
        doomed.kill()  # no LeaveGroup: the coordinator notices when its session times out
        board.split([a, b])
        # Not when its connection closed: its last heartbeat was at most an interval before.
        assert time.monotonic() - killed_at >= (SESSION_TIMEOUT_MS - 2 * HEARTBEAT_INTERVAL_MS) / 1000
        # Sticky: the survivors keep what they had and take over the dead member's partitions.
        assert a.owned > before["a"] and b.owned > before["b"], (before, board.describe())
        assert (a.owned | b.owned) - (before["a"] | before["b"]) == before["doomed"]
        if cooperative:  # incrementally: nothing of theirs was revoked
            assert not a.revoked_partitions(marks["a"]) and not b.revoked_partitions(marks["b"])
        client.produce(bootstrap, topic, range(60, 120))
        board.read([a, b], range(60, 120))

        middle = {m.name: m.owned for m in (a, b)}
        c = client.start_member(board, "c", bootstrap, topic, group, strategy, commit=not cooperative)
        board.split([a, b, c])
        client.produce(bootstrap, topic, range(120, 180))
        board.read([a, b, c], range(120, 180))
        # The newcomer got one partition from each of the others.
        for member in (a, b):
            assert member.owned < middle[member.name], (middle, board.describe())
            if cooperative:  # and only those were revoked
                assert member.revoked_partitions(marks[member.name]) == middle[member.name] - member.owned
        assert c.owned == (middle["a"] - a.owned) | (middle["b"] - b.owned)
        # Partitions that never moved were read on, offset after offset, without going back.
        for member in (a, b):
            for partition in before[member.name] & member.owned:
                assert member.offsets(partition) == list(range(30)), (member.name, partition)
    finally:
        stop_all(board)


def _run_and_kill(client: GroupClient, board: Board, bootstrap: str, topic: str, group: str, mode: str) -> ChildMember:
    first = start_child(client, board, "first", bootstrap, topic, group, mode, strategy=RANGE, hang_after=23)
    board.wait(lambda: first.hung, "the first consumer to hang mid-batch")
    first.kill()
    return first


def at_least_once(client: GroupClient, bootstrap: str, topic: str) -> None:
    """Commit after processing, killed mid-batch: the next consumer of the group resumes at the
    last commit, so nothing is lost (what was processed but not committed comes again)."""
    group = f"{topic}-group"
    client.create_topic(bootstrap, topic, 3)
    client.produce(bootstrap, topic, range(60), 3)
    board = Board()
    try:
        first = _run_and_kill(client, board, bootstrap, topic, group, AT_LEAST_ONCE)
        processed = first.indexes()
        assert len(processed) == 23 and sum(first.committed.values()) < 23, first.committed
        second = start_child(client, board, "second", bootstrap, topic, group, AT_LEAST_ONCE, strategy=RANGE)
        remaining = sum(20 - first.committed.get(p, 0) for p in range(3))
        board.wait(lambda: len(second.records) >= remaining, f"{remaining} messages from the commits on")
        assert set(processed) | set(second.indexes()) == set(range(60))
        for partition in range(3):
            assert second.offsets(partition) == list(range(first.committed.get(partition, 0), 20))
    finally:
        stop_all(board)


def at_most_once(client: GroupClient, bootstrap: str, topic: str) -> None:
    """Commit before processing, killed mid-batch: the next consumer resumes after the batch,
    so nothing is processed twice (the rest of the batch is lost)."""
    group = f"{topic}-group"
    client.create_topic(bootstrap, topic, 3)
    client.produce(bootstrap, topic, range(60), 3)
    board = Board()
    try:
        first = _run_and_kill(client, board, bootstrap, topic, group, AT_MOST_ONCE)
        processed = first.indexes()
        assert len(processed) == 23 and sum(first.committed.values()) >= 23, first.committed
        second = start_child(client, board, "second", bootstrap, topic, group, AT_MOST_ONCE, strategy=RANGE)
        remaining = sum(20 - first.committed.get(p, 0) for p in range(3))
        board.wait(lambda: len(second.records) >= remaining, f"{remaining} messages from the commits on")
        assert not set(processed) & set(second.indexes())
        for partition in range(3):
            assert second.offsets(partition) == list(range(first.committed.get(partition, 0), 20))
    finally:
        stop_all(board)


def broker_restart(client: GroupClient, broker: Any, topic: str) -> None:
    """Stop and start the broker (same data directory, same port) under two active groups: the
    committed offsets are still there, and the groups go on from them with the same members."""
    bootstrap = broker.bootstrap
    client.create_topic(bootstrap, topic)
    groups = {f"{topic}-two": 2, f"{topic}-one": 1}
    board = Board()
    try:
        by_group = {
            group: [
                client.start_member(
                    board, f"{group}-{i}", bootstrap, topic, group, commit=True, session_timeout_ms=RESTART_SESSION_MS
                )
                for i in range(count)
            ]
            for group, count in groups.items()
        }
        for group_members in by_group.values():
            board.split(group_members)
        client.produce(bootstrap, topic, range(60))
        for group_members in by_group.values():
            board.read(group_members, range(60))  # each batch is committed before the next poll
        ends = dict.fromkeys(range(PARTITIONS), 10)
        assert all(client.committed(bootstrap, group) == ends for group in groups)

        assert broker.stop() == 0
        broker.restart()
        assert all(client.committed(bootstrap, group) == ends for group in groups)

        client.produce(bootstrap, topic, range(60, 120))
        for group, group_members in by_group.items():
            board.read(group_members, range(60, 120))
            board.split(group_members)
            # Nothing from before the restart was read again: the group went on from its commits.
            assert sorted(i for m in group_members for i in m.indexes() if i < 60) == list(range(60))
            assert client.describe(bootstrap, group) == ("Stable", groups[group])
    finally:
        stop_all(board)
