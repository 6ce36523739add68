#!/usr/bin/env python3
"""Writes schemas.json: JSON schemas for the structured-output end-to-end test.

Deterministic (a fixed seed), standard library only; run it again after changing it and commit
both. The schemas cover what clients send: nested objects, arrays with bounds, enums, patterns,
anyOf, $ref into $defs, required and optional properties, string formats, integer and number
ranges, booleans, nulls and consts. Every string is bounded (maxLength, enum, pattern or format),
every integer has a maximum and every array a maxItems, so a small model's output ends within
the test's max_tokens.

    python3 tests/e2e/structured/make_schemas.py
"""
import json
import random
from pathlib import Path

SEED = 20261127
COUNT = 240
OUT = Path(__file__).with_name("schemas.json")

WORDS = ["name", "city", "color", "title", "kind", "status", "label", "owner", "team", "code",
         "level", "score", "count", "price", "tags", "items", "size", "age", "rank", "note",
         "flag", "mode", "unit", "zone", "step", "id", "email", "date", "host", "uuid"]
ENUM_WORDS = ["red", "green", "blue", "small", "large", "north", "south", "alpha", "beta",
              "open", "closed", "yes", "no", "cat", "dog", "high", "low"]
PATTERNS = [r"^[a-z]{2,6}$", r"^[A-Z][a-z]{1,8}$", r"^[0-9]{3}-[0-9]{4}$", r"^#[0-9a-f]{6}$",
            r"^(on|off)$", r"^[A-Z]{2}[0-9]{2}$", r"^v[0-9]\.[0-9]$", r"^[a-z]{1,8}_[a-z]{1,8}$"]
# Formats the jsonschema package checks without extra packages, and whose grammar is bounded
# ("email" and "hostname" are not: maxLength does not bound them, and a small model can run on).
FORMATS = ["date", "ipv4", "ipv6", "uuid"]


def string_schema(r):
    kind = r.choice(["bounded", "bounded", "enum", "pattern", "format"])
    if kind == "bounded":
        hi = r.randint(1, 12)
        s = {"type": "string", "maxLength": hi}
        if r.random() < 0.5:
            s["minLength"] = r.randint(0, hi)
        return s
    if kind == "enum":
        return {"type": "string", "enum": r.sample(ENUM_WORDS, r.randint(2, 5))}
    if kind == "pattern":
        return {"type": "string", "pattern": r.choice(PATTERNS)}
    return {"type": "string", "format": r.choice(FORMATS)}


def number_schema(r):
    if r.random() < 0.6:
        lo = r.randint(-50, 50)
        return {"type": "integer", "minimum": lo, "maximum": lo + r.randint(0, 1000)}
    lo = r.randint(-10, 10)
    return {"type": "number", "minimum": lo, "maximum": lo + r.randint(1, 100)}


def leaf_schema(r):
    roll = r.random()
    if roll < 0.45:
        return string_schema(r)
    if roll < 0.75:
        return number_schema(r)
    if roll < 0.85:
        return {"type": "boolean"}
    if roll < 0.9:
        return {"type": "null"}
    if roll < 0.95:
        return {"const": r.choice(ENUM_WORDS)}
    return {"enum": [r.randint(0, 9), r.choice(ENUM_WORDS), None]}


def value_schema(r, depth, defs):
    roll = r.random()
    if depth < 3 and roll < 0.15:
        return object_schema(r, depth + 1, defs)
    if roll < 0.3:
        # Arrays of objects stay short and shallow: their size multiplies down the tree.
        if depth == 0 and r.random() < 0.3:
            return {"type": "array", "items": object_schema(r, 2, defs),
                    "minItems": 1, "maxItems": 2}
        lo = r.randint(0, 2)
        return {"type": "array", "items": leaf_schema(r), "minItems": lo,
                "maxItems": lo + r.randint(0, 3)}
    if roll < 0.4:
        return {"anyOf": [leaf_schema(r), leaf_schema(r)]}
    if roll < 0.5 and defs is not None:
        name = f"def{len(defs)}"
        defs[name] = leaf_schema(r) if r.random() < 0.6 else object_schema(r, depth + 1, None)
        return {"$ref": f"#/$defs/{name}"}
    return leaf_schema(r)


def object_schema(r, depth, defs):
    names = r.sample(WORDS, r.randint(1, 5 if depth == 0 else 3))
    props = {n: value_schema(r, depth, defs) for n in names}
    required = [n for n in names if r.random() < 0.7]
    s = {"type": "object", "properties": props, "additionalProperties": False}
    if required:
        s["required"] = required
    return s


def top_schema(r, i):
    defs = {}
    s = object_schema(r, 0, defs)
    if defs:
        s["$defs"] = defs
    if i % 10 == 0:
        s["title"] = f"Record{i}"
        s["description"] = "A record for the structured-output test"
    return s


def main():
    r = random.Random(SEED)
    schemas = [top_schema(r, i) for i in range(COUNT)]
    OUT.write_text(json.dumps(schemas, indent=1) + "\n")
    print(f"wrote {len(schemas)} schemas to {OUT}")


if __name__ == "__main__":
    main()
