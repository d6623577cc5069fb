"""Names for text fields that have none: the label beside them.

Many dialog toolkits and older apps draw a form as a text label next to an entry and never
tell the accessibility tree that one names the other: the entry has no accessible name. A
decider that sees two nameless entries can only guess which takes the e-mail. Here each
nameless text field gets the name a person would read for it, in this order:

1. **The relation**, where the platform reports one (`Node.labelled_by`: AT-SPI
   `labelled-by`, Android `labelFor`): the labelling node's text.
2. **Geometry**, where the snapshot gives bounds (`Node.rect`): the nearest text to its left
   on the same row, else the nearest text above it in the same column — within the same
   container where the snapshot gives containers (`Node.container`). Reading order is not
   used then: a toolkit may list a grid's children in any order (GTK 3 lists them last
   added first).
3. **Reading order**, without bounds: the text node immediately before it, when no other
   control stands between them.

A name found here is marked `Candidate.inferred`: it is our reading of the layout, not the
app's word, and every decider is told so.
"""

from __future__ import annotations

from collections.abc import Sequence

from workers.core.screen import Kind, Node

ROW_SLACK_PX = 4
"""How far a label may overlap its field's left (or top) edge and still be beside it."""
MAX_LEFT_GAP_PX = 320
"""The widest gap between a label and the field to its right that still pairs them."""
MAX_ABOVE_GAP_PX = 48
"""The tallest gap between a label and the field under it that still pairs them."""


def neighbour_names(
    nodes: Sequence[Node], kinds: Sequence[Kind], names: Sequence[str]
) -> dict[str, str]:
    """Ref → the inferred name of each text field whose own name (`names`) is empty."""
    texts = [i for i, k in enumerate(kinds) if k is Kind.TEXT and _text(nodes[i])]
    by_ref = {n.ref: n for n in nodes}
    out: dict[str, str] = {}
    for i, node in enumerate(nodes):
        if not kinds[i].fillable or names[i]:
            continue
        label = _related(node, by_ref)
        if not label and node.rect is not None:
            label = _beside(node, [nodes[t] for t in texts])
        elif not label:
            label = _before(i, nodes, kinds)
        if label:
            out[node.ref] = label
    return out


def _text(node: Node) -> str:
    return " ".join((node.label or node.value).split())


def _related(node: Node, by_ref: dict[str, Node]) -> str:
    label = by_ref.get(node.labelled_by) if node.labelled_by else None
    return _text(label) if label is not None else ""


def _together(a: Node, b: Node) -> bool:
    """In the same container, or the snapshot does not say."""
    return not (a.container and b.container) or a.container == b.container


def _beside(field: Node, texts: list[Node]) -> str:
    """The nearest text to the left on the same row, else the nearest above in its column."""
    if field.rect is None:
        return ""
    fx, fy, fw, fh = field.rect
    best: tuple[int, int, str] | None = None  # (left 0 / above 1, gap, text)
    for t in texts:
        if t.rect is None or not _together(field, t):
            continue
        tx, ty, tw, th = t.rect
        middle = ty + th / 2
        if fy <= middle <= fy + fh and tx + tw <= fx + ROW_SLACK_PX:
            rank = (0, fx - (tx + tw))
            limit = MAX_LEFT_GAP_PX
        elif ty + th <= fy + ROW_SLACK_PX and tx < fx + fw and tx + tw > fx:
            rank = (1, fy - (ty + th))
            limit = MAX_ABOVE_GAP_PX
        else:
            continue
        if rank[1] <= limit and (best is None or rank < best[:2]):
            best = (*rank, _text(t))
    return best[2] if best is not None else ""


def _before(index: int, nodes: Sequence[Node], kinds: Sequence[Kind]) -> str:
    """The text immediately before `nodes[index]` in reading order, no control between."""
    field = nodes[index]
    for j in range(index - 1, -1, -1):
        if kinds[j].interactive:
            return ""
        if kinds[j] is Kind.TEXT and _text(nodes[j]):
            return _text(nodes[j]) if _together(field, nodes[j]) else ""
    return ""
