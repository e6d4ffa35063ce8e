// text.js: how the page writes text it did not write itself (a file's lines, the model's
// words, a request, a tool's or a file's name), loaded before diff.js and app.js. The rule is
// the terminal's (core/text.py, `visible`): control characters, format characters (bidi
// controls such as U+202E, U+2066-2069, zero-width ones), surrogates and line/paragraph
// separators are written out as `\xNN` per UTF-8 byte, so a file cannot reorder a line or
// hide part of a change from the person approving it, and the page reads as the terminal
// does. Everything else, backslashes included, is kept as it is; so text already written out
// (by the server or by this function) is left as it is: escaping twice changes nothing.
"use strict";

// core/text.py's HIDDEN_CATEGORIES, as Unicode property classes.
const HIDDEN_TEXT = /[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}]/u;
const HIDDEN_CHARS = /[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}]/gu;

// A code point's UTF-8 bytes; a lone surrogate too, as Python's "surrogatepass" writes it.
function utf8Bytes(code) {
  if (code < 0x80) return [code];
  if (code < 0x800) return [0xc0 | (code >> 6), 0x80 | (code & 0x3f)];
  if (code < 0x10000) return [0xe0 | (code >> 12), 0x80 | ((code >> 6) & 0x3f), 0x80 | (code & 0x3f)];
  return [0xf0 | (code >> 18), 0x80 | ((code >> 12) & 0x3f), 0x80 | ((code >> 6) & 0x3f), 0x80 | (code & 0x3f)];
}

// `text` as it may be drawn: every hidden character but those in `keep` written out.
// keep: "\t\n" for text shown as lines (the default), "\t" for one line of a file (a diff
// line), "" for a name or a value inside a line of ours.
function visible(text, keep = "\t\n") {
  const shown = String(text ?? "");
  if (!HIDDEN_TEXT.test(shown)) return shown;  // nearly every text: nothing to do
  return shown.replace(HIDDEN_CHARS, (char) => (keep.includes(char) ? char
    : utf8Bytes(char.codePointAt(0)).map((byte) => `\\x${byte.toString(16).padStart(2, "0")}`).join("")));
}

// JSON text (an edit box's arguments) with the hidden characters written as JSON escapes
// (`\u202e`): the same value once parsed, so what is sent back is what the model sent.
// Outside its strings JSON text holds only spaces and newlines, so only strings change.
function jsonVisible(json) {
  if (!HIDDEN_TEXT.test(json)) return json;
  return json.replace(HIDDEN_CHARS, (char) => ("\t\n".includes(char) ? char
    : [...Array(char.length).keys()].map((i) => `\\u${char.charCodeAt(i).toString(16).padStart(4, "0")}`).join("")));
}
