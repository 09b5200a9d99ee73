/* Rackpilot page glue, loaded by base.html. The Content-Security-Policy allows no inline script and
   no inline event handler (portal/security.py): what templates once did in onclick/onchange or in an
   inline <script> is declared with data- attributes and handled here, by delegation on the document,
   so it keeps working on content that htmx swaps in. */
(function () {
  "use strict";

  // <select data-autosubmit>: submit its form on change (the language switcher).
  document.addEventListener("change", function (e) {
    var t = e.target;
    if (t && t.matches && t.matches("select[data-autosubmit]") && t.form) t.form.submit();
  });

  // <details class="menu"> in the top bar: one open at a time; a click elsewhere or Escape closes
  // it (Escape hands the focus back to its summary).
  document.addEventListener("click", function (e) {
    document.querySelectorAll("details.menu[open]").forEach(function (menu) {
      if (!menu.contains(e.target)) menu.removeAttribute("open");
    });
  });
  document.addEventListener("keydown", function (e) {
    if (e.key !== "Escape") return;
    document.querySelectorAll("details.menu[open]").forEach(function (menu) {
      var inside = menu.contains(document.activeElement);
      menu.removeAttribute("open");
      if (inside) menu.querySelector("summary").focus();
    });
  });

  // <input type="checkbox" data-select-all="CSS selector">: (un)check every box it names.
  document.addEventListener("click", function (e) {
    var t = e.target;
    if (!t || !t.matches) return;
    if (t.matches("input[type=checkbox][data-select-all]")) {
      document.querySelectorAll(t.dataset.selectAll).forEach(function (c) { c.checked = t.checked; });
    }
    if (t.matches("[data-print]")) { e.preventDefault(); window.print(); }
  });

  // <form data-validate-on-change="URL">: re-check the whole request on the server when a field
  // changes (the job submit form), swapping the form with the answer; data-validate-skip lists the
  // field names that do not trigger it (the long script and environment fields).
  document.addEventListener("change", function (e) {
    var t = e.target;
    var form = t && t.closest ? t.closest("form[data-validate-on-change]") : null;
    if (!form || !window.htmx) return;
    var skip = (form.dataset.validateSkip || "").split(/\s+/);
    if (skip.indexOf(t.name) >= 0) return;
    window.htmx.ajax("POST", form.dataset.validateOnChange, {
      source: form, target: "#" + form.id, swap: "outerHTML", values: {_validate: "1"}
    });
  });
})();

/* Rackpilot's one htmx error path (every page loads this file; no page handles errors itself).

   htmx swaps only 2xx responses by default, so a form that the server answers with 400 and its
   field errors would never change, and a 500 or a dropped connection would only reach the console.
   Here, once for the whole product:
   - a 4xx whose body is an HTML fragment (the form, row or message area re-rendered with its
     errors) is swapped into the request's target like a success;
   - any other 4xx (a whole error page, plain text, JSON) shows its message as a notice;
   - a 5xx, a network failure or a timeout shows a translated notice; nothing on the page is
     replaced, so what the user typed stays where it was.
   Notices live in #notices (base.html), whose data- attributes carry the translated texts. */
