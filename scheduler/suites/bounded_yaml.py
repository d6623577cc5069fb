"""YAML read within bounds: the one reader of a flows file (`scheduler.suites.flows`), which
`goalfleet suite validate|run` and `goalfleet schedule add` parse before anything reaches the
API (no route takes YAML: the API and the scheduler get the JSON body made from it).

PyYAML's safe loader still expands what a short file asks for: aliases of aliases ("billion
laughs", 553 bytes: 3 GB), merge keys over a chain of aliases (70 KB: 2.8 GB), nesting deep
enough to overflow Python's stack. So the composer here, node by node, as the parser streams
its events (nothing is built before the check):

- refuses anchors and aliases (`&name`, `*name`) and merge keys (`<<`): a flows file shares
  settings through `defaults:`, and with neither, what is read is at most what is written;
- refuses nesting deeper than `MAX_DEPTH` and more than `MAX_NODES` nodes;
- refuses a scalar Python cannot turn into its type (an integer of over 4,300 digits, a date
  with month 13) as the file's fault, not a crash;
- gives up after `MAX_SECONDS` (a backstop: the caps above, and the file's size cap in
  `flows.MAX_FILE_BYTES`, bound the work already).

Each refusal is a `YamlRefused` naming the line of the node that broke the bound.
"""

from __future__ import annotations

import time
from typing import Any

import yaml

MAX_DEPTH = 32
"""Collections inside collections: a flows file needs 5 (flows, a flow, its secrets, a secret's
mapping, a matrix's labels); PyYAML's composer recurses once per level."""
MAX_NODES = 100_000
"""Scalars and collections: a thousand flows of fifty fields each, and room to spare."""
MAX_SECONDS = 20.0
"""A backstop, not the bound: a flows file at the size cap with short values (some 60,000
nodes) is read in about 8 s on a busy two-core host."""
MERGE = "tag:yaml.org,2002:merge"


class YamlRefused(ValueError):  # noqa: N818 - a refusal, named for what the caller sees
    """What is wrong and where: `line` is 1-based."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line
        self.message = message


def read(text: str) -> tuple[yaml.Node | None, Any]:
    """The document's node tree (for the lines of its fields) and its value; `YamlRefused`
    past a bound, `yaml.YAMLError` for YAML that does not parse."""
    loader = _BoundedLoader(text)
    try:
        node = loader.get_single_node()
        return node, None if node is None else loader.construct_document(node)
    finally:
        loader.dispose()


class _BoundedLoader(yaml.SafeLoader):
    def __init__(self, text: str) -> None:
        super().__init__(text)
        self._depth = 0
        self._nodes = 0
        self._deadline = time.monotonic() + MAX_SECONDS

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]  # PyYAML's stubs
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise _refused(
                event,
                "anchors and aliases (&name, *name) are not read in a flows file: write the "
                "value out, or put what flows share under defaults:",
            )
        self._nodes += 1
        if self._nodes > MAX_NODES:
            raise _refused(event, f"over {MAX_NODES} values in one file; split the suite")
        if time.monotonic() > self._deadline:
            raise _refused(event, f"not read within {MAX_SECONDS:g} s; split the suite")
        nested = isinstance(event, yaml.CollectionStartEvent)
        if nested:
            self._depth += 1
            if self._depth > MAX_DEPTH:
                raise _refused(event, f"nested over {MAX_DEPTH} levels deep")
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= int(nested)

    def fetch_flow_collection_start(self, TokenClass: type[yaml.Token]) -> None:  # noqa: N803 - PyYAML's name
        """`[` or `{`, refused past `MAX_DEPTH` as the scanner meets it: the scanner looks
        ahead over every open bracket of a line for a key, quadratically, long before the
        composer would see the depth."""
        if self.flow_level >= MAX_DEPTH:
            raise YamlRefused(self.get_mark().line + 1, f"nested over {MAX_DEPTH} levels deep")
        super().fetch_flow_collection_start(TokenClass)

    def compose_mapping_node(self, anchor: dict[Any, yaml.Node]) -> yaml.MappingNode:
        """A mapping, refused when a key is a merge key (`anchor` is a str: the stubs err)."""
        node: yaml.MappingNode = super().compose_mapping_node(anchor)
        for key, _ in node.value:
            if key.tag == MERGE:
                raise YamlRefused(
                    key.start_mark.line + 1,
                    "merge keys (<<) are not read in a flows file: put what flows share "
                    "under defaults:",
                )
        return node

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:  # noqa: ANN401, FBT001, FBT002 - PyYAML's signature
        try:
            return super().construct_object(node, deep=deep)
        except YamlRefused:
            raise
        except (ValueError, OverflowError) as exc:  # int(), datetime() of what is written
            value = str(node.value) if isinstance(node, yaml.ScalarNode) else ""
            shown = repr(value) if len(value) <= 40 else f"a value of {len(value)} characters"  # noqa: PLR2004 - shown whole up to 40
            why = str(exc).split(";")[0]  # not Python's own fix (sys.set_int_max_str_digits)
            raise YamlRefused(node.start_mark.line + 1, f"{shown} cannot be read: {why}") from None


def _refused(event: yaml.Event, message: str) -> YamlRefused:
    return YamlRefused(event.start_mark.line + 1 if event.start_mark else 0, message)
