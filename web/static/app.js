// Countersign inbox: live countdowns, and live regions refreshed from the
// event stream. Every page works without this script; it only keeps pages
// current without a reload.
"use strict";
(function () {
  var body = document.body;

  function left(ms) {
    if (ms <= 0) return "expired";
    var s = Math.round(ms / 1000), h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
    s = s % 60;
    var pad = function (n) { return (n < 10 ? "0" : "") + n; };
    if (h > 0) return h + "h " + pad(m) + "m " + pad(s) + "s left";
    if (m > 0) return m + "m " + pad(s) + "s left";
    return s + "s left";
  }

  // tick sets the countdowns of root (the page by default) as of now.
  function tick(root, now) {
    now = now || Date.now();
    (root || document).querySelectorAll("time[data-countdown]").forEach(function (t) {
      var at = Date.parse(t.getAttribute("datetime"));
      if (!isNaN(at)) t.textContent = left(at - now);
    });
  }
  tick();
  setInterval(function () { tick(); }, 1000);

  var stream = body.getAttribute("data-stream");
  if (!stream || !window.EventSource || !window.fetch || !window.DOMParser) return;
  var state = document.getElementById("live-state");
  var timer = null, busy = false, again = false;

  function setState(on) {
    if (!state) return;
    state.textContent = on ? "live" : "reconnecting…";
    state.className = on ? "live on" : "live";
  }

  // apply swaps every live region whose content changed, keeping focus.
  function apply(html) {
    var doc = new DOMParser().parseFromString(html, "text/html");
    if (doc.title) document.title = doc.title;
    // Count both pages down to the same instant, so that a region differs
    // only when something changed, not because a second passed: a swap
    // would drop what the approver is typing.
    var now = Date.now();
    tick(document, now);
    tick(doc, now);
    var focused = document.activeElement && document.activeElement.id;
    doc.querySelectorAll("[data-live][id]").forEach(function (fresh) {
      var cur = document.getElementById(fresh.id);
      if (cur && cur.outerHTML !== fresh.outerHTML) cur.replaceWith(document.importNode(fresh, true));
    });
    if (focused && document.activeElement === body) {
      var f = document.getElementById(focused);
      if (f) f.focus();
    }
    tick();
  }

  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    fetch(location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (r) {
        if (r.redirected && new URL(r.url).pathname === "/login") { location.assign(r.url); return ""; }
        return r.ok || r.status === 403 || r.status === 404 ? r.text() : "";
      })
      .then(function (html) { if (html) apply(html); })
      .catch(function () {})
      .then(function () {
        busy = false;
        if (again) { again = false; schedule(); }
      });
  }

  function schedule() {
    clearTimeout(timer);
    timer = setTimeout(refresh, 100);
  }

  var es = new EventSource(stream);
  es.onopen = function () {
    setState(true);
    // Catch up on what changed before the stream opened: since the page was
    // served, or while it was reconnecting.
    schedule();
  };
  es.onerror = function () { setState(false); };
  // Any change may move the list or the title's pending count: refresh.
  ["proposal.created", "proposal.decided", "proposal.settled", "proposal.expired", "proposal.superseded"]
    .forEach(function (name) { es.addEventListener(name, schedule); });
})();
