# The compiled record walk (_recordwalk.c); record_walk.walk_py is its reference.
from kafkalike.protocol.record_walk import Buffer, WalkResult

def walk(
    data: Buffer,
    pos: int,
    count: int,
    mode: int,
    final: bool,
    index_base: int,
    compacted: bool,
    create_time: bool,
    batch_log_append_time: bool,
    base_timestamp: int,
    batch_max_timestamp: int,
    now_ms: int,
    before_max_ms: int,
    after_max_ms: int,
    /,
) -> WalkResult: ...
