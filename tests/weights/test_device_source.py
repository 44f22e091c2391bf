"""The NCCL path's weight source streams the trainer's own device tensors in bounded buckets, and a version
takes a host snapshot only when its files are due.

No GPU here: the device is simulated by PyTorch's `meta` device (tensors with shapes and dtypes, no storage,
never on the host), and ZeRO-3 by a gather that fills partitioned parameters in and empties them again.
What this checks is placement, bucket bounds and when a copy is made; NCCL itself is not run. The CUDA stream
ordering is checked with fake streams that log the fence's calls, the source driven by vLLM's own packing
(`pack_tensors`) as its NCCL producer drives it, a new side stream per packed buffer.
"""

from __future__ import annotations

import contextlib
import warnings

import torch
from vllm.distributed.weight_transfer.packed_tensor import pack_tensors

from seamlessflow.weights.device_source import DeviceBucketSource
from seamlessflow.weights.snapshot import snapshot_needed
from seamlessflow.weights.stream_fence import NoFence, StreamFence

BUCKET = 64 * 64 * 4 + 64 * 4  # one 64x64 float32 layer with its bias


def layers(device: str) -> torch.nn.Module:
    return torch.nn.Sequential(*(torch.nn.Linear(64, 64, device=device) for _ in range(4)),
                               torch.nn.Linear(64, 512, device=device))  # 131 KB: larger than a bucket


def nbytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def test_tensors_stay_on_their_device_in_buckets_of_at_most_the_limit():
    module = layers("meta")
    source = DeviceBucketSource(module, BUCKET)
    sent = list(source)
    assert [name for name, _ in sent] == [name for name, _ in module.named_parameters()]
    assert all(t.device.type == "meta" for _, t in sent)  # nothing went through the host
    assert [(m.name, m.shape) for m in source.metadata()] == [(n, tuple(t.shape)) for n, t in sent]
    buckets = [[name for name, _ in bucket] for bucket in source.buckets()]
    assert buckets == [[f"{i}.weight", f"{i}.bias"] for i in range(4)] + [["4.weight"], ["4.bias"]]
    assert all(nbytes(p for _, p in bucket) <= BUCKET or len(bucket) == 1 for bucket in source.buckets())


def test_weights_held_whole_are_sent_as_they_are_with_no_copy():
    module = layers("cpu")  # the device's stand-in whose storage can be compared
    for (name, sent), (_, param) in zip(DeviceBucketSource(module, BUCKET), module.named_parameters(), strict=True):
        assert sent.untyped_storage().data_ptr() == param.untyped_storage().data_ptr(), name


class Partitioned:
    """ZeRO-3 as the source sees it: outside a gather a parameter is an empty partition (its full shape in
    `ds_shape`); a gather fills the bucket's parameters in and empties them again on leaving."""

    def __init__(self, module: torch.nn.Module, log: list | None = None):
        self.full = {p: p.data.clone() for p in module.parameters()}
        self.gathers: list[int] = []  # bytes gathered at once, per gather
        self.inside = 0
        self.log = log if log is not None else []
        for p in module.parameters():
            p.ds_shape, p.ds_id = p.shape, id(p)  # type: ignore[attr-defined]
            p.data = torch.empty(0, device=p.device)

    @contextlib.contextmanager
    def gather(self, params):
        assert self.inside == 0, "a bucket gathered while another is still gathered"
        self.inside += 1
        self.gathers.append(nbytes(self.full[p] for p in params))
        for p in params:
            p.data = self.full[p]
        self.log.append(("gather",))
        yield
        self.log.append(("release",))
        for p in params:
            p.data = torch.empty(0, device=p.device)
        self.inside -= 1


def test_under_zero3_each_bucket_is_gathered_alone_and_copied_before_it_is_released():
    module = layers("cpu")
    zero3 = Partitioned(module)
    sent = dict(DeviceBucketSource(module, BUCKET, gather=zero3.gather))
    assert zero3.gathers == [BUCKET] * 4 + [64 * 512 * 4, 512 * 4]  # a bucket at a time (one too-big tensor alone)
    for param, full in zero3.full.items():
        name = next(n for n, p in module.named_parameters() if p is param)
        torch.testing.assert_close(sent[name], full)  # whole, though the partition is empty again
        assert param.numel() == 0


