/* Rackpilot live glue: the htmx websocket extension swaps the fragments; this file only
   (1) shows the connection state, (2) stops a live element's own polling while its socket is
   open, (3) draws the node charts with uPlot: history from the series endpoint, then the points
   pushed in #node-latest-<id>. Pages work without it (they render complete). */
(function () {
  "use strict";

  function statusEl(root) { return (root || document).querySelector("#live-status"); }

  document.addEventListener("htmx:wsOpen", function (e) {
    e.target.dataset.liveOpen = "1";
    var s = statusEl(); if (s) { s.classList.add("on"); s.classList.remove("off"); }
  });
  document.addEventListener("htmx:wsClose", function (e) {
    delete e.target.dataset.liveOpen;
    var s = statusEl(); if (s) { s.classList.add("off"); s.classList.remove("on"); }
  });
  // A live element that also polls (the fallback without websockets) skips its polls while open.
  document.addEventListener("htmx:beforeRequest", function (e) {
    var elt = e.detail && e.detail.elt;
    if (!elt || !elt.closest) return;
    var live = elt.closest("[ws-connect]");
    var trigger = elt.getAttribute("hx-trigger") || "";
    if (live && live.dataset.liveOpen && trigger.indexOf("every ") === 0) e.preventDefault();
  });

  // A row pushed over the socket replaces the row on the page: the boxes the user ticked in it
  // (node operations' selection) stay ticked.
  document.addEventListener("htmx:oobBeforeSwap", function (e) {
    var target = e.detail && e.detail.target, fragment = e.detail && e.detail.fragment;
    if (!target || !fragment || !target.querySelectorAll || !fragment.querySelectorAll) return;
    var ticked = {};
    target.querySelectorAll("input[type=checkbox]:checked").forEach(function (c) {
      ticked[c.name + "=" + c.value] = 1;
    });
    fragment.querySelectorAll("input[type=checkbox]").forEach(function (c) {
      if (ticked[c.name + "=" + c.value]) { c.checked = true; c.setAttribute("checked", ""); }
    });
  });

  // -- node and card charts ----------------------------------------------------------------
  // A range picker (1 h / 6 h / 24 h / 7 d) asks the series endpoint for a step that its stored
  // resolutions serve (raw or 1 min for the short ranges, 1 h rollups for a week); a range with no
  // points shows "no data" instead of an empty chart with a meaningless axis.
  var RANGES = {"1h": [3600, 60], "6h": [21600, 300], "24h": [86400, 900], "7d": [604800, 3600]};
  var WINDOW_S = 3600;
  var charts = {};  // metric -> {plot, data, cards}

  function initCharts(root) {
    if (typeof uPlot === "undefined") return;
    var box = root.querySelector("[data-live-charts]");
    if (!box || box.dataset.ready) return;
    box.dataset.ready = "1";
    var picker = box.parentNode.querySelector("[data-chart-ranges]");
    if (picker) {
      picker.addEventListener("click", function (e) {
        var b = e.target.closest("button[data-range]");
        if (!b) return;
        picker.querySelectorAll("button").forEach(function (x) { x.setAttribute("aria-pressed", x === b ? "true" : "false"); });
        loadCharts(box, b.dataset.range);
      });
    }
    loadCharts(box, "1h");
  }

  function loadCharts(box, range) {
    var r = RANGES[range] || RANGES["1h"];
    var span = "&from=now-" + r[0] + "s&step=" + r[1];
    if (box.dataset.from) {  // a fixed window (a job's run, a timeline's range): no picker, no live points
      var from = Number(box.dataset.from), to = Number(box.dataset.to);
      r = [to - from, Math.max(10, Math.ceil((to - from) / 300))];
      span = "&from=" + from + "&to=" + to + "&step=" + r[1];
    }
    WINDOW_S = r[0];
    var cards = JSON.parse(box.dataset.cards || "[]");
    var labels = JSON.parse(box.dataset.labels || "{}");
    box.querySelectorAll("figure.chart").forEach(function (fig) {
      var metric = fig.dataset.metric;
      var url = box.dataset.seriesUrl + "?node=" + encodeURIComponent(box.dataset.node) +
        (box.dataset.card ? "&card=" + encodeURIComponent(box.dataset.card) : "") +
        "&metric=" + encodeURIComponent(metric) + span;
      // an answer other than 200 (the cluster's Prometheus source down: 502/503) shows its reason
      fetch(url, {credentials: "same-origin", headers: {"Accept": "application/json"}})
        .then(function (resp) {
          return resp.ok ? resp.json() : resp.json().then(function (b) { return {series: [], error: b.detail || ""}; },
                                                          function () { return {series: [], error: ""}; });
        })
        .then(function (body) { draw(fig, metric, labels, cards, body.series || [], body.error); })
        .catch(function () { draw(fig, metric, labels, cards, []); });
    });
  }

  function draw(fig, metric, labels, cards, series, error) {
    var byCard = {};
    series.forEach(function (s) { if (s.card != null) byCard[s.card] = s.points; });
    var times = {};
    Object.keys(byCard).forEach(function (c) { byCard[c].forEach(function (p) { times[p[0]] = 1; }); });
    var xs = Object.keys(times).map(Number).sort(function (a, b) { return a - b; });
    if (charts[metric]) { charts[metric].plot.destroy(); delete charts[metric]; }
    fig.textContent = "";
    var title = (labels[metric] || {}).title || metric, unit = (labels[metric] || {}).unit || "";
    var cap = document.createElement("figcaption");
    cap.textContent = title;
    fig.appendChild(cap);
    if (!xs.length) {
      var none = document.createElement("p");
      none.className = error ? "notice error no-data" : "muted no-data";
      if (error) none.setAttribute("role", "alert");
      none.textContent = error || labels.no_data || "No data";
      fig.appendChild(none);
      return;
    }
    var data = [xs];
    cards.forEach(function (c) {
      var pts = {}; (byCard[c.id] || []).forEach(function (p) { pts[p[0]] = p[2]; });
      data.push(xs.map(function (t) { return t in pts ? pts[t] : null; }));
    });
    var palette = ["#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];
    var opts = {
      width: Math.max(320, fig.clientWidth || 600), height: 260,
      legend: {live: true},
      series: [{label: labels.time || "Time"}].concat(cards.map(function (c, i) {
        return {label: c.label, stroke: palette[i % palette.length], spanGaps: true,
                value: function (u, v) { return v == null ? "—" : v.toFixed(1) + " " + unit; }};
      })),
      axes: [{}, {size: 60, label: unit, labelSize: 18,
                  values: function (u, vals) { return vals.map(function (v) { return v + " " + unit; }); }}],
    };
    charts[metric] = {plot: new uPlot(opts, data, fig), data: data, cards: cards};
  }

  function appendLatest(el) {
    var points;
    try { points = JSON.parse(el.dataset.points || "{}"); } catch (err) { return; }
    if (!points.ts) return;
    Object.keys(charts).forEach(function (metric) {
      var c = charts[metric], data = c.data, xs = data[0];
      if (xs.length && xs[xs.length - 1] >= points.ts) return;
      xs.push(points.ts);
      c.cards.forEach(function (card, i) {
        var v = (points.cards[card.id] || {})[metric];
        data[i + 1].push(v === undefined ? null : v);
      });
      while (xs.length && xs[0] < points.ts - WINDOW_S) { data.forEach(function (d) { d.shift(); }); }
      c.plot.setData(data);
    });
  }

  document.addEventListener("htmx:oobAfterSwap", function (e) {
    var t = e.detail && e.detail.target;
    if (t && t.id && t.id.indexOf("node-latest-") === 0) appendLatest(t);
  });
  document.addEventListener("DOMContentLoaded", function () { initCharts(document); });
})();
