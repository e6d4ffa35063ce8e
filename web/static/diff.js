// diff.js: draws one call's diff (issue 32, "the change first"). Loaded after text.js, whose
// `visible` writes out what a line must not draw raw, and before app.js, whose `el` it uses. A unified diff's lines become rows: context, a fold where the
// diff leaves unchanged lines out, and changes, each removed line beside the added line it
// pairs with, so a rewrite shows new lines on its first screen. Old and new line numbers come
// from the hunk headers; the changed words come from the server (core/changes/diff_view.py),
// which owns that comparison. Only the rows in view are drawn: a 5,000-line diff stays
// responsive. Side by side is the same rows in one scroll container, so old line k always
// sits beside its counterpart. `n` / `p` (app.js's keys) jump to the next / previous change.
"use strict";

const DIFF_ROW_PX = 18;  // every drawn row is this tall: the view computes rows from scrollTop
const DIFF_OVERSCAN = 30;  // rows drawn above and below the view, so a scroll shows no gap
const DIFF_JUMP_CONTEXT = 3;  // rows of context kept above a change jumped to
const HUNK_HEADER = /^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@/;
// A changed long line's part (core/changes/intraline.py): its sign, then the column it starts.
const LONG_LINE_PART = /^[-+]\[col [\d,]+\] /;

function diffKind(line) {
  if (line.startsWith("+++") || line.startsWith("---")) return "meta";
  if (line.startsWith("@@")) return "hunk";
  if (line.startsWith("+")) return "add";
  if (line.startsWith("-")) return "del";
  return "";
}

// One line as plain text (the edit preview, which is short, draws these), its flagged
// characters marked.
function diffLine(line, flags = []) {
  if (!flags.length) return el("span", { class: diffKind(line), text: line === "" ? " " : line });
  return markedText({ text: line, words: [], flags }, diffKind(line));
}

// The first line a hunk range stands for, and after it the next: "5,0" is empty after line 5.
function hunkRange(start, length) {
  const size = length == null ? 1 : Number(length);
  const first = size === 0 ? Number(start) + 1 : Number(start);
  return { first, next: first + size };
}

// The diff's rows. kind: "note" (a line of the preview that is not diff), "meta" (---/+++),
// "fold" (unchanged lines left out), "hunk", "same" (context), "change" (old and/or new).
function diffRows(lines, words = {}, flags = {}) {
  const rows = [];
  let started = false;
  let oldNo = 0;
  let newNo = 0;
  let nextOld = 1;  // the old line after the last hunk: what lies between is folded
  let long = null;  // the numbers of a changed long line, while its parts come
  let dels = [];
  let adds = [];
  const flush = () => {
    for (let i = 0; i < Math.max(dels.length, adds.length); i += 1) {
      rows.push({ kind: "change", old: dels[i] || null, new: adds[i] || null });
    }
    dels = [];
    adds = [];
  };
  lines.forEach((line, index) => {
    const match = HUNK_HEADER.exec(line);
    if (long && !LONG_LINE_PART.test(line)) {
      oldNo = long.old + 1;
      newNo = long.new + 1;
      long = null;
    }
    if (match) {
      flush();
      const old = hunkRange(match[1], match[2]);
      const fresh = hunkRange(match[3], match[4]);
      if (old.first > nextOld) rows.push({ kind: "fold", count: old.first - nextOld });
      rows.push({ kind: "hunk", text: line });
      [oldNo, newNo, nextOld, started] = [old.first, fresh.first, old.next, true];
      return;
    }
    if (!started && line.startsWith("new file ")) [started, newNo] = [true, 1];
    const side = (no) => ({ no, text: line, words: words[index] || [], flags: flags[index] || [] });
    if (started && long && line.startsWith("-")) dels.push(side(long.old));
    else if (started && long && line.startsWith("+")) adds.push(side(long.new));
    else if (started && line.startsWith("-")) dels.push(side(oldNo++));
    else if (started && line.startsWith("+")) adds.push(side(newNo++));
    else if (started && line.startsWith(" ")) {
      flush();
      rows.push({ kind: "same", old: side(oldNo++), new: side(newNo++) });
    } else {
      flush();
      if (started && line.startsWith("(long line, ")) long = { old: oldNo, new: newNo };
      rows.push({ kind: diffKind(line) === "meta" && !started ? "meta" : "note", text: line });
    }
  });
  flush();
  return rows;
}

// What is drawn, one entry a screen line: unified puts a change's removed line above its
// added one; side by side puts them in one line.
function diffItems(rows, split) {
  if (split) return rows;
  const items = [];
  for (const row of rows) {
    if (row.kind !== "change") items.push(row);
    else {
      if (row.old) items.push({ kind: "change", old: row.old, new: null });
      if (row.new) items.push({ kind: "change", old: null, new: row.new });
    }
  }
  return items;
}

