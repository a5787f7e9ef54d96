"""The text shifts of the PA paper's Appendix C (Figure 10), at shift power W: 2^W replacements
per review, capped at what the review allows.

- levenshtein: 2^W character edits at distinct positions of the review, each an insertion (before
  the character), a deletion or a substitution (by a different letter), so the edited review is
  within Levenshtein distance 2^W of the original.
- amplification: 2^W distinct words, drawn at random, replaced by adjectives of the review's
  true sentiment (POSITIVE for a positive review, NEGATIVE for a negative one).
- contradiction: the same with adjectives of the opposite sentiment.

A word is a run of letters, possibly with apostrophes inside ("don't"); an adjective never
replaces the same word (case aside), so every replacement changes the review.  The paper's text
calls the adjectives "added" and its caption "replacing some words"; we replace, as the caption
says.  The adjective lists are ours (the paper does not give its own): common single-word
adjectives of film reviews, half of them strong, none negated.

Every draw is deterministic per (seed, strategy, W, review id), so a view is the same whichever
job computes it and whatever other views or reviews there are.
"""
from __future__ import annotations

import re
import zlib

import numpy as np

STRATEGIES = ("levenshtein", "amplification", "contradiction")
POSITIVE = ("good", "great", "excellent", "wonderful", "brilliant", "superb", "amazing",
            "outstanding", "delightful", "beautiful", "charming", "enjoyable", "fantastic",
            "magnificent", "marvelous", "moving", "perfect", "remarkable", "splendid", "stunning",
            "terrific", "touching", "witty", "gripping", "compelling", "masterful", "lovely",
            "engaging", "memorable", "powerful")
NEGATIVE = ("bad", "awful", "terrible", "horrible", "dreadful", "boring", "dull", "poor", "weak",
            "lame", "pathetic", "atrocious", "mediocre", "tedious", "stupid", "pointless",
            "painful", "clumsy", "bland", "forgettable", "dismal", "lousy", "annoying",
            "ridiculous", "worthless", "unwatchable", "disappointing", "predictable",
            "incoherent", "laughable")
LETTERS = "abcdefghijklmnopqrstuvwxyz"
WORD = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)*")
MAX_POWER = 30   # 2^30 replacements exceed any review: a larger W means nothing more


def check_strategy(strategy: str) -> str:
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown text shift strategy {strategy!r}; valid: {', '.join(STRATEGIES)}")
    return strategy


def replacements(power: int) -> int:
    """2^W, the replacements per review at shift power W (W an integer in 0..MAX_POWER)."""
    if isinstance(power, bool) or not isinstance(power, (int, np.integer)) or not 0 <= power <= MAX_POWER:
        raise ValueError(f"shift power W must be an integer in 0..{MAX_POWER}, got {power!r}")
    return 2 ** int(power)


def review_rng(seed: int, strategy: str, power: int, review_id: str) -> np.random.Generator:
    """The generator of one review's shift: fixed by (seed, strategy, W, review id) alone."""
    key = zlib.crc32(str(review_id).encode("utf-8"))
    return np.random.default_rng([int(seed), STRATEGIES.index(check_strategy(strategy)),
                                  int(power), key])


def levenshtein(text: str, k: int, rng: np.random.Generator) -> tuple[str, int]:
    """`text` with min(k, len(text)) character edits at distinct positions; (text, edits)."""
    k = min(int(k), len(text))
    if k <= 0:
        return text, 0
    positions = set(rng.choice(len(text), size=k, replace=False).tolist())
    ops = iter(rng.integers(3, size=k).tolist())       # 0 insert, 1 delete, 2 substitute
    letters = iter(rng.integers(len(LETTERS), size=k).tolist())
    out = []
    for i, char in enumerate(text):
        if i not in positions:
            out.append(char)
            continue
        op, letter = next(ops), LETTERS[next(letters)]
        if op == 0:
            out.append(letter + char)
        elif op == 2:
            if letter == char.lower():                   # a different letter: a real substitution
                letter = LETTERS[(LETTERS.index(letter) + 1) % len(LETTERS)]
            out.append(letter)
        # op == 1: the character is deleted
    return "".join(out), k


def replace_words(text: str, k: int, adjectives, rng: np.random.Generator) -> tuple[str, int]:
    """`text` with min(k, its number of words) distinct words replaced by adjectives drawn from
    `adjectives`, each different from the word it replaces; (text, replacements)."""
    spans = [m.span() for m in WORD.finditer(text)]
    k = min(int(k), len(spans))
    if k <= 0:
        return text, 0
    chosen = sorted(rng.choice(len(spans), size=k, replace=False).tolist())
    draws = rng.integers(len(adjectives), size=k).tolist()
    out, last = [], 0
    for index, draw in zip(chosen, draws):
        start, end = spans[index]
        word = text[start:end].lower()
        adjective = adjectives[draw]
        if adjective == word:
            adjective = adjectives[(draw + 1) % len(adjectives)]
        out += [text[last:start], adjective]
        last = end
    out.append(text[last:])
    return "".join(out), k


def adjectives_for(strategy: str, label: int) -> tuple[str, ...]:
    """The adjectives a word strategy draws from for a review of `label` (0 negative, 1 positive)."""
    if label not in (0, 1):
        raise ValueError(f"review label {label!r} is not 0 (negative) or 1 (positive)")
    same = POSITIVE if label == 1 else NEGATIVE
    other = NEGATIVE if label == 1 else POSITIVE
    return {"amplification": same, "contradiction": other}[check_strategy(strategy)]


def perturb(text: str, label: int, strategy: str, power: int, rng: np.random.Generator) -> tuple[str, int]:
    """One review shifted by `strategy` at power W: (shifted text, replacements made)."""
    k = replacements(power)
    if check_strategy(strategy) == "levenshtein":
        return levenshtein(text, k, rng)
    return replace_words(text, k, adjectives_for(strategy, label), rng)


def shift_reviews(reviews, strategy: str, power: int, seed: int) -> tuple[list[str], np.ndarray]:
    """Every review (objects with id, label and text) shifted: (texts, replacements per review)."""
    texts, made = [], []
    for r in reviews:
        text, n = perturb(r.text, r.label, strategy, power, review_rng(seed, strategy, power, r.id))
        texts.append(text)
        made.append(n)
    return texts, np.asarray(made, dtype=np.int64)