(function () {
  "use strict";

  var TRANSPORT = "transport";  // the key of the one "server failed / connection lost" notice

  function area() { return document.getElementById("notices"); }
  function text(name, fallback) {
    var a = area();
    return (a && a.dataset[name]) || fallback;
  }

  function say(message, key) {
    var a = area();
    if (!a) { window.alert(message); return; }
    if (key) clear(key);
    var box = document.createElement("div");
    box.className = "notice notice-error";
    box.setAttribute("role", "alert");
    if (key) box.dataset.key = key;
    var span = document.createElement("span");
    span.textContent = message;
    var close = document.createElement("button");
    close.type = "button";
    close.className = "small dismiss";
    close.textContent = "×";
    close.setAttribute("aria-label", text("dismiss", "Dismiss"));
    close.addEventListener("click", function () { box.remove(); });
    box.appendChild(span);
    box.appendChild(close);
    a.appendChild(box);
    while (a.children.length > 5) a.removeChild(a.firstElementChild);
  }

  function clear(key) {
    var a = area();
    if (!a) return;
    a.querySelectorAll('[data-key="' + key + '"]').forEach(function (n) { n.remove(); });
  }

  function isWholePage(body) { return /^\s*(<!doctype|<html)/i.test(body); }

  function squash(s) { return (s || "").replace(/\s+/g, " ").trim(); }

  /* The message of an error response that is not a fragment for the target. */
  function messageOf(xhr) {
    var type = xhr.getResponseHeader("Content-Type") || "";
    var body = xhr.responseText || "";
    var found = "";
    if (type.indexOf("json") >= 0) {
      try {
        var data = JSON.parse(body);
        found = data.detail || data.message || "";
        if (!found && data && typeof data === "object") {
          found = Object.keys(data).map(function (k) {
            var v = data[k];
            return k + ": " + (Array.isArray(v) ? v.join(" ") : String(v));
          }).join("; ");
        }
      } catch (err) { found = ""; }
    } else if (type.indexOf("html") >= 0) {
      var doc = new DOMParser().parseFromString(body, "text/html");
      var el = doc.querySelector("main [role=alert], main .errors, [role=alert]");
      if (el) {
        found = el.textContent;
      } else {
        var main = doc.querySelector("main") || doc.body;
        var parts = [];
        if (main) main.querySelectorAll("h1, p").forEach(function (n) { parts.push(squash(n.textContent)); });
        found = parts.join(" ") || (doc.title || "");
      }
    } else {
      found = body;
    }
    found = squash(found).slice(0, 400);
    return found || text("requestFailed", "The request was refused.") + " (" + xhr.status + ")";
  }

  // With DEBUG on, django-htmx's helper (django-htmx.js, a document listener) replaces the whole
  // page with any 400/403/404/500 response, form fragments included: the error path here is the
  // only one, in development too (the traceback stays in the server's log and the Network tab).
  document.documentElement.addEventListener("htmx:beforeOnLoad", function (e) {
    var xhr = e.detail && e.detail.xhr;
    if (xhr && xhr.status >= 400) e.stopPropagation();
  });

  document.addEventListener("htmx:beforeSwap", function (e) {
    var xhr = e.detail.xhr;
    var status = xhr.status;
    if (status < 400) return;
    e.detail.shouldSwap = false;
    if (status < 500) {
      var type = xhr.getResponseHeader("Content-Type") || "";
      var body = xhr.responseText || "";
      if (type.indexOf("text/html") >= 0 && body.trim() && !isWholePage(body)) {
        e.detail.shouldSwap = true;  // the form/row/message area with its errors
        e.detail.isError = false;
        return;
      }
      say(messageOf(xhr));
      e.detail.isError = false;  // handled: shown above (htmx would also log it as an error)
      return;
    }
    e.detail.isError = false;
    say(text("serverError", "The server failed to handle this request; nothing was changed on this page.") +
        " (" + status + ")", TRANSPORT);
  });

  document.addEventListener("htmx:afterSwap", function (e) {
    var xhr = e.detail.xhr;
    if (!xhr || xhr.status < 400) return;
    var target = e.detail.target;
    var first = target && target.querySelector && (target.querySelector("[role=alert]") || target);
    if (first && first.scrollIntoView) first.scrollIntoView({block: "nearest"});
  });

  document.addEventListener("htmx:sendError", function () {
    say(text("networkError", "The server could not be reached; nothing was sent. Check the connection and try again."),
        TRANSPORT);
  });
  document.addEventListener("htmx:timeout", function () {
    say(text("networkError", "The server could not be reached; nothing was sent. Check the connection and try again."),
        TRANSPORT);
  });
  document.addEventListener("htmx:afterRequest", function (e) {
    var xhr = e.detail.xhr;
    if (e.detail.successful && xhr && xhr.status < 400) clear(TRANSPORT);
  });
})();
