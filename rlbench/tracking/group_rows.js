// rlbench/tracking/ui_app.py group_rows_script: the grouped runs table's group rows with the median
// of their finished runs (as the terminal, the note and the report give it) and their verdict; the
// cells of a headline metric a job could not measure shortened to a mark, the reason on hover.
// Given: GROUP, TAG, VERDICT, SHARE, RUN, AGG, SEARCH, DIGITS, UNMEASURED, MARK (ui_app.py).
var verdicts = {}, medians = {}, asked = null, queued = false;
var runRow = new RegExp('\\.' + RUN + '$'), aggregate = new RegExp('^\\((' + AGG.join('|') + '|median of \\d+)\\)$');
var VCOL = 'tags.`' + VERDICT + '`', MCOL = /^metrics\.`(.+)`$/;
var unmeasuredCols = UNMEASURED.map(function (m) { return 'tags.`' + m + '`'; });

function sweep() {  // [experiment id, parent run id] of a sweep's shared view, else null
  var h = location.hash, q = h.indexOf('?'), e = /^#\/experiments\/([^/?]+)\/runs/.exec(h);
  var key = q < 0 ? '' : new URLSearchParams(h.slice(q + 1)).get(SHARE) || '';
  var m = /^rlbench-([0-9a-f]{32})$/.exec(key);
  return e && m ? [e[1], m[1]] : null;
}

function median(xs) {  // as Python's statistics.median
  var s = xs.slice().sort(function (a, b) { return a - b; }), h = s.length >> 1;
  return s.length % 2 ? s[h] : (s[h - 1] + s[h]) / 2;
}

function ask(exp, parent, token, values) {  // each configuration's verdict (its runs' tag, by their
  // TAG) and, per metric, the median of its finished runs' values
  var body = {experiment_ids: [exp], filter: "tags.mlflow.parentRunId = '" + parent + "'", max_results: 1000};
  values = values || {};
  if (token) body.page_token = token;
  fetch(SEARCH, {method: 'POST', headers: {'Content-Type': 'application/json'}, body: JSON.stringify(body)})
    .then(function (r) { return r.json(); })
    .then(function (d) {
      (d.runs || []).forEach(function (run) {
        var t = {}, g;
        ((run.data || {}).tags || []).forEach(function (x) { t[x.key] = x.value; });
        g = t[TAG];
        if (g === undefined) return;
        if (t[VERDICT]) verdicts[g] = t[VERDICT];
        if ((run.info || {}).status !== 'FINISHED') return;
        ((run.data || {}).metrics || []).forEach(function (m) {
          var by = values[g] = values[g] || {};
          (by[m.key] = by[m.key] || []).push(m.value);
        });
      });
      if (d.next_page_token) { ask(exp, parent, d.next_page_token, values); return; }
      Object.keys(values).forEach(function (g) {
        medians[g] = {};
        Object.keys(values[g]).forEach(function (k) { medians[g][k] = [logged(median(values[g][k])), values[g][k].length]; });
      });
      schedule();
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

function round(cell, m) {  // an aggregate cell (`<value> <span>(average)</span>`): with the median `m`
  // ([value, n]) known, `<median> (median of n)`, else the average to 6 significant digits
  var value = cell.querySelector('.ag-cell-value');
  var label = value && [].find.call(value.querySelectorAll('span'), function (e) { return aggregate.test(e.textContent.trim()); });
  var text = label ? label.parentNode.firstChild : null;
  if (!text || text.nodeType !== 3) return;
  var want = m ? text.nodeValue.replace(/^(\s*)\S+/, '$1' + String(m[0])) : rounded(text.nodeValue);
  if (want !== text.nodeValue) text.nodeValue = want;
  var said = m ? '(median of ' + m[1] + ')' : null;
  if (said && label.textContent.trim() !== said) label.textContent = said;
}

function mark(cell) {  // a headline metric's `not measured: <reasons>` tag: `not measured`, the reasons on hover
  var value = cell.querySelector('.ag-cell-value') || cell, walk = document.createTreeWalker(value, NodeFilter.SHOW_TEXT), t;
  while ((t = walk.nextNode())) {
    if (t.nodeValue.indexOf(MARK + ': ') !== 0) continue;
    cell.title = t.nodeValue;
    t.nodeValue = MARK + ' (hover: why)';
  }
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
  if (s && grouped && s.join() !== asked) { asked = s.join(); verdicts = {}; medians = {}; ask(s[0], s[1]); }
  document.querySelectorAll('[data-rlbench-verdict]').forEach(function (el) {  // a cell that left a group row
    var cell = el.closest('[role=gridcell]'), g = groupId(el.closest('[role=row]'));
    if (g === null || !cell || cell.getAttribute('col-id') !== VCOL || verdicts[g] !== el.textContent) el.remove();
  });
  document.querySelectorAll('[role=row][row-id]').forEach(function (row) {
    var id = row.getAttribute('row-id'), g = groupId(row);
    var run = runRow.test(id) || /^[0-9a-f]{32}$/.test(id);  // a run's row: only group rows aggregate
    row.querySelectorAll('[role=gridcell]').forEach(function (cell) {
      var col = cell.getAttribute('col-id') || '', metric = MCOL.exec(col);
      if (unmeasuredCols.indexOf(col) >= 0) mark(cell);
      else if (run) return;
      else if (metric) round(cell, s && g !== null && medians[g] ? medians[g][metric[1]] : null);
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
