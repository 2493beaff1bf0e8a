// The buyer's page in the buyer's language: every string it shows is in one catalogue
// (strings.json: English and German, the same keys and placeholders in each, checked by
// tests/unit/test_strings.py). The language is the one asked for (?lang=de, remembered in this
// browser), else the browser's first language the catalogue has, else English. Money is
// formatted in the event's currency with the page language's conventions (45,00 € in German,
// €45.00 in English), and times in it too.

const KEY = "onsale.lang";
const FALLBACK = "en";
let catalogue = {};
let strings = {};
let english = {};

export let lang = FALLBACK;

function chosen(available) {
  const asked = new URLSearchParams(location.search).get("lang");
  if (asked && available.includes(asked)) {
    localStorage.setItem(KEY, asked);
    return asked;
  }
  const kept = localStorage.getItem(KEY);
  if (kept && available.includes(kept)) return kept;
  for (const tag of navigator.languages || [navigator.language]) {
    const base = String(tag || "").toLowerCase().split("-")[0];
    if (available.includes(base)) return base;
  }
  return FALLBACK;
}

// Load the catalogue and pick the language; the page's static text is translated at once.
export async function loadStrings() {
  try {
    const r = await fetch("/ui/strings.json", { cache: "no-cache" });
    catalogue = await r.json();
  } catch {
    catalogue = {};
  }
  english = catalogue[FALLBACK] || {};
  lang = chosen(Object.keys(catalogue));
  strings = catalogue[lang] || english;
  document.documentElement.lang = lang;
  translatePage(document);
}

// The string `key` in the page's language, its {placeholders} filled from `vars` (a key the
// language lacks falls back to English, then to the key itself).
export function t(key, vars = {}) {
  const text = strings[key] ?? english[key] ?? key;
  return text.replace(/\{(\w+)\}/g, (whole, name) => (name in vars ? String(vars[name]) : whole));
}

export function has(key) {
  return key in strings || key in english;
}

// Elements marked data-i18n get their text, data-i18n-alt / -aria-label / -title attributes.
export function translatePage(root) {
  for (const node of root.querySelectorAll("[data-i18n]")) node.textContent = t(node.dataset.i18n);
  for (const attr of ["alt", "aria-label", "title"]) {
    for (const node of root.querySelectorAll(`[data-i18n-${attr}]`)) {
      node.setAttribute(attr, t(node.getAttribute(`data-i18n-${attr}`)));
    }
  }
}

// The languages to offer, each named in itself, and a switch that reloads the page in one.
export function languages() {
  return Object.entries(catalogue).map(([code, s]) => [code, s["lang.name"] || code]);
}

export function switchTo(code) {
  localStorage.setItem(KEY, code);
  const url = new URL(location.href);
  url.searchParams.delete("lang");
  location.replace(url.toString());
}
