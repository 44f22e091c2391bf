"""A per-session token prefix tree for longest-prefix matching (LPM).

Why: an agent's multi-turn dialogue reaches the engines as separate calls whose prompts repeat
earlier turns. Matching each prompt's token ids against what the session already holds merges the
turns into one token stream that is bit-for-bit what inference saw: no re-tokenisation, no
logprob recomputation. A prompt that diverges (rewritten history, retries, ``n>1`` samples) starts
a branch; every leaf of the tree is one training sequence.

The tree is a radix tree kept in a flat list of nodes, so it serialises to plain data. Stored
tokens are never changed: a fork may split a node in two, but every leaf's sequence stays the same.
Each leaf keeps its *lineage*: which call wrote which token range, so invariants can be checked.

Nodes hold typed arrays (int32 ids and versions, a byte mask, float64 logprobs: 17 bytes a token), not
Python lists (~85 bytes a token: a pointer and an int or float object each): an open agent session of 19k
tokens is held for its whole episode, and thousands of them share one assembler worker. Same-type arrays
also compare in C, so matching a prompt against a node is a memcmp, not a walk over int objects.
"""

from __future__ import annotations

import enum
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

NOT_GENERATED_LOGPROB = 0.0
NOT_GENERATED_VERSION = -1


class InvalidCall(ValueError):
    """A call whose fields do not line up (e.g. fewer logprobs than completion tokens)."""


@dataclass(frozen=True)
class PromptBase:
    """Where a prompt recorded as a delta starts: the first `tokens` ids of an earlier call's sequence (its
    prompt, then its completion), with the call's `prompt_ids` holding only the ids after them."""

    call_id: str
    tokens: int


@dataclass(frozen=True)
class Call:
    """One LLM call as the engine saw it: prompt ids in, completion ids out (one choice).

    With a `prompt_base`, `prompt_ids` is only the part of the prompt after the base's tokens (a delta, as
    the proxy may record it); `SessionAssembler.resolve` turns it into the whole prompt.
    """

    call_id: str
    prompt_ids: Sequence[int]
    completion_ids: Sequence[int]
    logprobs: Sequence[float]
    versions: Sequence[int]
    prompt_base: PromptBase | None = None

    def validate(self) -> None:
        n = len(self.completion_ids)
        if len(self.logprobs) != n or len(self.versions) != n:
            raise InvalidCall(
                f"call {self.call_id!r}: {n} completion ids but {len(self.logprobs)} logprobs "
                f"and {len(self.versions)} versions"
            )
        if not self.prompt_ids and not self.completion_ids and self.prompt_base is None:
            raise InvalidCall(f"call {self.call_id!r} has no tokens at all")
        if self.prompt_base is not None and self.prompt_base.tokens < 0:
            raise InvalidCall(f"call {self.call_id!r}: a prompt base of {self.prompt_base.tokens} tokens")


def as_ids(values: Sequence[int], call_id: str, what: str = "ids") -> array:
    """`values` as an int32 array (the wire's id type), or InvalidCall for a value that is not one."""
    return _typed("i", values, call_id, what)


def as_stored(call: Call) -> Call:
    """The call with its fields as the arrays the tree stores (InvalidCall before anything is stored)."""
    return replace(call, prompt_ids=as_ids(call.prompt_ids, call.call_id, "prompt ids"),
                   completion_ids=as_ids(call.completion_ids, call.call_id, "completion ids"),
                   logprobs=_typed("d", call.logprobs, call.call_id, "logprobs"),
                   versions=as_ids(call.versions, call.call_id, "versions"))


def _typed(typecode: str, values: Sequence, call_id: str, what: str) -> array:
    """`values` as an array of `typecode`, itself when it already is one (no copy on the hot path)."""
    if isinstance(values, array) and values.typecode == typecode:
        return values
    try:
        return array(typecode, values)
    except (OverflowError, TypeError) as error:
        kind = "int32" if typecode == "i" else "floats"
        raise InvalidCall(f"call {call_id!r}: {what} that are not {kind} ({error})") from None


