"""The evidence ladder: how much a page's numbers can be trusted, in one place.

============== ======================================================== ==============
level          meaning                                                  set by
============== ======================================================== ==============
spec           what a specification, datasheet or ISA manual says;      the author
               no number on the page was run by anyone we can cite
source-reported figures reported by a cited external source (a blog,    the author
               a paper, a contest write-up, the wiki we replace);
               each such figure is a claim with its ``source``
measured       ``kwiki verify`` ran the page's artifacts and wrote the  kwiki only
               numbers with their provenance, but not every claim that
               could run was reproduced, or the GPU does not match the
               claims' conditions
verified       ``kwiki verify`` reproduced every claim that could run   kwiki only
               on hardware matching the claims' conditions
============== ======================================================== ==============

The author writes ``evidence_level`` in the front matter (spec or source-reported);
kwiki writes the level it established into the page's measurements block, and that
one wins wherever a page's effective level is shown (site, query, agents). Writing
``verified`` by hand is an error; ``measured`` by hand is a warning (pages imported
from the wiki we replace use it for numbers measured outside kwiki).
"""

from __future__ import annotations

from enum import Enum


class EvidenceLevel(str, Enum):
    spec = "spec"
    source_reported = "source-reported"
    measured = "measured"
    verified = "verified"

    @property
    def rank(self) -> int:
        return LADDER.index(self)

    # ordered by rank, not as the strings they are ('measured' < 'source-reported' as text)
    def __ge__(self, other: object) -> bool:
        if not isinstance(other, EvidenceLevel):
            return NotImplemented
        return self.rank >= other.rank

    def __gt__(self, other: object) -> bool:
        if not isinstance(other, EvidenceLevel):
            return NotImplemented
        return self.rank > other.rank

    def __le__(self, other: object) -> bool:
        if not isinstance(other, EvidenceLevel):
            return NotImplemented
        return self.rank <= other.rank

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, EvidenceLevel):
            return NotImplemented
        return self.rank < other.rank


LADDER = [EvidenceLevel.spec, EvidenceLevel.source_reported, EvidenceLevel.measured, EvidenceLevel.verified]
AUTHOR_LEVELS = frozenset({EvidenceLevel.spec, EvidenceLevel.source_reported})
KWIKI_LEVELS = frozenset({EvidenceLevel.measured, EvidenceLevel.verified})


def at_least(level: str, minimum: str) -> bool:
    return EvidenceLevel(level).rank >= EvidenceLevel(minimum).rank
