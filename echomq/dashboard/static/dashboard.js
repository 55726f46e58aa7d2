// EchoMQ dashboard: a little plain script on server-drawn pages (no build step).
// Pages read the same without it; it adds the browser's zone, live counts over
// Server-Sent Events with a banner while the server is away, confirmations, and the
// schedule clock's draggable "now".
"use strict";
(function () {
  var body = document.body;
  body.classList.add("has-js");
  var root = body.dataset.root || "";
  var serverNow = body.dataset.serverNow ? Number(body.dataset.serverNow) : null;
  // skew = server clock - browser clock, as seen when the page arrived (latency included)
  var skew = serverNow !== null ? serverNow - Date.now() : 0;

  function pad(n, w) { n = String(n); while (n.length < (w || 2)) n = "0" + n; return n; }
  function hms(d, utc) {
    return utc
      ? pad(d.getUTCHours()) + ":" + pad(d.getUTCMinutes()) + ":" + pad(d.getUTCSeconds()) + "." + pad(d.getUTCMilliseconds(), 3)
      : pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds()) + "." + pad(d.getMilliseconds(), 3);
  }
  function duration(ms) {
    if (ms === null || ms === undefined) return "–";
    var neg = ms < 0; ms = Math.abs(ms); var out;
    if (ms < 1000) out = Math.round(ms) + " ms";
    else if (ms < 60000) out = (ms / 1000).toFixed(1) + " s";
    else if (ms < 3600000) out = Math.floor(ms / 60000) + "m " + pad(Math.floor(ms % 60000 / 1000)) + "s";
    else if (ms < 86400000) out = Math.floor(ms / 3600000) + "h " + pad(Math.floor(ms % 3600000 / 60000)) + "m";
    else out = Math.floor(ms / 86400000) + "d " + pad(Math.floor(ms % 86400000 / 3600000)) + "h";
    return (neg ? "-" : "") + out;
  }
  var zone = (Intl.DateTimeFormat().resolvedOptions().timeZone || "local");
  function localText(ms) {
    var d = new Date(ms);
    return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " + hms(d, false) + " " + zone;
  }
  function fillTimes(scope) {
    scope.querySelectorAll(".local[data-ms]").forEach(function (el) {
      el.textContent = localText(Number(el.dataset.ms));
    });
  }
  function tick() {
    var now = Date.now();
    var sc = document.getElementById("server-clock");
    if (sc && serverNow !== null) {
      sc.textContent = hms(new Date(now + skew), true) + " UTC";
      document.getElementById("browser-clock").textContent = hms(new Date(now), false) + " " + zone;
      document.getElementById("skew").textContent = (skew >= 0 ? "+" : "") + duration(skew);
    }
    document.querySelectorAll(".rel[data-ms]").forEach(function (el) {
      var d = Number(el.dataset.ms) - (now + skew);
      el.textContent = d >= 0 ? "in " + duration(d) : duration(-d) + " ago";
    });
  }
  fillTimes(document);
  tick();
  setInterval(tick, 250);

  // confirmations: a form with data-confirm asks first; the bulk form then skips the
  // server's own confirmation page (which is what a browser without script gets)
  document.querySelectorAll("form[data-confirm]").forEach(function (f) {
    f.addEventListener("submit", function (ev) {
      if (!window.confirm(f.dataset.confirm)) { ev.preventDefault(); return; }
      if (f.getAttribute("id") === "bulk") {  // not f.id: a control named "id" shadows it
        var c = document.createElement("input");
        c.type = "hidden"; c.name = "confirm"; c.value = "1"; f.appendChild(c);
      }
    });
  });

  // -- live updates ------------------------------------------------------------------
  var banner = document.getElementById("banner");
  function say(text) { if (!banner) return; banner.textContent = text; banner.hidden = !text; }
  // new dead jobs get a note of their own (the count flashes too)
  var deadSeen = {};
  function noteDead(q, n) {
    var before = deadSeen[q];
    deadSeen[q] = n;
    if (before === undefined || n <= before) return;
    var box = document.getElementById("toasts");
    if (!box) {
      box = document.createElement("div"); box.id = "toasts"; box.className = "toasts";
      box.setAttribute("role", "status"); document.body.appendChild(box);
    }
    var t = document.createElement("a");
    t.className = "toast";
    t.href = root + "/q/" + encodeURIComponent(q) + "?state=dead";
    t.textContent = (n - before) + " new dead job" + (n - before > 1 ? "s" : "") + " on " + q;
    box.appendChild(t);
    setTimeout(function () { t.remove(); }, 15000);
  }
  function apply(data) {
    var queues = data.queues || {};
    Object.keys(queues).forEach(function (q) {
      var v = queues[q];
      if (v.counts) noteDead(q, v.counts.dead);
      document.querySelectorAll("[data-q]").forEach(function (el) {
        if (el.dataset.q !== q) return;
        var k = el.dataset.k, text;
        if (k === "paused") { el.hidden = !v.paused; return; }
        if (v.counts && k in v.counts) text = String(v.counts[k]);
        else if (k === "oldest_due_age_ms" || k === "promote_lag_ms") text = duration(v[k]);
        else return;
        if (el.textContent !== text) {
          el.textContent = text;
          el.classList.remove("flash"); void el.offsetWidth; el.classList.add("flash");
        }
      });
    });
  }
  var eventsUrl = body.dataset.events;
  if (eventsUrl && window.EventSource) {
    var lost = false, source = null;
    var connect = function () {
      source = new EventSource(eventsUrl);
      source.addEventListener("open", function () {
        if (lost) say("");
        lost = false;
      });
      source.addEventListener("counts", function (ev) { say(""); apply(JSON.parse(ev.data)); });
      source.addEventListener("down", function () {
        say("The Valkey server is not answering. Counts resume when it is back.");
      });
      source.addEventListener("error", function () {
        lost = true;
        say("Lost contact with the dashboard server: reconnecting…");
        if (source.readyState === EventSource.CLOSED) { setTimeout(connect, 2000); }
      });
    };
    connect();
  }

  // -- the schedule clock ------------------------------------------------------------
  var svg = document.getElementById("clock");
  if (svg) {
    var box = svg.closest(".clockbox");
    var api = box.dataset.api;
    var start = Number(svg.dataset.start), end = Number(svg.dataset.end);
    var width = Number(svg.getAttribute("width"));
    var handle = document.getElementById("handle");
    var count = document.getElementById("release-count");
    var inflight = false, wanted = null;
    var toX = function (ms) { return 10 + (ms - start) / Math.max(1, end - start) * (width - 20); };
    var toMs = function (x) {
      x = Math.min(width - 10, Math.max(10, x));
      return Math.round(start + (x - 10) / (width - 20) * (end - start));
    };
    var bins = 150, span = Math.max(1, end - start);
    var place = function (at) {
      svg.dataset.at = String(at);
      handle.setAttribute("transform", "translate(" + toX(at).toFixed(1) + ",0)");
      svg.querySelectorAll("rect.job").forEach(function (r) {
        var i = Number(r.dataset.i);
        r.classList.toggle("due", start + (i + 1) * span / bins <= at);
      });
      wanted = at;
      count.dataset.pending = "1";
      ask();
    };
    var ask = function () {
      if (inflight || wanted === null) return;
      var at = wanted; wanted = null; inflight = true;
      fetch(api + "?at=" + at, { credentials: "same-origin" })
        .then(function (r) { if (!r.ok) throw new Error(r.status); return r.json(); })
        .then(function (d) {
          if (wanted !== null) return; // a newer position is waiting: show that one
          count.textContent = d.count.toLocaleString("en-US");
          var at2 = document.getElementById("release-at");
          at2.innerHTML = "";
          var t = document.createElement("time"); t.textContent = new Date(d.at_ms).toISOString().replace("T", " ");
          var l = document.createElement("span"); l.className = "local"; l.textContent = localText(d.at_ms);
          at2.appendChild(t); at2.appendChild(l);
          var off = d.at_ms - d.now_ms;
          document.getElementById("release-offset").textContent = (off >= 0 ? "+" : "-") + duration(Math.abs(off));
          var list = document.getElementById("release-list");
          list.innerHTML = "";
          d.first.forEach(function (j) {
            var li = document.createElement("li"), a = document.createElement("a"), c = document.createElement("code");
            a.href = root + "/q/" + encodeURIComponent(box.dataset.queue || "") + "/job/" + encodeURIComponent(j.id);
            c.textContent = j.id; a.appendChild(c); li.appendChild(a);
            li.appendChild(document.createTextNode(" " + new Date(j.run_at_ms).toISOString().replace("T", " ")));
            list.appendChild(li);
          });
          var more = d.count - d.first.length;
          document.getElementById("release-more").textContent = more > 0 ? "and " + more.toLocaleString("en-US") + " more" : "";
          count.dataset.at = String(d.at_ms);
          delete count.dataset.pending;
        })
        .catch(function () { say("Could not ask the server; retrying…"); })
        .then(function () { inflight = false; if (wanted !== null) ask(); });
    };
    var pointX = function (ev) {
      var pt = svg.createSVGPoint(); pt.x = ev.clientX; pt.y = ev.clientY;
      return pt.matrixTransform(svg.getScreenCTM().inverse()).x;
    };
    var dragging = false;
    svg.addEventListener("pointerdown", function (ev) {
      dragging = true; svg.setPointerCapture(ev.pointerId); place(toMs(pointX(ev)));
    });
    svg.addEventListener("pointermove", function (ev) { if (dragging) place(toMs(pointX(ev))); });
    svg.addEventListener("pointerup", function () { dragging = false; });
    handle.addEventListener("keydown", function (ev) {
      var step = (end - start) / 100, at = Number(svg.dataset.at);
      if (ev.key === "ArrowRight") { place(Math.round(at + step)); ev.preventDefault(); }
      if (ev.key === "ArrowLeft") { place(Math.round(at - step)); ev.preventDefault(); }
    });
  }
})();
