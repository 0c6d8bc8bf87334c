"""`facts`: open-ended descriptions of an entity from a small fact table (the tiny world).

No single right answer exists, which is the point: it is the label-free setting of RLVRR (paper
002) and DRO (paper 003). What *is* known is the gold list of facts in table order and the requested
style, so quality is measurable: in-order recall of the gold facts (`coverage`) and adherence to
the style (`style_ok`). Each prompt carries three paraphrased references; they say the same facts in
the same order with different wording, as human references would.

Demonstrations for the base model are deliberately incomplete (a random subset of the facts, in
order, sometimes in the wrong style) so that coverage leaves room to learn.

With `dump_frac`, some are a keyword dump instead (`keyword_dump`): the name and facts as bare
words in a random order, each said `repeats` times. A base trained on them owns the shortcut that
paper 002 (Table 3) says direct keyword matching pays and ordered-keyword LCS does not. Against the
rule backend's components (one key point per fact): a dump holds every keyword, so direct
matching gives it full content marks; LCS divides by the longer keyword sequence, so the repeats
halve it (at 2; RLVRR scores each key point alone, so the order across facts costs nothing there);
and in-order `coverage`, the task's truth, sees a random order (about 0.66 where the default
demonstrations have 0.73 and a complete description 1.0).

Two opt-in settings give the LCS an order to reward (paper 002 Table 3's setting: key points of
several ordered keywords) and make the dump the cheaper route: `values_per_fact` > 1 gives each
attribute that many distinct values in table order, said as one comma-separated list ("It eats
berries, fish, seeds."), so a fact's key point holds several keywords whose order the references
share and a dump shuffles; `min_keys` (up to all four attributes) makes the tables longer. At 1
and 2 (the defaults) the world draws exactly what it always drew.
"""

from __future__ import annotations

import random
import re

NAMES = ["Zorb", "Mip", "Tavi", "Rolo", "Quin", "Besk", "Lune", "Paxo", "Wren", "Dovi", "Kesh", "Nilo"]
KINDS = ["fox", "owl", "frog", "bear", "cat", "goat", "hare", "crab"]
ATTRS = {
    "color": ["red", "blue", "green", "gray", "brown", "white", "black", "gold"],
    "home": ["forest", "river", "cave", "hill", "lake", "field", "desert", "marsh"],
    "food": ["berries", "fish", "seeds", "roots", "nuts", "bugs", "grass", "honey"],
    "skill": ["singing", "digging", "jumping", "climbing", "swimming", "running", "hiding", "dancing"],
}
ORDER = ["color", "home", "food", "skill"]

# Three paraphrase templates per fact; reference i uses template i for every fact.
PHRASES = {
    "kind": ["{name} is a {kind}.", "{name} is a small {kind}.", "Meet {name}, a {kind}."],
    "color": ["It is {v}.", "Its coat is {v}.", "Its color is {v}."],
    "home": ["It lives in the {v}.", "Its home is the {v}.", "It stays near the {v}."],
    "food": ["It eats {v}.", "It likes to eat {v}.", "Its food is {v}."],
    "skill": ["It is good at {v}.", "It loves {v}.", "Its skill is {v}."],
}
STYLES = {
    "sentences": "Write one sentence per fact.",
    "bullets": "Write one line per fact, each starting with '- '.",
}


def fact_sentences(entity: dict, variant: int) -> list[str]:
    out = [PHRASES["kind"][variant].format(name=entity["name"], kind=entity["kind"])]
    for key in entity["keys"]:
        out.append(PHRASES[key][variant].format(v=entity[key]))
    return out


def render(sentences: list[str], style: str) -> str:
    if style == "bullets":
        return "\n".join(f"- {s}" for s in sentences)
    return " ".join(sentences)


def style_ok(text: str, style: str) -> bool:
    """Rule for the requested style: bullet lines only, or prose with no bullet line."""
    lines = [ln for ln in text.strip().split("\n") if ln.strip()]
    if not lines:
        return False
    if style == "bullets":
        return all(ln.startswith("- ") for ln in lines)
    return not any(ln.lstrip().startswith("-") for ln in lines)


def coverage(text: str, gold_facts: list[str]) -> float:
    """In-order recall: the longest run of gold facts found in order, as whole words, / #facts.

    >>> coverage("It is red. It eats fish.", ["red", "forest", "fish"])
    0.6666666666666666
    >>> coverage("It eats fish. It is red.", ["red", "forest", "fish"])
    0.3333333333333333
    """
    if not gold_facts:
        return 0.0
    found = []
    for m in re.finditer(r"[a-z]+", text.lower()):
        found.append(m.group(0))
    # LCS between the gold facts and the words of the text, restricted to gold words.
    gold = [g.lower() for g in gold_facts]
    words = [w for w in found if w in set(gold)]
    prev = [0] * (len(words) + 1)
    for g in gold:
        cur = [0]
        for j, w in enumerate(words):
            cur.append(prev[j] + 1 if g == w else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1] / len(gold)


