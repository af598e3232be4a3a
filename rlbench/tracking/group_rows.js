// rlbench/tracking/ui_app.py group_rows_script: the grouped runs table's group rows, rounded and
// with their verdict. Given: GROUP, TAG, VERDICT, SHARE, RUN, AGG, SEARCH, DIGITS (ui_app.py).
var verdicts = {}, asked = null, queued = false;
var runRow = new RegExp('\\.' + RUN + '$'), aggregate = new RegExp('^\\((' + AGG.join('|') + ')\\)$');
var VCOL = 'tags.`' + VERDICT + '`';

function sweep() {  // [experiment id, parent run id] of a sweep's shared view, else null
  var h = location.hash, q = h.indexOf('?'), e = /^#\/experiments\/([^/?]+)\/runs/.exec(h);
  var key = q < 0 ? '' : new URLSearchParams(h.slice(q + 1)).get(SHARE) || '';
  var m = /^rlbench-([0-9a-f]{32})$/.exec(key);
  return e && m ? [e[1], m[1]] : null;
}

function ask(exp, parent, token) {  // each configuration's verdict: its runs' tag, by their TAG
  var body = {experiment_ids: [exp], filter: "tags.mlflow.parentRunId = '" + parent + "'", max_results: 1000};
  if (token) body.page_token = token;
  fetch(SEARCH, {method: 'POST', headers: {'Content-Type': 'application/json'}, body: JSON.stringify(body)})
    .then(function (r) { return r.json(); })
    .then(function (d) {
      (d.runs || []).forEach(function (run) {
        var t = {};
        ((run.data || {}).tags || []).forEach(function (x) { t[x.key] = x.value; });
        if (t[TAG] !== undefined && t[VERDICT]) verdicts[t[TAG]] = t[VERDICT];
      });
      if (d.next_page_token) ask(exp, parent, d.next_page_token); else schedule();
    }).catch(function () {});
}

function logged(x) {  // x as rlbench logs a value (tracking/record.py rounded): integers exact, others
  // to DIGITS significant digits, a tie to the even digit as Python's format (toPrecision: up)
  if (!isFinite(x) || Number.isInteger(x)) return x;
  var m = /^(-?)(\d)\.(\d+)e([-+]\d+)$/.exec(x.toExponential(19)), d = m[2] + m[3];
  if (d[DIGITS] === '5' && /^0*$/.test(d.slice(DIGITS + 1)) && Number(d[DIGITS - 1]) % 2 === 0)
    return Number(m[1] + d[0] + '.' + d.slice(1, DIGITS) + 'e' + m[4]);
  return Number(x.toPrecision(DIGITS));
}

function rounded(text) {  // `48.315799999999996 ` -> `48.3158 `
  return text.replace(/^(\s*)(-?\d[\d.]*(?:e[-+]?\d+)?)/i, function (all, lead, num) {
    var x = Number(num);
    return isFinite(x) ? lead + String(logged(x)) : all;
  });
}

function groupId(row) {  // the sweep's configuration where `row` is its group row, else null
  var id = row && row.getAttribute('row-id') || '';
  return id.indexOf(GROUP) === 0 && !runRow.test(id) ? id.slice(GROUP.length) : null;
}

function round(cell) {  // an aggregate cell (`<value> <span>(average)</span>`) to 6 significant digits
  var value = cell.querySelector('.ag-cell-value');
  var label = value && [].find.call(value.querySelectorAll('span'), function (e) { return aggregate.test(e.textContent.trim()); });
  var text = label ? label.parentNode.firstChild : null;
  if (text && text.nodeType === 3 && rounded(text.nodeValue) !== text.nodeValue) text.nodeValue = rounded(text.nodeValue);
}

function verdict(cell, g) {  // the group's verdict in its `verdict` cell, once
  var value = cell.querySelector('.ag-cell-value');
  if (!value || !verdicts[g] || value.querySelector('[data-rlbench-verdict]')) return;
  var v = document.createElement('span');
  v.setAttribute('data-rlbench-verdict', '');
  v.title = v.textContent = verdicts[g];
  value.appendChild(v);
}

function fix() {
  queued = false;
  var s = sweep(), grouped = document.querySelector('[role=row][row-id^="' + GROUP + '"]');
  if (s && grouped && s.join() !== asked) { asked = s.join(); verdicts = {}; ask(s[0], s[1]); }
  document.querySelectorAll('[data-rlbench-verdict]').forEach(function (el) {  // a cell that left a group row
    var cell = el.closest('[role=gridcell]'), g = groupId(el.closest('[role=row]'));
    if (g === null || !cell || cell.getAttribute('col-id') !== VCOL || verdicts[g] !== el.textContent) el.remove();
  });
  document.querySelectorAll('[role=row][row-id]').forEach(function (row) {
    var id = row.getAttribute('row-id'), g = groupId(row);
    if (runRow.test(id) || /^[0-9a-f]{32}$/.test(id)) return;  // a run's row: only group rows aggregate
    row.querySelectorAll('[role=gridcell]').forEach(function (cell) {
      var col = cell.getAttribute('col-id') || '';
      if (col.indexOf('metrics.') === 0) round(cell);
      else if (col === VCOL && g !== null && s) verdict(cell, g);
    });
  });
}

function schedule() { if (!queued) { queued = true; requestAnimationFrame(fix); } }

function watch() {
  new MutationObserver(schedule).observe(document.body, {childList: true, subtree: true, characterData: true});
  window.addEventListener('hashchange', schedule);
  schedule();
}

if (document.body) watch(); else document.addEventListener('DOMContentLoaded', watch);
