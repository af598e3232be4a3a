// rlbench/tracking/ui_app.py group_rows_script: the grouped runs table's group rows, rounded and
// with their verdict. Given: GROUP, TAG, VERDICT, SHARE, RUN, AGG, SEARCH (ui_app.py).
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

function rounded(text) {  // `48.315799999999996 ` -> `48.3158 ` (6 significant digits, as logged)
  return text.replace(/^(\s*)(-?\d[\d.]*(?:e[-+]?\d+)?)/i, function (all, lead, num) {
    var x = Number(num);
    return isFinite(x) ? lead + String(Number(x.toPrecision(6))) : all;
  });
}

function groupId(row) {  // the group's value where `row` is a group row, else null
  var id = row && row.getAttribute('row-id') || '';
  return id.indexOf(GROUP) === 0 && !runRow.test(id) ? id.slice(GROUP.length) : null;
}

function fix() {
  queued = false;
  var s = sweep();
  if (s && s.join() !== asked) { asked = s.join(); verdicts = {}; ask(s[0], s[1]); }
  document.querySelectorAll('[data-rlbench-verdict]').forEach(function (el) {  // a cell that left a group row
    var cell = el.closest('[role=gridcell]'), g = groupId(el.closest('[role=row]'));
    if (g === null || !cell || cell.getAttribute('col-id') !== VCOL || verdicts[g] !== el.textContent) el.remove();
  });
  document.querySelectorAll('[role=row][row-id^="' + GROUP + '"]').forEach(function (row) {
    var g = groupId(row);
    if (g === null) return;
    row.querySelectorAll('[role=gridcell]').forEach(function (cell) {
      var col = cell.getAttribute('col-id') || '', value = cell.querySelector('.ag-cell-value');
      if (!value) return;
      if (col === VCOL && s && verdicts[g] && !value.querySelector('[data-rlbench-verdict]')) {
        var v = document.createElement('span');
        v.setAttribute('data-rlbench-verdict', '');
        v.title = v.textContent = verdicts[g];
        value.appendChild(v);
      }
      var label = [].find.call(value.querySelectorAll('span'), function (e) { return aggregate.test(e.textContent.trim()); });
      var text = label ? label.parentNode.firstChild : null;
      if (text && text.nodeType === 3 && rounded(text.nodeValue) !== text.nodeValue) text.nodeValue = rounded(text.nodeValue);
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
