"""Produce/consume rates through the embedded broker: Avro codec (TokenIO, 8-turn-sized calls) vs raw bytes,
with token arrays packed (the default) and as Avro arrays (the form written before packing).

Both sides run in one process against one broker, alternating, so the printed ratio is fair on a noisy
machine. Usage: python benchmarks/bench_codec.py [--records 20000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

from seamlessflow.avro import Codec
from seamlessflow.broker.local import LocalBroker
from seamlessflow.kafka.admin import ensure_topics
from seamlessflow.kafka.io import MessageProducer
from seamlessflow.kafka.subscriber import Subscriber
from seamlessflow.messages import TokenIO, now_ms
from seamlessflow.topics import Topics


def sample(i: int) -> TokenIO:
    prompt = list(range(i % 50, i % 50 + 400))
    return TokenIO(f"c{i}.0", f"s{i % 64}", "bench", "bench", f"c{i}", "engine-0", 0, prompt, list(range(64)),
                   [-0.25] * 64, [1] * 64, "stop", 0.1, 5.0, 20.0, now_ms())


def produce(settings, topic, values, keys) -> float:
    producer = MessageProducer(settings, Codec(), **{"linger.ms": 5})  # bytes in: its codec is not used
    start = time.perf_counter()
    for key, value in zip(keys, values(), strict=False):
        producer.send_bytes(topic, key, value)
    producer.flush(60)
    return len(keys) / (time.perf_counter() - start)


def consume(settings, topic, count, decode) -> float:
    consumer = Subscriber(settings, None, None, group_id=f"bench-{time.monotonic_ns()}")  # raw: decoded here
    consumer.subscribe(topic)
    seen, start = 0, None
    while seen < count:
        for record in consumer.poll(1.0, 500):
            start = start or time.perf_counter()
            decode(record.value)
            seen += 1
    rate = count / (time.perf_counter() - start)
    consumer.close()
    return rate


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    codec, arrays = Codec(), Codec(packed=False)
    messages = [sample(i) for i in range(args.records)]
    raw = [codec.encode(m, "x") for m in messages]  # same bytes on the wire: isolates the codec's CPU cost
    keys = [m.session_id.encode() for m in messages]
    results = {"avro produce": [], "arrays produce": [], "raw produce": [],
               "avro consume": [], "arrays consume": [], "raw consume": []}
    with LocalBroker(tempfile.mkdtemp(prefix="bench-codec-")) as broker:
        for r in range(args.rounds):
            settings = broker.client_settings.with_overrides(topic_prefix=f"bench{r}")
            ensure_topics(settings)
            topic_a, topic_b = Topics(settings).session_events, Topics(settings).trajectories
            results["avro produce"].append(
                produce(settings, topic_a, lambda topic=topic_a: (codec.encode(m, topic) for m in messages), keys)
            )
            results["raw produce"].append(produce(settings, topic_b, lambda: iter(raw), keys))
            results["avro consume"].append(consume(settings, topic_a, len(messages), codec.decode))
            results["raw consume"].append(consume(settings, topic_b, len(messages), lambda b: b))
            settings = broker.client_settings.with_overrides(topic_prefix=f"bench{r}arrays")
            ensure_topics(settings)
            topic_c = Topics(settings).session_events
            results["arrays produce"].append(
                produce(settings, topic_c, lambda topic=topic_c: (arrays.encode(m, topic) for m in messages), keys)
            )
            results["arrays consume"].append(consume(settings, topic_c, len(messages), arrays.decode))
    med = {k: statistics.median(v) for k, v in results.items()}
    size = sum(map(len, raw)) / len(raw)
    size_arrays = sum(len(arrays.encode(m, "x")) for m in messages[:1000]) / min(1000, len(messages))
    print(f"records: {args.records} TokenIO (400 prompt + 64 completion tokens; ~{size:.0f} B packed, "
          f"~{size_arrays:.0f} B as arrays), rounds: {args.rounds}")
    for name, rate in med.items():
        print(f"  {name:13s} {rate:10.0f} records/s")
    print(f"ratio avro/raw produce: {med['avro produce'] / med['raw produce']:.2f}")
    print(f"ratio avro/raw consume: {med['avro consume'] / med['raw consume']:.2f}")
    print(f"ratio packed/arrays produce: {med['avro produce'] / med['arrays produce']:.2f}, "
          f"consume: {med['avro consume'] / med['arrays consume']:.2f}")


if __name__ == "__main__":
    main()
