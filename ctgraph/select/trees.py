"""Gradient-boosted regression trees as data: the ranker's second stage, evaluated without the library that fit them.

An ensemble is stored as LightGBM stores it, per tree: its inner nodes' arrays and its leaves' values. Inner node
``i`` splits on input ``feature[i]`` at ``threshold[i]``; its children ``left[i]`` and ``right[i]`` are inner nodes
where ``>= 0``, and leaf ``~c`` (``-c - 1``) where ``c < 0``. A tree of one leaf has no inner nodes::

    f(x) = sum over trees t of value_t[leaf_t(x)]
    leaf_t(x): start at inner node 0 (leaf 0 if none); go left where x[feature] <= threshold, right otherwise

:func:`from_lightgbm` reads LightGBM's model dump (``Booster.dump_model()``), which is how
:mod:`ctgraph.select.fit` fits the ensemble; only the fit needs LightGBM. :meth:`Trees.predict` walks every tree
for every row at once, in one numbering of all the trees' nodes: a step moves each (tree, row) pair still at an inner
node one level down, so the pairs that reached a leaf cost nothing more.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Trees", "from_lightgbm"]


@dataclass(frozen=True)
class Trees:
    """An ensemble over ``inputs`` (the names of a row's columns): per tree, its inner nodes' arrays and its leaves'
    values (module docstring)."""

    inputs: tuple[str, ...]
    feature: tuple[tuple[int, ...], ...]
    threshold: tuple[tuple[float, ...], ...]
    left: tuple[tuple[int, ...], ...]
    right: tuple[tuple[int, ...], ...]
    value: tuple[tuple[float, ...], ...]

    def __post_init__(self) -> None:
        arrays = (self.feature, self.threshold, self.left, self.right, self.value)
        if len({len(a) for a in arrays}) != 1:
            raise ValueError("trees: every array needs one entry per tree")
        for t, (feature, threshold, left, right, value) in enumerate(zip(*arrays, strict=True)):
            inner = len(feature)
            if len(threshold) != inner or len(left) != inner or len(right) != inner or len(value) != inner + 1:
                raise ValueError(f"trees: tree {t} needs one threshold and two children per split, one more leaf")
            for i, (f, *children) in enumerate(zip(feature, left, right, strict=True)):
                if not 0 <= f < len(self.inputs) or any(not (i < c < inner or -inner - 1 <= c < 0) for c in children):
                    raise ValueError(f"trees: node {i} of tree {t} names an input or a child that does not exist")

    def __len__(self) -> int:
        return len(self.feature)

    @functools.cached_property
    def _flat(self) -> tuple[np.ndarray, ...]:
        """The trees' nodes in one numbering (tree after tree): each inner node's input, threshold and children (a
        leaf as ``~j``, ``j`` its place among all leaves), the leaves' values, and each tree's root."""
        inner = np.cumsum([0, *(len(f) for f in self.feature)])
        leaves = np.cumsum([0, *(len(v) for v in self.value)])

        def child(t: int, c: int) -> int:
            return int(inner[t] + c) if c >= 0 else ~int(leaves[t] + ~c)

        def cat(rows: tuple[tuple[Any, ...], ...], dtype: type) -> np.ndarray:
            return np.array([x for r in rows for x in r], dtype=dtype)

        pairs = enumerate(zip(self.left, self.right, strict=True))
        children = [(child(t, a), child(t, b)) for t, (left, right) in pairs for a, b in zip(left, right, strict=True)]
        return (
            cat(self.feature, np.int64),
            cat(self.threshold, np.float64),
            np.array(children, dtype=np.int64).ravel(),  # node i's left at 2i, its right at 2i + 1
            cat(self.value, np.float64),
            np.array([inner[t] if f else ~leaves[t] for t, f in enumerate(self.feature)], dtype=np.int64),
        )

    def predict(self, rows: np.ndarray) -> np.ndarray:
        """``f(x)`` of each row of ``rows`` (shape ``(n, len(inputs))``), summed over the trees in order."""
        rows = np.asarray(rows, dtype=np.float64)
        if rows.ndim != 2 or rows.shape[1] != len(self.inputs):
            raise ValueError(f"trees: rows must have {len(self.inputs)} columns ({', '.join(self.inputs)})")
        total = np.zeros(rows.shape[0])
        if not len(self):
            return total
        feature, threshold, children, value, root = self._flat
        n, width = rows.shape
        node = np.repeat(root, n)  # (tree, row) pairs, tree-major: each pair's node in the one numbering
        start = np.tile(np.arange(n) * width, len(self))  # where each pair's row begins in the flat rows
        flat = rows.ravel()
        walking = np.flatnonzero(node >= 0)
        while walking.size:  # one step of every pair still at an inner node; a path visits each node once at most
            at = node[walking]
            right = ~(flat[start[walking] + feature[at]] <= threshold[at])  # left where x <= threshold
            node[walking] = step = children[2 * at + right]
            walking = walking[step >= 0]
        leaves = value[~node].reshape(len(self), n)
        for t in range(leaves.shape[0]):  # tree by tree, each row on its own: a row's sum is the same in any batch
            total += leaves[t]
        return total

    def to_dict(self) -> dict[str, Any]:
        return {
            "inputs": list(self.inputs),
            "feature": [list(f) for f in self.feature],
            "threshold": [list(t) for t in self.threshold],
            "left": [list(c) for c in self.left],
            "right": [list(c) for c in self.right],
            "value": [list(v) for v in self.value],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Trees:
        def ints(key: str) -> tuple[tuple[int, ...], ...]:
            return tuple(tuple(int(x) for x in row) for row in d[key])

        def floats(key: str) -> tuple[tuple[float, ...], ...]:
            return tuple(tuple(float(x) for x in row) for row in d[key])

        return cls(
            tuple(d["inputs"]), ints("feature"), floats("threshold"), ints("left"), ints("right"), floats("value")
        )


def from_lightgbm(dump: dict[str, Any], inputs: Sequence[str], digits: int = 8) -> Trees:
    """The ensemble of a LightGBM regression model's dump (``Booster.dump_model()``) over ``inputs``, its columns,
    leaf values rounded to ``digits`` decimals (what is stored; thresholds are kept exactly).

    Only numerical ``<=`` splits are read; the inputs are finite, so a split's handling of missing values never
    applies. LightGBM folds the training mean into the first tree's leaves, so the sum of the trees is its raw
    prediction."""
    if dump.get("num_class", 1) != 1:
        raise ValueError("trees: only a single-output regression model can be read")
    columns: dict[str, list[list[Any]]] = {"feature": [], "threshold": [], "left": [], "right": [], "value": []}
    for info in dump["tree_info"]:
        splits: list[tuple[dict[str, Any], int, int]] = []
        leaves: list[float] = []
        _number(info["tree_structure"], splits, leaves, digits)
        columns["feature"].append([int(node["split_feature"]) for node, _, _ in splits])
        columns["threshold"].append([float(node["threshold"]) for node, _, _ in splits])
        columns["left"].append([left for _, left, _ in splits])
        columns["right"].append([right for _, _, right in splits])
        columns["value"].append(leaves)
    return Trees.from_dict({"inputs": list(inputs), **columns})


def _number(node: dict[str, Any], splits: list, leaves: list[float], digits: int) -> int:
    """``node``'s number in its tree: inner nodes in preorder from 0 (appended to ``splits`` as ``(node, left,
    right)``), leaves as ``~j`` in the order met (their values appended to ``leaves``)."""
    if "split_index" not in node:
        leaves.append(round(float(node["leaf_value"]), digits) + 0.0)  # NOTE: + 0.0 turns -0.0 into 0.0
        return ~(len(leaves) - 1)
    if node.get("decision_type", "<=") != "<=":
        raise ValueError(f"trees: split type {node['decision_type']!r} is not read, only '<='")
    i = len(splits)
    splits.append((node, 0, 0))
    left = _number(node["left_child"], splits, leaves, digits)
    right = _number(node["right_child"], splits, leaves, digits)
    splits[i] = (node, left, right)
    return i
