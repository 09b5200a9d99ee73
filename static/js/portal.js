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
