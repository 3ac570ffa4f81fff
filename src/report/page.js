// bir report: draws the run embedded in #bir-run.
// Every recorded string reaches the page through textContent (or a text
// node): nothing recorded is ever parsed as HTML. No request leaves the
// page (the Content-Security-Policy forbids it too).
(function () {
  'use strict';

  var doc = JSON.parse(document.getElementById('bir-run').textContent);
  var run = doc.run || {};
  var steps = doc.steps || [];
  var app = document.getElementById('app');
  var REDACTED = /\[REDACTED(?::[A-Za-z0-9_.-]+)?\]/g;
  var FOLD = 400;          // characters of a long string shown before "show all"
  var FOLD_ITEMS = 100;    // items of a long array or object shown before "show more"
  var RELOAD_MS = 2000;    // a live page reloads this often
  var STALE_MS = 20000;    // a live page older than this was left by a stopped follower

  // ---- small DOM helpers: text only --------------------------------------
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function add(parent) {
    for (var i = 1; i < arguments.length; i++) {
      var c = arguments[i];
      if (c === null || c === undefined || c === false) continue;
      parent.appendChild(typeof c === 'string' ? document.createTextNode(c) : c);
    }
    return parent;
  }

  // ---- formatting --------------------------------------------------------
  function fmtMs(ms) {
    if (ms === null || ms === undefined || isNaN(ms)) return '';
    if (ms === 0) return '0 ms';
    if (ms < 1) return ms.toFixed(2) + ' ms';
    if (ms < 1000) return (ms < 10 ? ms.toFixed(1) : Math.round(ms)) + ' ms';
    var s = ms / 1000;
    if (s < 60) return s.toFixed(s < 10 ? 2 : 1) + ' s';
    var m = Math.floor(s / 60);
    if (m < 60) return m + ' min ' + Math.round(s - m * 60) + ' s';
    return Math.floor(m / 60) + ' h ' + (m % 60) + ' min';
  }
  function fmtTime(at) {
    if (!at) return '';
    var t = String(at).replace('T', ' ');
    return t.replace(/\.(\d{3})\d*Z$/, '.$1 UTC').replace(/Z$/, ' UTC');
  }
  function clock(at) {
    var m = /T(\d\d:\d\d:\d\d(?:\.\d{1,3})?)/.exec(String(at || ''));
    return m ? m[1] : String(at || '');
  }
  function plural(n, word) { return n + ' ' + word + (n === 1 ? '' : 's'); }
  function num(n) { return Number(n).toLocaleString('en-US'); }

  // Text with redaction markers highlighted so a reader sees what was removed.
  function markedText(s) {
    var frag = document.createDocumentFragment();
    var str = String(s);
    var last = 0;
    REDACTED.lastIndex = 0;
    var m;
    while ((m = REDACTED.exec(str)) !== null) {
      if (m.index > last) frag.appendChild(document.createTextNode(str.slice(last, m.index)));
      var mark = el('mark', 'redacted', m[0]);
      mark.title = 'bir removed a secret here before storing the run';
      frag.appendChild(mark);
      last = m.index + m[0].length;
    }
    if (last < str.length) frag.appendChild(document.createTextNode(str.slice(last)));
    return frag;
  }

  // A long string: its start and a button that shows the rest.
  function foldedText(s, into) {
    var str = String(s);
    if (str.length <= FOLD) { into.appendChild(markedText(str)); return; }
    var head = el('span');
    head.appendChild(markedText(str.slice(0, FOLD)));
    var more = el('button', 'more', '… show all ' + num(str.length) + ' characters');
    more.type = 'button';
    more.addEventListener('click', function (ev) {
      ev.stopPropagation();
      head.textContent = '';
      head.appendChild(markedText(str));
      more.remove();
    });
    add(into, head, more);
  }

  // ---- recorded markers: binary stubs and truncated payloads --------------
  function isBinaryStub(v) {
    return v && typeof v === 'object' && !Array.isArray(v) && v.omitted === 'binary';
  }
  function isTruncated(v) {
    return v && typeof v === 'object' && !Array.isArray(v) && v.truncated === true && 'originalBytes' in v;
  }
  function binaryMarker(v, mime) {
    var text = 'binary' + (mime ? ' ' + mime : '') + ' not kept · ' + num(v.base64Bytes || 0) +
      ' bytes of base64' + (v.sha256 ? ' · sha256 ' + String(v.sha256).slice(0, 16) + '…' : '');
    var m = el('span', 'marker', text);
    if (v.sha256) m.title = 'sha256 ' + v.sha256;
    return m;
  }
  function truncatedBox(v) {
    var box = el('div', 'block');
    add(box, el('span', 'marker', 'truncated: the payload was ' + num(v.originalBytes) +
      ' bytes; bir kept only the start shown below'));
    if (typeof v.preview === 'string' && v.preview) {
      var pre = el('pre', 'plain');
      foldedText(v.preview, pre);
      add(box, pre);
    }
    return box;
  }

  // ---- pretty JSON, drawn as text -----------------------------------------
  function jsonView(value) {
    var pre = el('pre', 'json');
    writeJson(pre, value, 0);
    return pre;
  }
  function writeJson(into, v, depth) {
    var pad = '  '.repeat(depth);
    if (v === null || typeof v === 'boolean') { add(into, el('span', 'j-lit', String(v))); return; }
    if (typeof v === 'number') { add(into, el('span', 'j-num', String(v))); return; }
    if (typeof v === 'string') {
      var s = el('span', 'j-str');
      add(s, '"');
      foldedText(v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n'), s);
      add(s, '"');
      add(into, s);
      return;
    }
    if (depth > 120) { add(into, el('span', 'marker', '… nested too deep to draw')); return; }
    if (isBinaryStub(v)) { add(into, binaryMarker(v)); return; }
    if (isTruncated(v)) { add(into, truncatedBox(v)); return; }
    var isArray = Array.isArray(v);
    var keys = isArray ? null : Object.keys(v);
    var count = isArray ? v.length : keys.length;
    if (count === 0) { add(into, isArray ? '[]' : '{}'); return; }
    add(into, isArray ? '[\n' : '{\n');
    var shown = Math.min(count, FOLD_ITEMS);
    function item(i) {
      var span = el('span');
      add(span, pad + '  ');
      if (!isArray) { add(span, el('span', 'j-key', JSON.stringify(keys[i]))); add(span, ': '); }
      writeJson(span, isArray ? v[i] : v[keys[i]], depth + 1);
      add(span, i < count - 1 ? ',\n' : '\n');
      return span;
    }
    for (var i = 0; i < shown; i++) add(into, item(i));
    if (count > shown) {
      var more = el('button', 'more', pad + '  … show ' + num(count - shown) + ' more');
      more.type = 'button';
      var holder = el('span');
      add(holder, more, '\n');
      more.addEventListener('click', function (ev) {
        ev.stopPropagation();
        var frag = document.createDocumentFragment();
        for (var j = shown; j < count; j++) frag.appendChild(item(j));
        holder.replaceWith(frag);
      });
      add(into, holder);
    }
    add(into, pad + (isArray ? ']' : '}'));
  }

  // ---- a tool result: MCP content blocks as a reader expects them ---------
  var SAFE_IMAGE = /^image\/(png|jpeg|gif|webp)$/;
  function resultView(r) {
    if (isTruncated(r)) return truncatedBox(r);
    var box = el('div');
    var blocks = r && typeof r === 'object' && Array.isArray(r.content) ? r.content : null;
    if (!blocks) { add(box, typeof r === 'string' ? textBlock(r) : jsonView(r)); return box; }
    blocks.forEach(function (b) { add(box, contentBlock(b)); });
    var rest = {};
    Object.keys(r).forEach(function (k) { if (k !== 'content') rest[k] = r[k]; });
    if (Object.keys(rest).length) { add(box, el('div', 'section', 'other fields')); add(box, jsonView(rest)); }
    return box;
  }
  function textBlock(s) {
    var pre = el('pre', 'plain');
    foldedText(s, pre);
    return pre;
  }
  function contentBlock(b) {
    var div = el('div', 'block');
    var type = b && typeof b === 'object' ? String(b.type || '?') : typeof b;
    add(div, el('div', 'kind', type + (b && b.mimeType ? ' · ' + b.mimeType : '')));
    if (type === 'text' && typeof b.text === 'string') { add(div, textBlock(b.text)); return div; }
    if ((type === 'image' || type === 'audio') && b) {
      if (isBinaryStub(b.data)) { add(div, binaryMarker(b.data, b.mimeType)); return div; }
      if (type === 'image' && typeof b.data === 'string' && SAFE_IMAGE.test(String(b.mimeType)) &&
          /^[A-Za-z0-9+/=]+$/.test(b.data)) {
        var img = el('img');
        img.alt = 'image the tool returned (' + b.mimeType + ')';
        img.src = 'data:' + b.mimeType + ';base64,' + b.data;
        add(div, img);
        return div;
      }
    }
    add(div, jsonView(b));
    return div;
  }

  // ---- header -------------------------------------------------------------
  function fact(dl, label, value, mono) {
    if (value === undefined || value === null || value === '') return;
    var d = el('div');
    add(d, el('dt', null, label));
    var dd = el('dd', mono ? 'mono' : null);
    if (value instanceof Node) dd.appendChild(value); else dd.textContent = String(value);
    add(d, dd);
    dl.appendChild(d);
  }
  // Tokens as the host reported them: all input (cached parts named), output,
  // the models, and the cost where the user set prices.
  function tokensText(u, models, cost) {
    if (!u) return null;
    var cached = [];
    if (u.cacheRead) cached.push(u.cacheRead + ' cache reads');
    if (u.cacheWrite) cached.push(u.cacheWrite + ' cache writes');
    var text = u.input + ' in' + (cached.length ? ' (' + cached.join(', ') + ')' : '') + ' · ' + u.output + ' out';
    if (models && models.length) text += ' · ' + models.join(', ');
    if (typeof cost === 'number') text += ' · $' + cost.toFixed(4);
    return text;
  }
  function header() {
    var top = el('header', 'panel');
    add(top, el('div', 'brand', 'bir · run report'));
    add(top, el('h1', null, run.id || 'run'));
    var badges = el('div', 'badges');
    if (run.tier) add(badges, el('span', 'badge', run.tier === 'bound' ? 'bound session (Tier 1)' : run.tier === 'standalone' ? 'standalone proxy run (Tier 2)' : run.tier));
    add(badges, el('span', 'badge ' + (run.state || ''), run.state === 'open' ? 'still running' : run.state));
    if (run.errors > 0) add(badges, el('span', 'badge errors', plural(run.errors, 'error')));
    if (run.lossy) add(badges, el('span', 'badge lossy', 'lossy'));
    add(top, badges);
    var dl = el('dl', 'facts');
    fact(dl, 'Host', [run.host, run.hostVersion].filter(Boolean).join(' '));
    fact(dl, 'Model', run.model);
    fact(dl, 'Started', fmtTime(run.startedAt));
    fact(dl, 'Ended', run.finishedAt ? fmtTime(run.finishedAt) + (run.reason ? ' (' + run.reason.replace(/_/g, ' ') + ')' : '') : null);
    fact(dl, 'Duration', run.durationMs !== undefined ? fmtMs(run.durationMs) : null);
    fact(dl, 'Tool calls', String(run.calls || 0));
    fact(dl, 'Errors', String(run.errors || 0));
    fact(dl, 'Time in tools', run.toolMs !== undefined ? fmtMs(run.toolMs) : null);
    fact(dl, 'Tokens', tokensText(run.tokens, null, run.costUsd));
    fact(dl, 'MCP protocol', run.protocol);
    fact(dl, 'Working directory', run.cwd, true);
    fact(dl, 'Session', run.sessionId, true);
    fact(dl, 'Recorded by', run.recordedBy ? 'bir ' + run.recordedBy : null);
    add(top, dl);
    var servers = doc.servers || [];
    if (servers.length) {
      add(top, el('div', 'section', servers.length === 1 ? 'Server' : 'Servers'));
      var ul = el('ul', 'servers');
      servers.forEach(function (s) {
        var li = el('li');
        add(li, el('strong', null, s.name));
        var about = [s.title, s.version].filter(Boolean).join(' ');
        if (about) add(li, ' — ' + about);
        if (s.tools !== undefined) add(li, ' · ' + plural(s.tools, 'tool'));
        if (s.toolsDigest) {
          var d = el('span', 'digest', ' · tool set ' + String(s.toolsDigest).slice(0, 12));
          d.title = 'sha256 of the server\'s tool definitions: ' + s.toolsDigest + ' (a changed tool set gets a new digest)';
          add(li, d);
        }
        add(ul, li);
      });
      add(top, ul);
    }
    app.appendChild(top);
    if (run.lossy) {
      var w = el('div', 'warn');
      add(w, el('strong', null, 'This run is lossy: it may not hold everything that happened.'));
      (run.lossyWhy || []).forEach(function (why) { add(w, el('p', null, why)); });
      app.appendChild(w);
    }
    if (run.state === 'interrupted') {
      app.appendChild(add(el('div', 'warn'), el('strong', null, 'Interrupted: '),
        'the recorder ended without finishing this run (it was killed, or the machine stopped). What was recorded up to then is shown.'));
    }
  }

  // ---- prompts and answers (bound runs) -------------------------------------
  function conversation() {
    var turns = doc.turns || [];
    var answers = doc.answers || [];
    if (!turns.length && !answers.length && !run.prompt) return;
    var sec = el('section', 'panel');
    add(sec, el('h2', null, 'Conversation'));
    if (!turns.length && run.prompt) turns = [{ turn: 1, prompt: run.prompt }];
    var shown = {};
    turns.forEach(function (t) {
      var div = el('div', 'turn');
      add(div, el('div', 'who', 'Turn ' + t.turn + (t.at ? ' · ' + clock(t.at) : '') +
        (t.origin ? ' · from the host (' + t.origin + ')' : ' · prompt')));
      // A prompt from the host (a background agent's <task-notification>)
      // is XML; its summary says what happened.
      var summary = t.origin ? /<summary>([\s\S]*?)<\/summary>/.exec(String(t.prompt)) : null;
      if (summary) add(div, el('div', 'text', summary[1]));
      var p = el('div', summary ? 'text digest' : 'text');
      foldedText(t.prompt, p);
      add(sec, add(div, p));
      var tokens = tokensText(t.tokens, t.models, t.costUsd);
      if (tokens) add(div, el('div', 'who tokens', 'tokens ' + tokens));
      answers.forEach(function (a, i) {
        if (a.turn === t.turn && !shown[i]) { shown[i] = true; add(sec, answerView(a)); }
      });
    });
    answers.forEach(function (a, i) { if (!shown[i]) add(sec, answerView(a)); });
    app.appendChild(sec);
  }
  function answerView(a) {
    var div = el('div', 'turn answer');
    add(div, el('div', 'who', 'Final answer' + (a.turn ? ' · turn ' + a.turn : '') + (a.at ? ' · ' + clock(a.at) : '')));
    if (typeof a.text === 'string') { var p = el('div', 'text'); foldedText(a.text, p); add(div, p); }
    else if (a.text !== null && a.text !== undefined) add(div, jsonView(a.text));
    return div;
  }

  // ---- the timeline ------------------------------------------------------------
  var span = Math.max(doc.span || 0, 1);
  function pct(ms) { return Math.max(0, Math.min(100, (ms / span) * 100)); }
  function kindLabel(k) { return { builtin: 'built-in', mcp: 'MCP', agent: 'subagent', tool: 'tool' }[k] || k; }
  var live = !!run.live && (Date.now() - Date.parse(doc.generatedAt) < STALE_MS);
  function statusOf(s) {
    if (s.status === 'unanswered' && live) return 'running';
    return s.status;
  }
  function isProblem(s) {
    var st = statusOf(s);
    return s.isError || (st !== 'ok' && st !== 'running');
  }

  var rows = [];  // {step, node, row, detail, hay}
  var state = { query: '', server: '', tool: '', errors: false, open: {}, sel: -1 };

  function ticks(track) {
    var target = span / 6;
    var pow = Math.pow(10, Math.floor(Math.log10(target)));
    var stepMs = [1, 2, 5, 10].map(function (m) { return m * pow; }).find(function (x) { return x >= target; }) || pow * 10;
    for (var t = 0; t <= span + 1e-9; t += stepMs) {
      // The last label would run past the axis: a line without it.
      var tk = el('span', 'tick', pct(t) > 94 ? '' : t === 0 ? '0' : fmtMs(t));
      tk.style.left = pct(t) + '%';
      track.appendChild(tk);
    }
  }

  function timeline() {
    var sec = el('section', 'panel');
    add(sec, el('h2', null, 'Steps'));
    if (steps.length) {
      add(sec, el('p', 'hint', 'One row per tool call, numbered as bir runs show numbers them. Each bar shows when the call ran on the run\'s time axis; bars side by side in time ran at once. Click a row to see its arguments and result.'));
    }
    if (!steps.length) {
      add(sec, el('p', 'empty', run.state === 'open'
        ? 'No tool call yet: this run has not made one so far.'
        : 'No tool calls were recorded in this run.'));
      app.appendChild(sec);
      return;
    }
    var bar = el('div', 'toolbar');
    var search = el('input');
    search.type = 'search';
    search.id = 'search';
    search.placeholder = 'Search tool names, arguments, results…  ( / )';
    search.setAttribute('aria-label', 'Search the steps');
    var servers = {}, tools = {};
    steps.forEach(function (s) {
      servers[s.server || (s.kind === 'builtin' ? '(built-in)' : s.kind === 'agent' ? '(subagent)' : '(other)')] = true;
      tools[s.name] = true;
    });
    var serverSel = select('server', 'All servers', Object.keys(servers).sort());
    var toolSel = select('tool', 'All tools', Object.keys(tools).sort());
    var errLabel = el('label');
    var errBox = el('input');
    errBox.type = 'checkbox';
    errBox.id = 'errors-only';
    add(errLabel, errBox, ' errors only');
    var expand = el('button', null, 'Expand all');
    expand.type = 'button';
    var collapse = el('button', null, 'Collapse all');
    collapse.type = 'button';
    var count = el('span', 'count');
    count.id = 'count';
    add(bar, search, serverSel, toolSel, errLabel, expand, collapse, count);
    add(sec, bar);
    var legend = el('div', 'legend');
    [['builtin', 'built-in tool'], ['mcp', 'MCP tool'], ['agent', 'subagent'], ['error', 'error']].forEach(function (k) {
      var item = el('span');
      add(item, el('span', 'sw k-' + k[0]), k[1]);
      add(legend, item);
    });
    var hint = el('span', 'hint');
    add(hint, el('kbd', null, 'j'), ' ', el('kbd', null, 'k'), ' move · ', el('kbd', null, 'Enter'), ' open · ',
      el('kbd', null, '/'), ' search · ', el('kbd', null, 'Esc'), ' clear');
    add(legend, hint);
    add(sec, legend);

    var grid = el('div', 'grid');
    grid.id = 'steps';
    var axis = el('div', 'axis');
    var axisTrack = el('div', 'track');
    ticks(axisTrack);
    add(axis, el('span', 'num', '#'), el('span', null, 'Tool'), axisTrack, el('span', 'tail', 'duration · status'));
    add(grid, axis);

    var events = (doc.events || []).slice().sort(function (a, b) { return (a.ms || 0) - (b.ms || 0); });
    var ei = 0;
    steps.forEach(function (s, i) {
      while (ei < events.length && (events[ei].ms || 0) < s.ms) add(grid, eventRow(events[ei++]));
      var r = stepRow(s, i);
      rows.push(r);
      add(grid, r.node);
    });
    while (ei < events.length) add(grid, eventRow(events[ei++]));
    add(sec, grid);
    app.appendChild(sec);

    search.addEventListener('input', function () { state.query = search.value; applyFilters(); });
    serverSel.addEventListener('change', function () { state.server = serverSel.value; applyFilters(); });
    toolSel.addEventListener('change', function () { state.tool = toolSel.value; applyFilters(); });
    errBox.addEventListener('change', function () { state.errors = errBox.checked; applyFilters(); });
    expand.addEventListener('click', function () { rows.forEach(function (r) { if (!r.node.classList.contains('hidden')) setOpen(r, true); }); });
    collapse.addEventListener('click', function () { rows.forEach(function (r) { setOpen(r, false); }); });
    applyFilters();
  }

  function select(id, all, values) {
    var s = el('select');
    s.id = id;
    s.setAttribute('aria-label', all);
    add(s, el('option', null, all));
    s.firstChild.value = '';
    values.forEach(function (v) { var o = el('option', null, v); o.value = v; add(s, o); });
    return s;
  }

  function stepRow(s, i) {
    var node = el('div', 'step');
    node.id = 'step-' + s.label;
    node.tabIndex = -1;
    node.dataset.label = s.label;
    node.dataset.kind = s.kind;
    node.dataset.status = statusOf(s);
    var row = el('div', 'row');
    row.setAttribute('role', 'button');
    row.setAttribute('aria-expanded', 'false');
    var name = el('span', 'name');
    var label = el('span', s.depth > 0 ? 'nest' : null);
    if (s.depth > 0) label.style.marginLeft = (s.depth - 1) * 16 + 4 + 'px';
    add(label, el('span', 'caret', '▸'), s.name);
    if (s.kind === 'agent') add(label, el('span', 'digest', s.args && s.args.subagent_type ? ' · ' + s.args.subagent_type : ' · subagent'));
    name.title = s.name + ' (' + kindLabel(s.kind) + ')';
    add(name, label);
    var track = el('span', 'track');
    var b = el('span', 'bar k-' + (isProblem(s) ? 'error' : s.kind) + (statusOf(s) === 'running' ? ' running' : ''));
    var end = statusOf(s) === 'running' ? span : s.endMs;
    b.style.left = pct(s.ms) + '%';
    b.style.width = Math.max(pct(end) - pct(s.ms), 0) + '%';
    b.title = s.name + ': starts at +' + fmtMs(s.ms) + (s.durationMs !== null ? ', takes ' + fmtMs(s.durationMs) : '');
    add(track, b);
    var tail = el('span', 'tail');
    var st = statusOf(s);
    add(tail, el('span', 'dur', s.durationMs !== null && s.durationMs !== undefined ? fmtMs(s.durationMs) : ''),
      el('span', 'status ' + (st === 'ok' ? 'ok' : isProblem(s) ? 'bad' : 'other'), st.replace(/_/g, ' ')));
    add(row, el('span', 'num', s.label), name, track, tail);
    var detail = el('div', 'detail hidden');
    add(node, row, detail);
    var r = { step: s, node: node, row: row, detail: detail, built: false, hay: null, index: i };
    row.addEventListener('click', function () { select_(r); toggle(r); });
    return r;
  }

  function eventRow(e) {
    var div = el('div', 'event');
    var track = el('span', 'track');
    var dot = el('span', 'dot');
    dot.style.left = pct(e.ms || 0) + '%';
    add(track, dot);
    var what = e.name + (e.data && e.data.agent_type ? ' · ' + e.data.agent_type : '');
    add(div, el('span'), el('span', 'name', '· ' + what + (e.at ? ' at ' + clock(e.at) : '')), track, el('span'));
    return div;
  }

  function metaItem(meta, text) { add(meta, el('span', null, text)); }
  function buildDetail(r) {
    var s = r.step, d = r.detail;
    var meta = el('div', 'meta');
    var link = el('a', null, '#step-' + s.label);
    link.href = '#step-' + s.label;
    link.title = 'link to this step';
    add(meta, link);
    metaItem(meta, 'started ' + clock(s.at) + ' (+' + fmtMs(s.ms) + ')');
    if (s.durationMs !== null && s.durationMs !== undefined) metaItem(meta, 'took ' + fmtMs(s.durationMs));
    metaItem(meta, kindLabel(s.kind) + (s.server ? ' · server ' + s.server : '') + (s.tool && s.tool !== s.name ? ' · tool ' + s.tool : ''));
    if (s.outcome) metaItem(meta, 'outcome ' + String(s.outcome).replace(/_/g, ' '));
    metaItem(meta, 'isError ' + (s.isError ? 'true' : 'false'));
    if (s.turn) metaItem(meta, 'turn ' + s.turn);
    if (s.parent) metaItem(meta, 'inside step ' + s.parent + (s.agentType ? ' (' + s.agentType + ')' : ''));
    if (s.requestId !== null && s.requestId !== undefined) metaItem(meta, 'request id ' + JSON.stringify(s.requestId));
    if (s.toolUseId) metaItem(meta, 'tool use ' + s.toolUseId);
    add(d, meta);
    if (s.context) {
      add(d, el('div', 'section', 'What the model said before this call'));
      var c = el('div', 'text context');
      foldedText(s.context, c);
      add(d, c);
    }
    add(d, el('div', 'section', 'Arguments'));
    add(d, s.args === null || s.args === undefined ? el('div', 'empty', 'none recorded') : jsonView(s.args));
    if (s.result !== null && s.result !== undefined) {
      add(d, el('div', 'section', s.isError ? 'Result (the tool reported an error: isError)' : 'Result'));
      add(d, resultView(s.result));
    }
    if (s.error !== null && s.error !== undefined) {
      add(d, el('div', 'section', 'Error'));
      var eb = el('div', 'errbox');
      add(eb, typeof s.error === 'string' ? textBlock(s.error) : jsonView(s.error));
      add(d, eb);
    }
    if (s.result === null && s.error === null && statusOf(s) === 'running') add(d, el('div', 'note', 'Still running: no answer yet.'));
    if (s.status === 'unanswered' && statusOf(s) !== 'running') add(d, el('div', 'note', 'No answer was recorded for this call.'));
    if (s.redactions > 0) add(d, el('div', 'note', plural(s.redactions, 'secret') + ' replaced by [REDACTED:…] markers before the run was stored.'));
    if (s.withheld) add(d, el('div', 'note', 'Payloads withheld (' + s.withheld + '): bir could not store them safely.'));
    if (s.repaired) add(d, el('div', 'note', 'Repaired on recording (' + s.repaired + '): characters JSON cannot hold were replaced with U+FFFD.'));
    if (s.correlation === 'ambiguous') add(d, el('div', 'note', 'Another call with the same request id was in flight: this answer was paired in arrival order.'));
    if (s.permission !== null && s.permission !== undefined) { add(d, el('div', 'section', 'Permission')); add(d, jsonView(s.permission)); }
    if (s.argsDigest) add(d, el('div', 'digest', 'arguments sha256 ' + s.argsDigest));
  }

  function setOpen(r, open) {
    if (open && !r.built) { buildDetail(r); r.built = true; }
    r.detail.classList.toggle('hidden', !open);
    r.node.classList.toggle('open', open);
    r.row.setAttribute('aria-expanded', open ? 'true' : 'false');
    if (open) state.open[r.step.label] = true; else delete state.open[r.step.label];
  }
  function toggle(r) {
    var open = !r.node.classList.contains('open');
    setOpen(r, open);
    if (open) setHash('#step-' + r.step.label);
  }
  function setHash(h) {
    try { history.replaceState(null, '', h); } catch (e) { /* file:// may refuse; the anchor still works */ }
  }
  function select_(r) {
    rows.forEach(function (x) { x.node.classList.remove('sel'); });
    r.node.classList.add('sel');
    state.sel = r.index;
  }

  function haystack(s) {
    var parts = [s.name, s.qualified, s.server, s.tool, s.status, s.context, s.agentType];
    [s.args, s.result, s.error].forEach(function (v) { if (v !== null && v !== undefined) parts.push(JSON.stringify(v)); });
    return parts.filter(Boolean).join('\n').toLowerCase();
  }
  function applyFilters() {
    var q = state.query.trim().toLowerCase();
    var shown = 0;
    rows.forEach(function (r) {
      var s = r.step;
      if (r.hay === null) r.hay = haystack(s);
      var serverName = s.server || (s.kind === 'builtin' ? '(built-in)' : s.kind === 'agent' ? '(subagent)' : '(other)');
      var ok = (!q || r.hay.indexOf(q) >= 0) &&
        (!state.server || serverName === state.server) &&
        (!state.tool || s.name === state.tool) &&
        (!state.errors || isProblem(s));
      r.node.classList.toggle('hidden', !ok);
      if (ok) shown++;
    });
    var count = document.getElementById('count');
    if (count) count.textContent = shown === rows.length ? plural(rows.length, 'step') : shown + ' of ' + plural(rows.length, 'step');
    document.querySelectorAll('.event').forEach(function (e) { e.classList.toggle('hidden', !!(q || state.server || state.tool || state.errors)); });
  }

  // ---- keyboard ---------------------------------------------------------------
  function visibleRows() { return rows.filter(function (r) { return !r.node.classList.contains('hidden'); }); }
  function move(delta) {
    var vis = visibleRows();
    if (!vis.length) return;
    var at = vis.findIndex(function (r) { return r.index === state.sel; });
    var next = vis[Math.max(0, Math.min(vis.length - 1, at < 0 ? 0 : at + delta))];
    select_(next);
    next.node.focus({ preventScroll: true });
    next.node.scrollIntoView({ block: 'nearest' });
  }
  document.addEventListener('keydown', function (ev) {
    var t = ev.target;
    var typing = t && (t.tagName === 'INPUT' || t.tagName === 'SELECT' || t.tagName === 'TEXTAREA');
    if (ev.key === 'Escape') {
      var search = document.getElementById('search');
      if (search && (search.value || typing)) { search.value = ''; state.query = ''; applyFilters(); search.blur(); }
      return;
    }
    if (typing || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    if (ev.key === '/') { var s = document.getElementById('search'); if (s) { ev.preventDefault(); s.focus(); } }
    else if (ev.key === 'j' || ev.key === 'ArrowDown') { ev.preventDefault(); move(1); }
    else if (ev.key === 'k' || ev.key === 'ArrowUp') { ev.preventDefault(); move(-1); }
    else if ((ev.key === 'Enter' || ev.key === ' ' || ev.key === 'o') && state.sel >= 0) { ev.preventDefault(); toggle(rows[state.sel]); }
  });

  // ---- permalinks: #step-12 --------------------------------------------------
  function openFromHash() {
    var m = /^#step-(\d+(?:\.\d+)*)$/.exec(location.hash);
    if (!m) return;
    var r = rows.find(function (x) { return x.step.label === m[1]; });
    if (!r) return;
    r.node.classList.remove('hidden');
    setOpen(r, true);
    select_(r);
    r.node.scrollIntoView({ block: 'start' });
  }
  window.addEventListener('hashchange', openFromHash);

  // ---- live runs: reload while the follower rewrites the file -----------------
  var KEY = 'bir-report:' + run.id;
  function saveState() {
    try {
      sessionStorage.setItem(KEY, JSON.stringify({ y: window.scrollY, open: Object.keys(state.open),
        query: state.query, server: state.server, tool: state.tool, errors: state.errors }));
    } catch (e) { /* storage may be off for file:// pages */ }
  }
  function restoreState() {
    var saved = null;
    try { saved = JSON.parse(sessionStorage.getItem(KEY) || 'null'); } catch (e) { saved = null; }
    if (!saved) return;
    var set = function (id, v, prop) { var x = document.getElementById(id); if (x) x[prop] = v; };
    state.query = saved.query || ''; set('search', state.query, 'value');
    state.server = saved.server || ''; set('server', state.server, 'value');
    state.tool = saved.tool || ''; set('tool', state.tool, 'value');
    state.errors = !!saved.errors; set('errors-only', state.errors, 'checked');
    applyFilters();
    (saved.open || []).forEach(function (l) { var r = rows.find(function (x) { return x.step.label === l; }); if (r) setOpen(r, true); });
    window.scrollTo(0, saved.y || 0);
  }

  // ---- the page -----------------------------------------------------------------
  header();
  if (run.live) {
    var lb = el('div', 'livebar');
    lb.id = 'live';
    lb.textContent = live
      ? 'Live: bir report --follow rewrites this page as steps arrive; it reloads every ' + RELOAD_MS / 1000 + ' s until the run ends (written ' + clock(doc.generatedAt) + ').'
      : 'This page was being followed, but its follower stopped (last written ' + fmtTime(doc.generatedAt) + '): run bir report --follow again to see the run go on.';
    app.appendChild(lb);
  }
  conversation();
  timeline();
  var foot = el('footer', 'foot', 'Written by bir ' + (doc.birVersion || '') + ' at ' + fmtTime(doc.generatedAt) +
    '. This file is self-contained: it loads nothing and sends nothing. Recorded secrets were replaced before the run was stored.');
  app.appendChild(foot);
  if (run.live) restoreState();
  openFromHash();
  if (live) {
    setTimeout(function () { saveState(); location.reload(); }, RELOAD_MS);
  } else {
    try { sessionStorage.removeItem(KEY); } catch (e) { /* nothing to forget */ }
  }
})();
