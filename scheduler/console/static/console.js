// goalfleet console: every element with data-live="<url>" is refreshed from that url once a
// second (the server renders the same fragment the page did). A fragment answered with
// `X-Live: done` (a finished run) stops its polling; a 401 sends the person to sign in.
"use strict";
(function () {
  const PERIOD_MS = 1000;
  function poll(el) {
    const url = el.dataset.live;
    let timer = null;
    async function tick() {
      try {
        const resp = await fetch(url, { credentials: "same-origin", cache: "no-store" });
        if (resp.status === 401) {
          window.location.assign("/ui/login?next=" + encodeURIComponent(window.location.pathname));
          return;
        }
        if (resp.ok) {
          el.innerHTML = await resp.text();  // server-rendered and escaped there
          if (resp.headers.get("X-Live") === "done") {
            return;
          }
        }
      } catch (err) {
        // the API restarting or the network blinking: try again next period
      }
      timer = window.setTimeout(tick, PERIOD_MS);
    }
    timer = window.setTimeout(tick, PERIOD_MS);
    return () => window.clearTimeout(timer);
  }
  document.addEventListener("DOMContentLoaded", () => {
    document.querySelectorAll("[data-live]").forEach(poll);
  });
})();
