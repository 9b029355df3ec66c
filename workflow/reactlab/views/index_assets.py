"""The index page's own style rules and its one inline script: the run list, filtered
and paged in the browser (:mod:`reactlab.views.index`). The page's Content-Security-Policy
allows that script by its hash and nothing else."""

from __future__ import annotations

__all__ = ["INDEX_CSS", "INDEX_JS"]

INDEX_CSS = """
body { max-width: 1340px; }
.scroll { overflow-x: auto; max-width: 100%; }
table.matrix { width: auto; min-width: 50%; }
table.matrix td, table.matrix th { white-space: nowrap; }
table.matrix td.cell { text-align: center; font-variant-numeric: tabular-nums; }
td.r0 { background: #fde8e6; } td.r1 { background: #fbe3cf; } td.r2 { background: #fbf0c9; }
td.r3 { background: #e9f3cf; } td.r4 { background: #d3eed6; } td.r5 { background: #bfe5c6; }
td.na { color: #9aa1b1; }
.small { font-size: .82em; }
tr.published td { color: #5a6275; font-style: italic; background: #f6f7fa; }
.v-none { background: #eceef3; color: #4a5263; border-color: #c9ced9; }
details { margin: .4em 0 .8em; }
details > summary { cursor: pointer; color: #1f5fbf; margin: .3em 0; }
div.filters { display: flex; flex-wrap: wrap; gap: .5em 1em; align-items: end;
  background: #fff; border: 1px solid #dde1e8; border-radius: 6px; padding: .5em .8em; }
div.filters label { display: flex; flex-direction: column; font-size: .85em; color: #5a6275; }
div.filters select, div.filters input { font: inherit; font-size: 14px; max-width: 16em; }
.pager { display: flex; gap: .6em; align-items: center; margin: .6em 0; flex-wrap: wrap; }
.pager button { font: inherit; font-size: 14px; }
table.runs { table-layout: fixed; font-size: 14px; }
table.runs td { overflow-wrap: anywhere; }
table.runs td.detail { white-space: nowrap; overflow: hidden; text-overflow: ellipsis;
  font-size: .9em; }
table.runs col.c-suite { width: 9%; } table.runs col.c-task { width: 13%; }
table.runs col.c-backend { width: 9%; } table.runs col.c-scenario { width: 14%; }
table.runs col.c-agent { width: 8%; }
table.runs col.c-term { width: 9%; } table.runs col.c-verdict { width: 8%; }
table.runs col.c-num { width: 5.5%; } table.runs col.c-tokens { width: 6.5%; }
table.runs col.c-detail { width: 12.5%; }
.toc { display: flex; gap: 1.2em; flex-wrap: wrap; }
"""