class Outcome(enum.Enum):
    """What a call did to the session's tree."""

    START = "start"  # first call of an empty session: a new root
    EXTENSION = "extension"  # prompt continues a leaf exactly: gap + completion appended
    FORK = "fork"  # prompt diverges inside stored history: new branch from the common prefix
    RESTART = "restart"  # no common prefix with anything stored: a new root
    DUPLICATE = "duplicate"  # same call id seen before: ignored
    TRUNCATED = "truncated"  # session over its token bound: call not stored


@dataclass
class _Node:
    tokens: array  # int32
    mask: array  # int8, 0/1
    logprobs: array  # float64
    versions: array  # int32
    parent: int  # -1 for a root
    start: int  # absolute position of tokens[0] in any sequence through this node
    children: list[int] = field(default_factory=list)
    branch: int = -1  # branch id when this node is a leaf

    @classmethod
    def empty(cls, parent: int, start: int, branch: int) -> _Node:
        return cls(array("i"), array("b"), array("d"), array("i"), parent=parent, start=start, branch=branch)

    def append(self, gap: Sequence[int], call: Call) -> None:
        """The gap (fed ids) then the call's completion; `call` holds arrays (`as_stored`), which extend
        an array of their own type by one copy."""
        n_gap, n_out = len(gap), len(call.completion_ids)
        self.tokens.extend(gap)
        self.tokens.extend(call.completion_ids)
        self.mask += _ZERO_MASK * n_gap
        self.mask += _ONE_MASK * n_out
        self.logprobs += _NOT_GENERATED_LOGPROBS * n_gap
        self.logprobs.extend(call.logprobs)
        self.versions += _NOT_GENERATED_VERSIONS * n_gap
        self.versions.extend(call.versions)


_ZERO_MASK, _ONE_MASK = array("b", [0]), array("b", [1])
_NOT_GENERATED_LOGPROBS = array("d", [NOT_GENERATED_LOGPROB])
_NOT_GENERATED_VERSIONS = array("i", [NOT_GENERATED_VERSION])


@dataclass(frozen=True)
class LineageEntry:
    """Positions [start, end) of a leaf were written by call ``call_id`` (gap, then completion)."""

    call_id: str
    start: int
    end: int


@dataclass
class _Branch:
    leaf: int  # node id
    lineage: list[LineageEntry]
    last_call: Call  # the call that last wrote this leaf: its prompt + completion is the leaf


@dataclass(frozen=True)
class Match:
    """Where a prompt's longest common prefix with the tree ends."""

    node: int  # -1 when nothing matched
    used: int  # tokens of ``node`` matched
    length: int  # total prompt tokens matched


@dataclass(frozen=True)
class Leaf:
    """One leaf's full sequence, read out of the tree."""

    branch_id: int
    tokens: list[int]
    loss_mask: list[int]
    logprobs: list[float]
    versions: list[int]
    lineage: tuple[LineageEntry, ...]
    last_call: Call


def common_prefix_len(stored: array, prompt: array, pos: int) -> int:
    """Length of the common prefix of ``stored`` and ``prompt[pos:]`` (int32 arrays: compared in C)."""
    n = min(len(stored), len(prompt) - pos)
    if n <= 0:
        return 0
    if stored[:n] == prompt[pos : pos + n]:
        return n
    lo, hi = 0, n  # invariant: stored[:lo] matches, stored[:hi] does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if stored[:mid] == prompt[pos : pos + mid]:
            lo = mid
        else:
            hi = mid
    return lo