// The class a marked character is drawn with (core/changes/marks.py's kinds): look-alike
// letters, whitespace drawn as a sign (·, →, ⍽, ␍), and control or format characters.
const FLAG_CLASSES = {
  "look-alike": "lookalike", space: "whitespace", tab: "whitespace", "other-space": "whitespace",
  "line-ending": "whitespace", control: "control",
};

// One marked character: its own mark, named in its title (`U+0440 CYRILLIC SMALL LETTER ER`).
function flagMark(found, shown) {
  return el("mark", {
    class: `flag ${FLAG_CLASSES[found.kind] || "control"}`, "data-kind": found.kind,
    title: `${found.code} ${visible(found.name, "")}`, text: shown,
  });
}

// A line's text with its changed words and its flagged characters marked; the text stays
// whole (sign included). The server counts both in code points (core/changes/diff_view.py
// and marks.py, as Python and the terminal count), and a JS string slices in UTF-16 units,
// which differ after every emoji or other character past U+FFFF; so the line is cut as an
// array of code points (the server's `at16` is not used: one unit for both). Each piece is
// written out (text.js) after it is cut: an escape is longer than the character, and would
// move every mark after it. A flag counts from after the sign, and on a long line's part
// from after its `[col N] ` too.
function markedText(side, kind) {
  const node = el("span", { class: `text ${kind}` });
  const points = Array.from(side.text);
  const piece = (from, to) => visible(points.slice(from, to).join(""), "\t");
  const base = (LONG_LINE_PART.exec(side.text) || ["-"])[0].length;
  const flags = new Map((side.flags || []).map((found) => [found.at + base, found]));
  const words = side.words.map(([start, end]) => [start + 1, end + 1]);
  const cuts = new Set([1, points.length]);
  for (const [start, end] of words) cuts.add(start).add(end);
  for (const at of flags.keys()) cuts.add(at).add(at + 1);
  const ends = [...cuts].filter((at) => at >= 1 && at <= points.length).sort((a, b) => a - b);
  node.append(piece(0, 1));
  let from = 1;
  let word = -1;  // the changed word being drawn, as its index in `words`
  let into = node;  // where the next piece goes: the line, or the changed word's mark
  for (const to of ends) {
    if (to <= from) continue;
    const inWord = words.findIndex(([start, end]) => start <= from && to <= end);
    if (inWord !== word) {
      word = inWord;
      into = node;
      if (word >= 0) node.append(into = el("mark", { class: "word" }));
    }
    const found = to === from + 1 ? flags.get(from) : undefined;
    into.append(found ? flagMark(found, piece(from, to)) : piece(from, to));
    from = to;
  }
  if (side.text === "") node.append(" ");  // an empty row keeps its height
  return node;
}

function lineNumber(no, which) {
  return el("span", { class: `ln ${which}`, text: no == null ? "" : String(no) });
}

function sideCells(side, kind, which) {
  if (!side) return [lineNumber(null, which), el("span", { class: `text empty side-${which}`, text: " " })];
  const text = markedText(side, kind);
  text.classList.add(`side-${which}`);
  text.title = visible(side.text, "\t");
  return [lineNumber(side.no, which), text];
}

function drawItem(item, split) {
  const row = el("span", { class: `diff-row ${split ? "split-row" : "unified-row"} row-${item.kind}` });
  if (item.kind === "fold") {
    const words = `⋯ ${item.count.toLocaleString("en-US")} unchanged line${item.count === 1 ? "" : "s"}`;
    row.append(el("span", { class: "text fold", text: words }));
  } else if (item.kind === "hunk" || item.kind === "meta" || item.kind === "note") {
    row.append(el("span", { class: `text ${item.kind === "note" ? "note" : item.kind}`, text: item.text || " " }));
  } else if (split) {
    const kinds = item.kind === "same" ? ["same", "same"] : ["del", "add"];
    row.append(...sideCells(item.old, kinds[0], "old"), ...sideCells(item.new, kinds[1], "new"));
  } else {
    const side = item.old || item.new;
    const kind = item.kind === "same" ? "same" : item.old ? "del" : "add";
    row.append(
      lineNumber(item.old ? item.old.no : null, "old"),
      lineNumber(item.new ? item.new.no : null, "new"),
      markedText(side, kind),
    );
  }
  return row;
}

let activeDiff = null;  // the diff a reviewer last touched: `n` / `p` move in it

// The old line number at or after item `index` (the first diff line there, if none is old).
function oldLineAt(items, index) {
  for (let i = index; i < items.length; i += 1) {
    if (items[i].old) return items[i].old.no;
  }
  return null;
}