# The run list's script. It reads the embedded rows once, then renders one page of the
# rows that pass the filters with DOM calls (textContent: nothing is parsed as HTML).
INDEX_JS = r"""(function () {
"use strict";
var data = JSON.parse(document.getElementById("runs-data").textContent);
var C = {};
data.columns.forEach(function (c, i) { C[c] = i; });
var rows = data.rows;
var $ = function (id) { return document.getElementById(id); };
var f = {suite: $("f-suite"), task: $("f-task"), backend: $("f-backend"),
         scenario: $("f-scenario"), agent: $("f-agent"), verdict: $("f-verdict"),
         size: $("f-size")};
var body = $("runs-body"), count = $("runs-count"), where = $("runs-page");
var page = 1, matching = rows, key = null;
function state() {
  return {suite: f.suite.value, task: f.task.value.trim().toLowerCase(),
          backend: f.backend.value, scenario: f.scenario.value, agent: f.agent.value,
          verdict: f.verdict.value};
}
function filter(s) {
  var out = [];
  for (var i = 0; i < rows.length; i++) {
    var r = rows[i];
    if ((s.suite && r[C.suite] !== s.suite) || (s.backend && r[C.backend] !== s.backend) ||
        (s.scenario && r[C.scenario] !== s.scenario) ||
        (s.agent && r[C.agent] !== s.agent) ||
        (s.verdict && r[C.verdict] !== s.verdict) ||
        (s.task && r[C.task].toLowerCase().indexOf(s.task) < 0)) { continue; }
    out.push(r);
  }
  return out;
}
function cell(tr, text, cls) {
  var td = document.createElement("td");
  if (cls) { td.className = cls; }
  td.textContent = text;
  tr.appendChild(td);
  return td;
}
function render() {
  var s = state(), k = JSON.stringify(s);
  if (k !== key) { matching = filter(s); key = k; }
  var size = parseInt(f.size.value, 10), pages = Math.max(1, Math.ceil(matching.length / size));
  page = Math.min(Math.max(1, page), pages);
  var first = (page - 1) * size, last = Math.min(matching.length, first + size);
  var frag = document.createDocumentFragment();
  for (var i = first; i < last; i++) {
    var r = matching[i], tr = document.createElement("tr");
    cell(tr, r[C.suite]);
    cell(tr, r[C.task]);
    cell(tr, r[C.backend]);
    var td = document.createElement("td"), a = document.createElement("a");
    a.href = r[C.href];
    a.textContent = r[C.scenario];
    td.appendChild(a);
    if (r[C.trial]) { td.appendChild(document.createTextNode(" \u00b7 t" + r[C.trial])); }
    tr.appendChild(td);
    cell(tr, r[C.agent]);
    cell(tr, r[C.termination]);
    var v = document.createElement("td"), b = document.createElement("span");
    b.className = "badge " + (data.verdicts[r[C.verdict]] || "v-none");
    b.textContent = r[C.verdict];
    v.appendChild(b);
    tr.appendChild(v);
    cell(tr, r[C.steps], "num");
    cell(tr, r[C.calls], "num");
    cell(tr, r[C.tokens], "num");
    cell(tr, r[C.detail], "detail").title = r[C.detail];
    frag.appendChild(tr);
  }
  body.replaceChildren(frag);
  count.textContent = matching.length
    ? "runs " + (first + 1).toLocaleString("en") + "\u2013" + last.toLocaleString("en") +
      " of " + matching.length.toLocaleString("en") + " matching (" +
      rows.length.toLocaleString("en") + " in all)"
    : "no run matches (" + rows.length.toLocaleString("en") + " in all)";
  where.textContent = "page " + page + " of " + pages;
  $("p-first").disabled = $("p-prev").disabled = page <= 1;
  $("p-next").disabled = $("p-last").disabled = page >= pages;
  var parts = [];
  Object.keys(f).forEach(function (n) {
    var val = f[n].value;
    if (val && !(n === "size" && val === String(data.sizes[0]))) {
      parts.push(n + "=" + encodeURIComponent(val));
    }
  });
  if (page > 1) { parts.push("page=" + page); }
  var hash = parts.length ? "#" + parts.join("&") : "";
  if (location.hash !== hash) {
    history.replaceState(null, "", hash || location.pathname + location.search);
  }
  document.body.setAttribute("data-rendered", String(matching.length));
}
function fromHash() {
  var q = location.hash.replace(/^#/, "").split("&");
  Object.keys(f).forEach(function (n) { f[n].value = n === "size" ? String(data.sizes[0]) : ""; });
  page = 1;
  q.forEach(function (p) {
    var i = p.indexOf("="), n = p.slice(0, i), val = decodeURIComponent(p.slice(i + 1));
    if (n === "page") { page = parseInt(val, 10) || 1; }
    else if (f[n]) { f[n].value = val; }
  });
}
Object.keys(f).forEach(function (n) {
  f[n].addEventListener(n === "task" ? "input" : "change", function () { page = 1; render(); });
});
$("p-first").addEventListener("click", function () { page = 1; render(); });
$("p-prev").addEventListener("click", function () { page -= 1; render(); });
$("p-next").addEventListener("click", function () { page += 1; render(); });
$("p-last").addEventListener("click", function () { page = 1e9; render(); });
$("f-reset").addEventListener("click", function () {
  history.replaceState(null, "", location.pathname + location.search); fromHash(); render();
});
window.addEventListener("hashchange", function () { fromHash(); render(); });
$("runs-ui").hidden = false;
fromHash();
render();
})();
"""
