/// The page's style and script, built into the binary: no CDN, no framework, nothing to download but the page.
enum PageAssets {
    static let style = """
        body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222;background:#fafafa}
        h1{font-size:1.3em;margin:0 0 .6em}
        form{margin:0 0 1em}
        input[type=text]{width:18em;font:inherit;padding:.2em .4em}
        table{border-collapse:collapse;width:100%;background:#fff}
        th,td{text-align:left;padding:.3em .6em;border-bottom:1px solid #e4e4e4;vertical-align:top}
        th{background:#f0f0f0;font-weight:600}
        td.value{font-family:ui-monospace,monospace;word-break:break-all}
        td.num{text-align:right;font-variant-numeric:tabular-nums}
        tr.fresh td{background:#fff7d6;transition:background 1.5s}
        #tail{margin-top:1.5em}
        #tail pre{background:#fff;border:1px solid #e4e4e4;padding:.6em;max-height:24em;overflow:auto;margin:.4em 0}
        .status{color:#666;font-size:.9em}
        """

    /// Keeps the table live over SSE (`/<filter>/sse`): a row per topic, its latest value shortened, its number,
    /// time and unit, and its messages per second over the last ten seconds; a click on a topic tails it below.
    /// Values are set as text, never as HTML.
    static let script = """
        (function(){
          const filter = document.body.dataset.filter;
          const auth = new URLSearchParams(location.search).get('auth');
          const q = auth ? '&auth=' + encodeURIComponent(auth) : '';
          const rows = document.getElementById('topics');
          const status = document.getElementById('status');
          const seen = {};
          function short(text){ return text.length > 80 ? text.slice(0, 79) + '\\u2026' : text; }
          function cell(row, name){ return row.querySelector('td.' + name); }
          function rowFor(topic){
            let row = document.querySelector('tr[data-topic="' + CSS.escape(topic) + '"]');
            if (!row) {
              row = document.createElement('tr');
              row.dataset.topic = topic;
              for (const name of ['topic','value','seq','time','unit','rate']) {
                const td = document.createElement('td'); td.className = name;
                if (name === 'seq' || name === 'rate') td.classList.add('num');
                row.appendChild(td);
              }
              const link = document.createElement('a'); link.href = '#'; link.textContent = topic;
              link.addEventListener('click', e => { e.preventDefault(); tail(topic); });
              cell(row, 'topic').appendChild(link);
              rows.appendChild(row);
            }
            return row;
          }
          document.querySelectorAll('tr[data-topic] a').forEach(a => a.addEventListener('click', e => {
            e.preventDefault(); tail(a.closest('tr').dataset.topic);
          }));
          function show(m){
            const row = rowFor(m.topic);
            cell(row, 'value').textContent = short(m.encoding === 'base64' ? '(' + m.message.length + ' base64 characters)' : m.message);
            cell(row, 'seq').textContent = m.seq;
            cell(row, 'time').textContent = new Date(m.time_us / 1000).toISOString().replace('T', ' ').slice(0, 23);
            cell(row, 'unit').textContent = m.unit || '';
            const now = Date.now();
            const times = (seen[m.topic] = (seen[m.topic] || []).filter(t => now - t < 10000));
            times.push(now);
            cell(row, 'rate').textContent = (times.length / 10).toFixed(1);
            row.classList.remove('fresh'); void row.offsetWidth; row.classList.add('fresh');
          }
          const live = new EventSource('/' + encodeURIComponent(filter).replace(/%2C/g, ',') + '/sse?since=none' + q);
          live.onopen = () => { status.textContent = 'live'; };
          live.onerror = () => { status.textContent = 'reconnecting\\u2026'; };
          live.onmessage = e => show(JSON.parse(e.data));
          live.addEventListener('dropped', e => { const d = JSON.parse(e.data); status.textContent = d.count + ' messages dropped (this page fell behind)'; });
          let tailing = null;
          function tail(topic){
            if (tailing) tailing.close();
            const box = document.getElementById('tail');
            box.hidden = false;
            box.querySelector('h2').textContent = topic;
            const pre = box.querySelector('pre'); pre.textContent = '';
            tailing = new EventSource('/' + encodeURIComponent(topic) + '/sse?since=all' + q);
            tailing.onmessage = e => {
              const m = JSON.parse(e.data);
              pre.textContent += '#' + m.seq + '  ' + new Date(m.time_us / 1000).toISOString() + '  ' + (m.unit || '-') + '  ' + m.message + '\\n';
              pre.scrollTop = pre.scrollHeight;
            };
          }
        })();
        """
}
