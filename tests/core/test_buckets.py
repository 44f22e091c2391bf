from seamlessflow.core.buckets import plan_buckets


def test_tensors_fill_a_bucket_until_the_next_would_overflow():
    assert plan_buckets([4, 4, 4, 4, 4], limit=8) == [2, 2, 1]


def test_a_tensor_larger_than_the_limit_travels_alone():
    assert plan_buckets([2, 20, 2, 2], limit=8) == [1, 1, 2]


def test_every_tensor_is_in_exactly_one_bucket_and_no_bucket_overflows_unless_alone():
    sizes = [3, 7, 1, 9, 2, 2, 5, 8, 1]
    counts = plan_buckets(sizes, limit=9)
    assert sum(counts) == len(sizes)
    start = 0
    for n in counts:
        bucket = sizes[start:start + n]
        assert sum(bucket) <= 9 or n == 1
        start += n


def test_nothing_to_send_is_no_buckets():
    assert plan_buckets([], limit=8) == []