def test_a_host_snapshot_only_when_files_are_due_on_the_nccl_path():
    assert [snapshot_needed("nccl", v, files_every=3) for v in range(1, 7)] == [False, False, True] * 2
    assert all(snapshot_needed(backend, v, files_every=3) for backend in ("gloo", "none") for v in range(1, 7))


class FakeStream:
    """A CUDA stream as the fence uses it, logging each call into `log`."""

    def __init__(self, name: str, log: list[tuple]):
        self.name, self.log = name, log

    def wait_stream(self, other: FakeStream) -> None:
        self.log.append(("wait", self.name, other.name))

    def record_event(self) -> FakeStream:
        self.log.append(("event", self.name))
        return self

    def synchronize(self) -> None:  # the event's: the host waits for the stream's queued work
        self.log.append(("settled", self.name))


class Streams:
    """The trainer's stream (`writer`) and the producer's two side streams, one of which is current while the
    producer pulls a packed buffer's tensors; every fence call logged in order."""

    def __init__(self):
        self.log: list[tuple] = []
        self.current = "side0"

    @contextlib.contextmanager
    def enter(self, stream: FakeStream):
        self.log.append(("enter", stream.name))
        yield
        self.log.append(("leave", stream.name))

    def fence(self) -> StreamFence:
        return StreamFence(FakeStream("writer", self.log), lambda: FakeStream(self.current, self.log),
                           lambda tensor, stream: self.log.append(("record", id(tensor), stream.name)), self.enter)

    def produce(self, source, buffer_bytes: int) -> dict[str, torch.Tensor]:
        """The source drained as vLLM's packed NCCL producer drains it: each packed buffer pulled (and packed)
        with its own side stream current."""
        pairs, packed, n = iter(source), {}, 0

        def pack(item):
            packed[item[0]] = item[1]
            self.log.append(("pack", id(item[1]), self.current))
            return item[1]

        while True:
            self.current = f"side{n % 2}"
            with warnings.catch_warnings():  # a tensor larger than a buffer goes alone, with vLLM's warning
                warnings.simplefilter("ignore")
                chunk = pack_tensors(pairs, pack, buffer_bytes)
            if chunk is None:
                return packed
            n += 1


def assert_each_read_waits_for_the_writer(log: list[tuple]) -> None:
    packs = [i for i, entry in enumerate(log) if entry[0] == "pack"]
    assert packs and {log[i][2] for i in packs} == {"side0", "side1"}  # buffers on both side streams
    for i in packs:
        _, tensor, stream = log[i]
        assert log[i - 2:i] == [("wait", stream, "writer"), ("record", tensor, stream)], log[max(0, i - 4):i + 1]


def test_each_weight_is_read_after_the_step_that_wrote_it_on_whichever_side_stream_reads_it():
    module, streams = layers("cpu"), Streams()
    sent = streams.produce(DeviceBucketSource(module, BUCKET, fence=streams.fence()), buffer_bytes=10_000)
    assert list(sent) == [name for name, _ in module.named_parameters()]
    assert_each_read_waits_for_the_writer(streams.log)  # a buffer boundary mid-bucket included


def test_under_zero3_a_gather_is_released_only_after_its_clones_are_done_on_the_writer_stream():
    module, streams = layers("cpu"), Streams()
    zero3 = Partitioned(module, streams.log)
    sent = streams.produce(DeviceBucketSource(module, BUCKET, gather=zero3.gather, fence=streams.fence()), 10_000)
    for param, full in zero3.full.items():
        torch.testing.assert_close(sent[next(n for n, p in module.named_parameters() if p is param)], full)
    assert_each_read_waits_for_the_writer(streams.log)
    log = [entry for entry in streams.log if entry[0] in ("enter", "gather", "event", "settled", "release", "leave")]
    bucket = [("enter", "writer"), ("gather",), ("event", "writer"), ("settled", "writer"), ("release",),
              ("leave", "writer")]
    assert log == bucket * len(zero3.gathers)


def test_off_cuda_the_fence_does_nothing():
    assert isinstance(DeviceBucketSource(layers("meta"), BUCKET).fence, NoFence)