// The drawn diff: one scroll container whose rows are drawn as they come into view; `at`, an
// old line number, is put at the top (the other layout's view, when the reviewer switches).
function diffView(lines, words, split, at = null, flags = {}, label = "what it would change") {
  const rows = diffRows(lines, words, flags);
  const items = diffItems(rows, split);
  // Where each change starts (a change right after another one is the same change).
  const changes = items.flatMap((item, i) => (item.kind === "change" && (i === 0 || items[i - 1].kind !== "change") ? [i] : []));
  const space = el("span", { class: "diff-space" });
  space.style.height = `${items.length * DIFF_ROW_PX}px`;
  // A region Tab reaches, so the keyboard scrolls a long diff (axe-core:
  // scrollable-region-focusable), named for a screen reader, one name per call (axe-core:
  // landmark-unique, with two calls in a thread).
  const scroller = el("pre", {
    class: `diff diff-scroll${split ? " split" : ""}`, tabindex: "0", role: "region", "aria-label": label,
  }, space);
  let drawn = "";
  let current = -1;  // the change jumped to last, while the view stays where the jump put it
  let jumpedTo = null;
  const draw = () => {
    const height = scroller.clientHeight || 40 * DIFF_ROW_PX;
    const first = Math.max(0, Math.floor(scroller.scrollTop / DIFF_ROW_PX) - DIFF_OVERSCAN);
    const last = Math.min(items.length, Math.ceil((scroller.scrollTop + height) / DIFF_ROW_PX) + DIFF_OVERSCAN);
    if (drawn === `${first}-${last}-${current}`) return;
    drawn = `${first}-${last}-${current}`;
    const nodes = [];
    const change = changes[current];
    const end = current >= 0 ? (changes[current + 1] ?? items.length) : -1;
    for (let i = first; i < last; i += 1) {
      const node = drawItem(items[i], split);
      node.style.top = `${i * DIFF_ROW_PX}px`;
      node.style.height = node.style.lineHeight = `${DIFF_ROW_PX}px`;
      node.dataset.row = String(i);
      if (i >= change && i < end && items[i].kind === "change") node.classList.add("current");
      nodes.push(node);
    }
    space.replaceChildren(...nodes);
  };
  let lastTop = 0;  // where the reviewer left it: the inbox's refresh moves the node, which resets it
  scroller.addEventListener("scroll", () => {
    if (!scroller.isConnected) return;
    lastTop = scroller.scrollTop;
    if (jumpedTo != null && Math.abs(scroller.scrollTop - jumpedTo) > 1) jumpedTo = null;
    requestAnimationFrame(draw);
  });
  scroller.addEventListener("pointerdown", () => { activeDiff = scroller; });
  new ResizeObserver(() => {
    if (scroller.isConnected && scroller.clientHeight && scroller.scrollTop !== lastTop) scroller.scrollTop = lastTop;
    draw();
  }).observe(scroller);
  // The next change (step 1) or the previous one (-1), from the last jump or from the view.
  scroller.jump = (step) => {
    if (!changes.length) return;
    activeDiff = scroller;
    const top = Math.floor(scroller.scrollTop / DIFF_ROW_PX) + DIFF_JUMP_CONTEXT;
    const from = jumpedTo != null && current >= 0 ? changes[current] : top - (step > 0 ? 1 : 0);
    let next = step > 0 ? changes.findIndex((at) => at > from) : changes.findLastIndex((at) => at < from);
    if (next < 0) next = step > 0 ? changes.length - 1 : 0;
    current = next;
    scroller.scrollTop = Math.max(0, (changes[next] - DIFF_JUMP_CONTEXT) * DIFF_ROW_PX);
    jumpedTo = lastTop = scroller.scrollTop;
    scroller.scrollIntoView({ block: "nearest" });
    draw();
  };
  scroller.topLine = () => oldLineAt(items, Math.floor(scroller.scrollTop / DIFF_ROW_PX));
  if (at != null) {
    const index = items.findIndex((item) => item.old && item.old.no >= at);
    if (index > 0) {
      // Set once the container is laid out (a detached node cannot scroll): the observer does it.
      lastTop = index * DIFF_ROW_PX;
      scroller.scrollTop = lastTop;
    }
  }
  draw();
  return scroller;
}

// `n` / `p`: the diff last touched inside `root` (the focused thread, or the page), else its first.
function diffJump(root, step) {
  const box = activeDiff && activeDiff.isConnected && root.contains(activeDiff)
    ? activeDiff : root.querySelector("pre.diff-scroll");
  if (box) box.jump(step);
}