class PrefixTree:
    """Radix tree of one session's token history, matched by longest prefix."""

    def __init__(self) -> None:
        self.nodes: list[_Node] = []
        self.roots: list[int] = []
        self.branches: list[_Branch] = []
        self.total_tokens = 0
        self.sequence_ends: dict[str, tuple[int, int]] = {}  # call id -> (branch id, end of its sequence there)

    # -- matching ---------------------------------------------------------------------------

    def longest_match(self, prompt: Sequence[int]) -> Match:
        """Deepest place the prompt reaches; ties prefer ending at a leaf, then the newest node."""
        prompt = as_ids(prompt, "(a prompt)")
        best = Match(-1, 0, 0)
        best_rank = (0, False, -1)
        stack = [(root, 0) for root in self.roots]
        while stack:
            node_id, pos = stack.pop()
            node = self.nodes[node_id]
            used = common_prefix_len(node.tokens, prompt, pos)
            if used == 0 and node.tokens:
                continue
            whole = used == len(node.tokens)
            if whole and node.children:
                stack.extend((child, pos + used) for child in node.children)
            rank = (pos + used, whole and not node.children, node_id)
            if rank > best_rank:
                best, best_rank = Match(node_id, used, pos + used), rank
        return best

    def classify(self, prompt: Sequence[int]) -> tuple[Outcome, Match]:
        match = self.longest_match(prompt)
        if match.node < 0:
            return (Outcome.RESTART if self.roots else Outcome.START), match
        node = self.nodes[match.node]
        if match.used == len(node.tokens) and not node.children:
            return Outcome.EXTENSION, match
        return Outcome.FORK, match

    # -- inserting --------------------------------------------------------------------------

    def insert(self, call: Call, budget: int | None = None) -> Outcome:
        """Store a call's gap and completion where its prompt matches longest.

        With a ``budget``, a call that would push the stored token count above it is not stored
        and the outcome is TRUNCATED.
        """
        call = as_stored(call)
        outcome, match = self.classify(call.prompt_ids)
        added = len(call.prompt_ids) - match.length + len(call.completion_ids)
        if budget is not None and self.total_tokens + added > budget:
            return Outcome.TRUNCATED
        if outcome is Outcome.EXTENSION:
            self._extend(match, call)
        elif outcome is Outcome.FORK:
            self._fork(match, call)
        else:
            self._new_leaf(parent=-1, start=0, call=call, lineage=[])
        self.total_tokens += added
        return outcome

    def _extend(self, match: Match, call: Call) -> None:
        node = self.nodes[match.node]
        branch = self.branches[node.branch]
        end = node.start + len(node.tokens)
        node.append(call.prompt_ids[match.length :], call)
        branch.lineage.append(LineageEntry(call.call_id, end, node.start + len(node.tokens)))
        branch.last_call = call
        self.sequence_ends[call.call_id] = (node.branch, node.start + len(node.tokens))

    def _fork(self, match: Match, call: Call) -> None:
        node_id = match.node
        if match.used < len(self.nodes[node_id].tokens):
            node_id = self._split(node_id, match.used)
        lineage = _lineage_upto(self.branches[self._some_leaf(node_id).branch].lineage, match.length)
        self._new_leaf(parent=node_id, start=match.length, call=call, lineage=lineage)

    def _new_leaf(self, parent: int, start: int, call: Call, lineage: list[LineageEntry]) -> None:
        node = _Node.empty(parent=parent, start=start, branch=len(self.branches))
        node.append(call.prompt_ids[start:], call)
        node_id = len(self.nodes)
        self.nodes.append(node)
        (self.nodes[parent].children if parent >= 0 else self.roots).append(node_id)
        lineage.append(LineageEntry(call.call_id, start, start + len(node.tokens)))
        self.sequence_ends[call.call_id] = (len(self.branches), start + len(node.tokens))
        self.branches.append(_Branch(node_id, lineage, call))

    def _split(self, node_id: int, at: int) -> int:
        """Move ``node``'s first ``at`` tokens into a new parent node; return the parent's id.

        The lower part keeps its node id, so leaves and their branch ids do not move.
        """
        low = self.nodes[node_id]
        up = _Node(
            low.tokens[:at], low.mask[:at], low.logprobs[:at], low.versions[:at],
            parent=low.parent, start=low.start, children=[node_id],
        )
        up_id = len(self.nodes)
        self.nodes.append(up)
        siblings = self.nodes[low.parent].children if low.parent >= 0 else self.roots
        siblings[siblings.index(node_id)] = up_id
        del low.tokens[:at], low.mask[:at], low.logprobs[:at], low.versions[:at]
        low.parent, low.start = up_id, low.start + at
        return up_id

    def _some_leaf(self, node_id: int) -> _Node:
        node = self.nodes[node_id]
        while node.children:
            node = self.nodes[node.children[0]]
        return node

    # -- reading ----------------------------------------------------------------------------

    def sequence_prefix(self, call_id: str, n: int) -> array | None:
        """The first `n` ids of a stored call's sequence (its prompt, then its completion); None when the call
        is not stored here or its sequence is shorter than `n`. Stored tokens never change, so the ids are the
        call's whatever was added to the tree since."""
        found = self.sequence_ends.get(call_id)
        if found is None or not 0 <= n <= found[1]:
            return None
        out = array("i")
        for node in self._path(self.branches[found[0]].leaf):
            if len(out) + len(node.tokens) >= n:
                return out + node.tokens[: n - len(out)]
            out += node.tokens
        return out

    def _path(self, node_id: int) -> list[_Node]:
        """The nodes from a root down to `node_id`."""
        path = []
        while node_id >= 0:
            path.append(self.nodes[node_id])
            node_id = self.nodes[node_id].parent
        path.reverse()
        return path

    def leaves(self) -> list[Leaf]:
        """Every leaf's full sequence, in branch id order (the order leaves were created)."""
        return [self.leaf(branch_id) for branch_id in range(len(self.branches))]

    def leaf(self, branch_id: int) -> Leaf:
        branch = self.branches[branch_id]
        tokens, mask, logprobs, versions = array("i"), array("b"), array("d"), array("i")
        for node in self._path(branch.leaf):
            tokens += node.tokens
            mask += node.mask
            logprobs += node.logprobs
            versions += node.versions
        return Leaf(branch_id, tokens.tolist(), mask.tolist(), logprobs.tolist(), versions.tolist(),
                    tuple(branch.lineage), branch.last_call)

    # -- plain data -------------------------------------------------------------------------

    def to_dict(self) -> dict:
        return {
            "nodes": [
                [n.tokens.tolist(), n.mask.tolist(), n.logprobs.tolist(), n.versions.tolist(), n.parent, n.start,
                 list(n.children), n.branch]
                for n in self.nodes
            ],
            "roots": self.roots,
            "branches": [
                [b.leaf, [[e.call_id, e.start, e.end] for e in b.lineage], _call_to_list(b.last_call)]
                for b in self.branches
            ],
            "total_tokens": self.total_tokens,
        }

    @classmethod
    def from_dict(cls, data: dict) -> PrefixTree:
        tree = cls()
        tree.nodes = [
            _Node(array("i", t), array("b", m), array("d", lp), array("i", v), parent, start, list(children), branch)
            for t, m, lp, v, parent, start, children, branch in data["nodes"]
        ]
        tree.roots = list(data["roots"])
        tree.branches = [
            _Branch(leaf, [LineageEntry(*e) for e in lineage], as_stored(_call_from_list(call)))
            for leaf, lineage, call in data["branches"]
        ]
        tree.total_tokens = data["total_tokens"]
        for branch_id, branch in enumerate(tree.branches):  # a call's whole entry is on the branch it wrote
            for entry in branch.lineage:
                if entry.end > tree.sequence_ends.get(entry.call_id, (-1, -1))[1]:
                    tree.sequence_ends[entry.call_id] = (branch_id, entry.end)
        return tree


def _lineage_upto(lineage: list[LineageEntry], length: int) -> list[LineageEntry]:
    """The lineage entries covering positions [0, length), the last one cut at ``length``."""
    kept = []
    for entry in lineage:
        if entry.start >= length:
            break
        kept.append(LineageEntry(entry.call_id, entry.start, min(entry.end, length)))
    return kept


def _call_to_list(call: Call) -> list:
    return [call.call_id, list(call.prompt_ids), list(call.completion_ids), list(call.logprobs),
            list(call.versions)]


def _call_from_list(data: list) -> Call:
    return Call(*data)
