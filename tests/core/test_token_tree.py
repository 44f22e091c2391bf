import torch

from seamlessflow.core.token_tree import ancestor_mask, build_tree, edges, gather_sequences


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
    # little sharing and long sequences: the dense tree attention costs more than it saves
    fork = build_tree([list(range(1, 1001)), list(range(1, 101)) + list(range(2000, 2900))])
    assert not tree_pays(fork, matmul_params=1_000, layers=4, attention_width=256)
