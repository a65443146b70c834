"""The union-find and the natural id order: the same clusters and keepers whatever the input order."""

from __future__ import annotations

import numpy as np

from core.neardup.clusters import components, id_sort_key, lowest_ids, representatives, roots, union_edges


def _clusters(root: np.ndarray) -> set[frozenset[int]]:
    return {frozenset(np.flatnonzero(root == r).tolist()) for r in np.unique(root)}


def test_every_element_points_at_the_lowest_index_of_its_component():
    edges = np.array([[5, 3], [9, 5], [2, 7], [7, 8], [1, 1]])
    root = components(10, edges)
    assert root.tolist() == [0, 1, 2, 3, 4, 3, 6, 2, 2, 3]
    assert components(3, np.empty((0, 2), dtype=np.int64)).tolist() == [0, 1, 2]


def test_components_do_not_depend_on_edge_order_or_direction():
    rng = np.random.default_rng(0)
    edges = rng.integers(0, 400, size=(300, 2))
    root = components(400, edges)
    # reference: label propagation to the minimum until nothing changes
    label = np.arange(400)
    while True:
        low = np.minimum(label[edges[:, 0]], label[edges[:, 1]])
        new = label.copy()
        np.minimum.at(new, edges[:, 0], low)
        np.minimum.at(new, edges[:, 1], low)
        if (new == label).all():
            break
        label = new
    assert root.tolist() == label.tolist()
    for seed in range(3):
        shuffled = np.random.default_rng(seed).permutation(edges)[:, ::-1]
        assert components(400, shuffled).tolist() == root.tolist()


def test_edges_merge_in_batches_into_one_forest():
    edges = np.random.default_rng(1).integers(0, 200, size=(150, 2))
    parent = np.arange(200, dtype=np.int64)
    for part in np.array_split(edges, 7):  # as the sharded job feeds one edge file at a time
        union_edges(parent, np.ascontiguousarray(part))
    assert roots(parent).tolist() == components(200, edges).tolist()


def test_natural_id_order():
    assert sorted(["r10", "r9", "r1", "r01", "q", "r", "Python/10", "Python/2"], key=id_sort_key) == [
        "Python/2",
        "Python/10",
        "q",
        "r",
        "r01",
        "r1",
        "r9",
        "r10",
    ]


def test_representatives_are_the_lowest_natural_id_whatever_the_order():
    ids = ["ex-10", "ex-9", "b", "ex-100", "a"]
    root = components(len(ids), np.array([[0, 1], [1, 3], [2, 4]]))
    assert [ids[i] for i in representatives(root, ids)] == ["ex-9", "ex-9", "a", "ex-9", "a"]
    perm = [4, 2, 0, 3, 1]
    shuffled = [ids[i] for i in perm]
    where = {old: new for new, old in enumerate(perm)}
    root = components(len(ids), np.array([[where[0], where[1]], [where[1], where[3]], [where[2], where[4]]]))
    assert {shuffled[i]: shuffled[r] for i, r in enumerate(representatives(root, shuffled))} == {
        "ex-10": "ex-9", "ex-9": "ex-9", "b": "a", "ex-100": "ex-9", "a": "a"
    }  # fmt: skip
    assert _clusters(root) == {frozenset({where[0], where[1], where[3]}), frozenset({where[2], where[4]})}


def test_lowest_ids_read_only_the_ids_of_clustered_elements():
    ids = ["ex-10", "solo", "ex-9", "b", "ex-100", "a", "alone"]
    root = components(len(ids), np.array([[0, 2], [2, 4], [3, 5]]))
    read: list[list[int]] = []

    def ids_of(members):
        read.append(members.tolist())
        return [ids[i] for i in members]

    assert lowest_ids(root, ids_of).tolist() == representatives(root, ids).tolist() == [2, 1, 2, 5, 2, 5, 6]
    assert read == [[0, 2, 3, 4, 5]]  # "solo" and "alone" are their own clusters: no id read
    assert lowest_ids(np.arange(3), ids_of).tolist() == [0, 1, 2] and len(read) == 1
