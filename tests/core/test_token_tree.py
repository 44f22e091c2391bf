import random

import torch

from seamlessflow.core.token_tree import (
    Segment,
    ancestor_mask,
    attention_pairs,
    build_tree,
    edges,
    gather_sequences,
    segments,
)


def test_shared_prefixes_are_packed_once_depth_first_with_each_branchs_positions():
    tree = build_tree([[1, 2, 3, 4], [1, 2, 5], [1, 2, 3, 6], [7]])
    assert tree.tokens == [1, 2, 3, 4, 6, 5, 7]
    assert tree.position_ids == [0, 1, 2, 3, 3, 2, 0]
    assert tree.parent == [-1, 0, 1, 2, 2, 1, -1]
    assert tree.paths == [[0, 1, 2, 3], [0, 1, 5], [0, 1, 2, 4], [6]]
    assert (tree.size, tree.flat_size) == (7, 12) and tree.sharing() == 7 / 12


def test_a_token_sees_exactly_its_ancestors_and_itself():
    tree = build_tree([[1, 2, 3, 4], [1, 2, 5], [1, 2, 3, 6], [7]])
    mask = ancestor_mask(tree)
    assert mask[4].nonzero().flatten().tolist() == [0, 1, 2, 4]  # 6 sees 1 2 3, not its sibling 4
    assert mask[5].nonzero().flatten().tolist() == [0, 1, 5]
    assert mask[6].nonzero().flatten().tolist() == [6]  # another root sees nothing before it
    assert not mask.triu(1).any()  # never a later token


def test_edges_and_gather_give_back_each_sequence_in_order():
    seqs = [[1, 2, 3, 4], [1, 2, 5], [7]]
    tree = build_tree(seqs)
    parents, children = edges(tree)
    assert all(tree.parent[c] == p for p, c in zip(parents.tolist(), children.tolist(), strict=True))
    flat = gather_sequences(torch.tensor(tree.tokens, dtype=torch.float32), tree, pad=-1.0)
    assert flat.tolist() == [[1, 2, 3, 4], [1, 2, 5, -1], [7, -1, -1, -1]]


def test_nothing_shared_is_the_flat_batch():
    tree = build_tree([[1, 2], [3, 4, 5]])
    assert tree.sharing() == 1.0 and tree.tokens == [1, 2, 3, 4, 5] and tree.position_ids == [0, 1, 0, 1, 2]


def test_the_tree_is_chosen_only_where_it_pays():
    from seamlessflow.core.token_tree import tree_pays

    prompt = list(range(1, 2049))
    group = build_tree([prompt + [5000 + i] * 256 for i in range(8)])  # G=8, P=2048, C=256
    assert tree_pays(group, matmul_params=4_000_000, layers=4, attention_width=256)
    unshared = build_tree([[1, 2, 3], [4, 5, 6]])
    assert not tree_pays(unshared, matmul_params=4_000_000, layers=4, attention_width=256)
    # little sharing and long branches: masked, their own keys in full cost more than the sharing saves;
    # attended causally (merged attention states), a tree never computes more than the flat batch
    fork = build_tree([list(range(1, 1001)), list(range(1, 101)) + list(range(2000, 2900))])
    assert not tree_pays(fork, matmul_params=1_000, layers=4, attention_width=256, causal_chains=False)
    assert tree_pays(fork, matmul_params=1_000, layers=4, attention_width=256)


def test_segments_are_the_chains_between_branch_points():
    tree = build_tree([[1, 2, 3, 4], [1, 2, 5], [1, 2, 3, 6], [7, 8]])  # packed: 1 2 3 4 6 5 7 8
    assert segments(tree) == [Segment(0, 2, ()), Segment(2, 3, ((0, 2),)), Segment(3, 4, ((0, 2), (2, 3))),
                              Segment(4, 5, ((0, 2), (2, 3))), Segment(5, 6, ((0, 2),)), Segment(6, 8, ())]
    # roots causally (3 + 3 pairs); 3 sees 1 2 and itself; 4 and 6 see 1 2 3 and themselves; 5 sees 1 2 and itself
    assert attention_pairs(tree) == 3 + 3 + 3 + 4 + 4 + 3 == attention_pairs(tree, causal_chains=False)
    fork = build_tree([[1, 2, 3], [1, 4, 5]])  # root 1, two chains of 2 below it
    assert (attention_pairs(fork), attention_pairs(fork, causal_chains=False)) == (1 + 2 * (2 + 3), 1 + 2 * (2 + 4))


def test_segments_give_each_token_exactly_its_ancestors_and_itself():
    """Random forests of shared prefixes: every token's chain rule is the dense ancestor mask's row."""
    rng = random.Random(0)
    for _ in range(200):
        seqs: list[list[int]] = []
        for _ in range(rng.randint(1, 6)):
            base = rng.choice(seqs) if seqs and rng.random() < 0.7 else []
            cut = rng.randint(0, len(base))
            seqs.append(base[:cut] + [rng.randint(1, 3) for _ in range(rng.randint(0 if cut else 1, 6))])
        tree = build_tree(seqs)
        mask, chains = ancestor_mask(tree), segments(tree)
        assert [c.start for c in chains] == [0] + [c.end for c in chains[:-1]] and chains[-1].end == tree.size
        for chain in chains:
            above = [j for start, end in chain.ancestors for j in range(start, end)]
            for i in range(chain.start, chain.end):
                assert mask[i].nonzero().flatten().tolist() == above + list(range(chain.start, i + 1))
