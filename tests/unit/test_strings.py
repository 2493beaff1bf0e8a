"""The buyer's page speaks from one catalogue (api/static/strings.json, ADR 0046): every
language has every key with the same placeholders, every key the page asks for is in it, and
none is left unused."""

import json
import re
from pathlib import Path

STATIC = Path(__file__).resolve().parents[2] / "api" / "static"
PAGES = ("buyer.html", "buyer.js", "seatmap.js", "i18n.js")
CATALOGUE: dict[str, dict[str, str]] = json.loads((STATIC / "strings.json").read_text())
ENGLISH = CATALOGUE["en"]


def placeholders(text: str) -> set[str]:
    return set(re.findall(r"\{(\w+)\}", text))


def source() -> str:
    return "\n".join((STATIC / name).read_text() for name in PAGES)


def asked_for() -> tuple[set[str], set[str]]:
    """(the keys the pages name whole, the prefixes of the keys they build: `claim.${code}`)."""
    text = source()
    whole = set(re.findall(r"""\bt\(\s*["']([\w.]+)["']""", text))
    whole |= set(re.findall(r"""data-i18n(?:-[\w-]+)?="([\w.]+)\"""", text))
    spaces = "|".join(sorted({k.split(".")[0] for k in ENGLISH}))
    whole |= set(re.findall(rf"""["']((?:{spaces})\.[\w.]+)["']""", text))  # t(a ? "x" : "y")
    built = set(re.findall(rf"`((?:{spaces})\.[\w.]*)\$\{{", text))
    return whole, built


def test_english_and_german_and_nothing_half_translated() -> None:
    assert set(CATALOGUE) == {"en", "de"}
    for lang, strings in CATALOGUE.items():
        assert set(strings) == set(ENGLISH), f"{lang}: keys differ from English"
        for key, text in strings.items():
            assert text.strip(), f"{lang} {key} is empty"
            assert placeholders(text) == placeholders(ENGLISH[key]), f"{lang} {key}"


def test_every_key_the_page_asks_for_is_in_the_catalogue() -> None:
    whole, built = asked_for()
    assert whole and built
    assert sorted(whole - set(ENGLISH)) == []
    for prefix in built:
        assert any(k.startswith(prefix) for k in ENGLISH), prefix


def test_no_string_in_the_catalogue_is_left_unused() -> None:
    whole, built = asked_for()
    unused = [k for k in ENGLISH if k not in whole and not any(k.startswith(p) for p in built)]
    assert unused == []


def test_the_german_catalogue_is_german() -> None:
    """A check that could fail on a catalogue pasted twice: most German strings differ."""
    same = [k for k, v in CATALOGUE["de"].items() if v == ENGLISH[k]]
    assert len(same) < len(ENGLISH) / 10, same