def fact_values(entity: dict, key: str) -> list[str]:
    """The values of one attribute in table order (one unless `values_per_fact` > 1).

    >>> fact_values({"food": "berries, fish"}, "food")
    ['berries', 'fish']
    """
    return entity[key].split(", ")


def gold_facts(entity: dict) -> list[str]:
    """The facts a description should say, in table order: the kind, then every value.

    >>> gold_facts({"kind": "fox", "keys": ["color", "food"], "color": "red", "food": "nuts, fish"})
    ['fox', 'red', 'nuts', 'fish']
    """
    return [entity["kind"]] + [v for k in entity["keys"] for v in fact_values(entity, k)]


def keyword_dump(rng: random.Random, entity: dict, style: str, repeats: int) -> str:
    """The entity's name and facts as bare words in a random order, each said `repeats` times
    in a row, in the requested layout (bullet lines, or one comma-separated line).

    >>> keyword_dump(random.Random(0), {"name": "Zorb", "kind": "fox", "keys": ["color"],
    ...                                 "color": "red"}, "sentences", 2)
    'fox, fox, red, red, Zorb, Zorb.'
    """
    words = [entity["name"]] + gold_facts(entity)
    said = [w for w in rng.sample(words, len(words)) for _ in range(repeats)]
    return render(said, style) if style == "bullets" else ", ".join(said) + "."


def make_entity(rng: random.Random, *, min_keys: int = 2, values_per_fact: int = 1) -> dict:
    """An entity and its attributes (in `ORDER`), each holding `values_per_fact` distinct values
    (said as one comma-separated list, in the order drawn).

    An attribute is kept when it is in a fresh draw of `n_keys` of the four, n_keys from
    `min_keys` to 4 (the world of record's rule, so an entity may keep fewer than `min_keys`);
    at `min_keys` 4 every draw is all four and every table full."""
    if not 1 <= min_keys <= len(ORDER):
        raise ValueError(f"min_keys must be in [1, {len(ORDER)}], got {min_keys}")
    if not 1 <= values_per_fact <= min(len(v) for v in ATTRS.values()):
        raise ValueError(f"values_per_fact must be in [1, {min(len(v) for v in ATTRS.values())}], "
                         f"got {values_per_fact}")
    entity = {"name": rng.choice(NAMES), "kind": rng.choice(KINDS)}
    n_keys = rng.randint(min_keys, len(ORDER))
    entity["keys"] = [k for k in ORDER if k in rng.sample(ORDER, n_keys)]
    for k in entity["keys"]:
        # One value is drawn as the world always drew it, so the defaults keep every row.
        entity[k] = (rng.choice(ATTRS[k]) if values_per_fact == 1
                     else ", ".join(rng.sample(ATTRS[k], values_per_fact)))
    return entity


def prompt_text(entity: dict, style: str) -> str:
    table = "; ".join([f"name={entity['name']}", f"kind={entity['kind']}"]
                      + [f"{k}={entity[k]}" for k in entity["keys"]])
    return f"Facts: {table}.\nTask: Describe {entity['name']}. {STYLES[style]}\nAnswer:"


def generate(rng: random.Random, n: int, split: str, *, drop_frac: float,
             wrong_style_frac: float, dump_frac: float = 0.0, dump_repeats: int = 2,
             dump_rng: random.Random | None = None, min_keys: int = 2,
             values_per_fact: int = 1) -> list[dict]:
    """Rows of the `facts` family for one split (schema in world/README.md).

    A demonstration is a `keyword_dump` with probability `dump_frac`, drawn from `dump_rng`:
    `rng` draws the same entities, references and faithful demonstrations whatever `dump_frac` is.
    `min_keys` and `values_per_fact` shape the fact tables (`make_entity`; the defaults are the
    world's tables of record).
    """
    if dump_frac > 0 and dump_rng is None:
        raise ValueError("dump_frac > 0 needs dump_rng")
    rows = []
    for i in range(n):
        e = make_entity(rng, min_keys=min_keys, values_per_fact=values_per_fact)
        style = rng.choice(sorted(STYLES))
        refs = [render(fact_sentences(e, v), style) for v in range(3)]
        gold = gold_facts(e)
        # Demonstration: a paraphrase with some facts dropped and, sometimes, the wrong style.
        v = rng.randrange(3)
        sents = fact_sentences(e, v)
        kept = [sents[0]] + [s for s in sents[1:] if rng.random() >= drop_frac]
        demo_style = style if rng.random() >= wrong_style_frac else \
            next(s for s in sorted(STYLES) if s != style)
        demonstration = render(kept, demo_style)
        if dump_rng is not None and dump_rng.random() < dump_frac:
            demonstration = keyword_dump(dump_rng, e, style, dump_repeats)
        rows.append({
            "id": f"facts-{split}-{i:05d}",
            "family": "facts",
            "split": split,
            "prompt": prompt_text(e, style),
            "style": style,
            "gold_facts": gold,
            "references": [" " + r for r in refs],
            "demonstration": " " + demonstration,
        })
    return rows
