// Draws the charts described in #report-data with uPlot; the tables are already HTML.
// When done, the page marks itself on <body>: data-report-status ("ok" or "error"),
// data-charts (charts drawn), data-blank (charts whose canvas stayed empty), data-errors,
// data-render-ms (from navigation start to the last chart drawn).
(function () {
  var errors = [];
  window.addEventListener("error", function (e) { errors.push(String(e.message)); });
  window.addEventListener("unhandledrejection", function (e) { errors.push(String(e.reason)); });
  var colors = ["#2f6fdb", "#e4572e", "#17a05d", "#a05195", "#f0a202", "#12a4b6", "#7a5c3e", "#d45087", "#5a6270", "#8fb339"];
  var css = getComputedStyle(document.documentElement);
  var fg = css.getPropertyValue("--muted").trim(), grid = css.getPropertyValue("--grid").trim();
  // 1/(1-q) as a percentile, to as many decimals as its decade needs (10 → 90%, 1e5 →
  // 99.999%): no trailing zeros to widen the last label past the chart's edge.
  function pct(v) { return v <= 1 ? "0%" : (100 * (1 - 1 / v)).toFixed(Math.max(0, Math.round(Math.log10(v)) - 2)) + "%"; }
  function draw(c, into) {
    var x = c.x === "percentile"
      ? { stroke: fg, grid: { stroke: grid }, label: c.x_label, splits: function () { return [1, 10, 100, 1e3, 1e4, 1e5]; },
          values: function (u, s) { return s.map(pct); } }
      : { stroke: fg, grid: { stroke: grid }, label: c.x_label };
    var opts = {
      width: Math.max(320, into.clientWidth), height: 260,
      // Room on the right for the last percentile label, which sits on the edge.
      padding: [null, c.x === "percentile" ? 32 : null, null, null],
      scales: { x: { time: false, distr: c.x === "percentile" ? 3 : 1 }, y: { distr: c.log_y ? 3 : 1 } },
      series: [{ label: c.x_label, value: c.x === "percentile" ? function (u, v) { return v == null ? "–" : pct(v); } : undefined }]
        .concat(c.series.map(function (s, i) { return { label: s, stroke: colors[i % colors.length], width: 1.5, spanGaps: true }; })),
      axes: [x, { stroke: fg, grid: { stroke: grid }, label: c.unit, size: 60 }],
    };
    opts.hooks = { draw: [function (u) { if (!u._marked) { u._marked = true; done(u); } }] };
    // Spans kept out of the figures (a profile's settles), shaded under the lines.
    if (c.shaded) opts.hooks.drawClear = [function (u) {
      var ctx = u.ctx, top = u.bbox.top, h = u.bbox.height;
      ctx.save(); ctx.fillStyle = "rgba(128, 128, 128, 0.18)";
      c.shaded.forEach(function (s) {
        var a = u.valToPos(s[0], "x", true), b = u.valToPos(s[1], "x", true);
        var l = Math.max(u.bbox.left, a), r = Math.min(u.bbox.left + u.bbox.width, b);
        if (r > l) ctx.fillRect(l, top, r - l, h);
      });
      ctx.restore();
    }];
    var data = c.data;
    // Stacked (the server's CPU by process): each line drawn on the sum of those before
    // it, filled down to it; the legend shows each line's own value.
    if (c.stacked) {
      var sum = c.data[0].map(function () { return 0; });
      data = [c.data[0]].concat(c.data.slice(1).map(function (col) {
        sum = sum.map(function (a, j) { return a + (col[j] || 0); });
        return sum.map(function (a, j) { return col[j] == null ? null : a; });
      }));
      opts.bands = [];
      for (var b = 2; b < data.length; b++) opts.bands.push({ series: [b, b - 1] });
      opts.series.forEach(function (s, i) {
        if (i === 0) return;
        s.fill = colors[(i - 1) % colors.length] + "99";
        s.value = function (u, v, si, di) { var o = c.data[si][di]; return o == null ? "–" : o.toFixed(1); };
      });
      opts.scales.y.range = function (u, min, max) { return [0, max > 0 ? max * 1.05 : 1]; };
    }
    return new uPlot(opts, data, into);
  }
  function painted(canvas) {
    var ctx = canvas.getContext("2d"), d = ctx.getImageData(0, 0, canvas.width, canvas.height).data, n = 0;
    for (var i = 3; i < d.length; i += 64) if (d[i] !== 0) n++;
    return n;
  }
  var charts = [], drawn = 0, blank = 0;
  function mark(status) {
    document.body.dataset.charts = drawn;
    document.body.dataset.blank = blank;
    document.body.dataset.errors = errors.join(" | ");
    document.body.dataset.renderMs = Math.round(performance.now());
    document.body.dataset.reportStatus = errors.length ? "error" : status;
  }
  // Called once per chart after its first draw; the page is done when every chart is.
  function done(u) {
    drawn++;
    if (painted(u.ctx.canvas) === 0) blank++;
    if (drawn === charts.length) mark("ok");
  }
  try {
    charts = JSON.parse(document.getElementById("report-data").textContent);
    var host = document.getElementById("charts");
    charts.forEach(function (c) {
      var box = document.createElement("div"); box.className = "chart"; box.id = "chart-" + c.id;
      var h = document.createElement("h3"); h.textContent = c.title; box.appendChild(h);
      host.appendChild(box);
      draw(c, box);
    });
    mark(drawn === charts.length ? "ok" : "drawing");
  } catch (e) {
    errors.push(String(e));
    mark("error");
  }
})();
