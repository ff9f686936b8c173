// Ax3l reports: filter forms submit on change, plots are drawn from their JSON blocks, and a
// page with <body data-refresh="N"> updates its [data-live] regions in place every N seconds.
(function () {
  "use strict";

  document.querySelectorAll("form[data-autosubmit]").forEach(function (form) {
    var category = form.querySelector("select[name=category]");
    var event = form.querySelector("select[name=event]");
    var parameter = form.querySelector("select[name=parameter]");

    form.addEventListener("submit", function () {
      // Unset filters stay out of the URL.
      form.querySelectorAll("select, input").forEach(function (field) {
        if (field.name && field.value === "") field.disabled = true;
      });
    });

    form.querySelectorAll("select").forEach(function (select) {
      select.addEventListener("change", function () {
        if (select === category && event) {
          // The event choices narrow to the chosen category: drop an event of another one.
          var chosen = event.options[event.selectedIndex];
          if (chosen && chosen.dataset.category && category.value &&
              chosen.dataset.category !== category.value) {
            event.value = "";
          }
        }
        // The Parameter filter belongs to prompts only.
        if (parameter && (!event || event.value !== "prompt_sent")) parameter.value = "";
        if (form.requestSubmit) form.requestSubmit(); else form.submit();
      });
    });
  });

  // Every page's refresh selector applies at once, in a form with an Apply button too (/runs).
  document.querySelectorAll("select[data-submit-on-change]").forEach(function (select) {
    var form = select.form;
    if (!form || form.hasAttribute("data-autosubmit")) return;  // submitted on change above
    select.addEventListener("change", function () {
      if (form.requestSubmit) form.requestSubmit(); else form.submit();
    });
  });
  // No GET form of a page puts its unset fields into the URL.
  document.querySelectorAll("form.filters:not([data-autosubmit])").forEach(function (form) {
    if ((form.getAttribute("method") || "get").toLowerCase() !== "get") return;
    form.addEventListener("submit", function () {
      form.querySelectorAll("select, input").forEach(function (field) {
        if (field.name && field.value === "") field.disabled = true;
      });
    });
  });

  // Runs to compare side by side (/runs): the ticked ones, kept in sessionStorage across pages
  // and refreshes in the order ticked, at most the form's data-max; Compare opens them all.
  var compareForm = document.getElementById("compare-form");
  var COMPARE_KEY = "ax3l.compare";
  function comparedRuns() {
    try {
      var kept = JSON.parse(window.sessionStorage.getItem(COMPARE_KEY) || "[]");
      return Array.isArray(kept) ? kept.filter(function (id) { return typeof id === "string"; }) : [];
    } catch (e) { return []; }
  }
  function keepCompared(ids) {
    try { window.sessionStorage.setItem(COMPARE_KEY, JSON.stringify(ids)); } catch (e) { /* private mode */ }
  }
  function showCompared(root) {
    if (!compareForm) return;
    var max = Number(compareForm.dataset.max || 8);
    var ids = comparedRuns();
    (root || document).querySelectorAll("input[data-compare]").forEach(function (box) {
      box.checked = ids.indexOf(box.value) >= 0;
    });
    document.querySelectorAll("input[data-compare]").forEach(function (box) {
      box.disabled = !box.checked && ids.length >= max;
    });
    var count = document.getElementById("compare-count");
    if (count) {
      count.textContent = ids.length ? ids.length + " of at most " + max + " runs chosen" : "tick up to " + max + " runs";
    }
    var clear = document.getElementById("compare-clear");
    if (clear) clear.hidden = !ids.length;
    var button = document.getElementById("compare-button");
    if (button) button.disabled = !ids.length;
  }
  if (compareForm) {
    document.addEventListener("change", function (event) {
      var box = event.target;
      if (!box || !box.matches || !box.matches("input[data-compare]")) return;
      var ids = comparedRuns().filter(function (id) { return id !== box.value; });
      if (box.checked) ids.push(box.value);
      keepCompared(ids.slice(0, Number(compareForm.dataset.max || 8)));
      showCompared(document);
    });
    compareForm.addEventListener("submit", function (event) {
      var ids = comparedRuns();
      if (!ids.length) return;  // the form's own ticked boxes, if any
      event.preventDefault();
      window.location.href = compareForm.action + "?" + ids.map(function (id) {
        return "run=" + encodeURIComponent(id);
      }).join("&");
    });
    var clearLink = document.getElementById("compare-clear");
    if (clearLink) {
      clearLink.addEventListener("click", function (event) {
        event.preventDefault();
        keepCompared([]);
        showCompared(document);
      });
    }
    showCompared(document);
  }

  // Copy a configuration's JSON in one click ([data-copy] names the <pre> that holds it). The
  // clipboard API needs a secure context (https or this machine); elsewhere the text is
  // selected and copied the old way.
  document.addEventListener("click", function (event) {
    var button = event.target && event.target.closest ? event.target.closest("[data-copy]") : null;
    if (!button) return;
    var source = document.getElementById(button.dataset.copy);
    var said = document.getElementById(button.dataset.copy + "-copied");
    if (!source) return;
    var text = source.textContent;
    var done = function (ok) { if (said) said.textContent = ok ? "copied" : "select the JSON and copy it"; };
    var fallback = function () {
      var details = source.closest("details");
      if (details) details.open = true;
      var range = document.createRange();
      range.selectNodeContents(source);
      var selection = window.getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
      var ok = false;
      try { ok = document.execCommand("copy"); } catch (e) { ok = false; }
      done(ok);
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(function () { done(true); }, fallback);
    } else {
      fallback();
    }
  });

  // Plots follow the system's colour scheme, as the page does, and switch with it.
  var darkScheme = window.matchMedia ? window.matchMedia("(prefers-color-scheme: dark)") : null;
  var DARK = { paper: "#0f172a", plot: "#1e293b", ink: "#e2e8f0", grid: "#334155" };

  function themed(layout) {
    if (!darkScheme || !darkScheme.matches) return layout;
    var copy = Object.assign({}, layout);
    copy.paper_bgcolor = DARK.paper;
    copy.plot_bgcolor = DARK.plot;
    copy.font = Object.assign({}, layout.font || {}, { color: DARK.ink });
    Object.keys(copy).forEach(function (key) {
      if (/^[xy]axis\d*$/.test(key)) {
        copy[key] = Object.assign({}, copy[key], { gridcolor: DARK.grid, zerolinecolor: DARK.grid });
      }
    });
    ["xaxis", "yaxis"].forEach(function (key) {
      if (!copy[key]) copy[key] = { gridcolor: DARK.grid, zerolinecolor: DARK.grid };
    });
    return copy;
  }

  var drawn = [];
  var PLOT_CONFIG = { responsive: true, displaylogo: false, modeBarButtonsToRemove: ["sendDataToCloud"] };

  // Draws the plots under root; their JSON comes from source (the page, or a fetched copy).
  function drawPlots(root, source) {
    root.querySelectorAll("[data-figure]").forEach(function (div) {
      // The JSON block came along when it is inside root; otherwise it is the source's.
      var block = root.querySelector("#" + CSS.escape(div.dataset.figure)) ||
        source.getElementById(div.dataset.figure);
      if (!block || typeof Plotly === "undefined") return;
      var figure = JSON.parse(block.textContent);
      drawn = drawn.filter(function (plot) { return plot.div.isConnected; });
      drawn.push({ div: div, figure: figure });
      Plotly.newPlot(div, figure.data, themed(figure.layout), PLOT_CONFIG).then(function () {
        div.dataset.ready = "true";
        div.dataset.theme = darkScheme && darkScheme.matches ? "dark" : "light";
      });
    });
  }
  drawPlots(document, document);
  if (darkScheme && darkScheme.addEventListener) {
    darkScheme.addEventListener("change", function () {
      drawn.forEach(function (plot) {
        Plotly.react(plot.div, plot.figure.data, themed(plot.figure.layout)).then(function () {
          plot.div.dataset.theme = darkScheme.matches ? "dark" : "light";
        });
      });
    });
  }

  // Auto-refresh in place: fetch this page's own URL, parse it (DOMParser runs no scripts) and
  // swap each [data-live] region for the fetched one of the same name. Only the server's own
  // escaped page is ever inserted; the notice is set as text. Scroll position, the focused
  // field, open details and the refresh setting stay; a hidden tab waits until it is shown.
  var period = Number(document.body.dataset.refresh || 0);
  if (period > 0 && window.fetch && window.DOMParser) {
    var timer = null;
    var busy = false;

    var showNotice = function (text) {
      var notice = document.getElementById("refresh-notice");
      if (!text) {
        if (notice) notice.hidden = true;
        return;
      }
      if (!notice) {
        notice = document.createElement("p");
        notice.id = "refresh-notice";
        notice.className = "refresh-notice";
        notice.setAttribute("role", "status");
        document.body.appendChild(notice);
      }
      notice.textContent = "not refreshed: " + text + " (" + new Date().toISOString().slice(11, 19) + " UTC)";
      notice.hidden = false;
    };

    var openDetails = function (region) {
      var open = [];
      region.querySelectorAll("details[open]").forEach(function (details) {
        var row = details.closest("[data-event-id]");
        if (row) open.push(row.dataset.eventId);
      });
      return open;
    };

    var swap = function (fresh) {
      var regions = document.querySelectorAll("[data-live]");
      var pairs = [];
      for (var i = 0; i < regions.length; i++) {
        var name = regions[i].dataset.live;
        var match = fresh.querySelector('[data-live="' + CSS.escape(name) + '"]');
        if (!match) return "the page no longer has its " + name;
        pairs.push([regions[i], match]);
      }
      var x = window.scrollX;
      var y = window.scrollY;
      var focused = document.activeElement;
      var focusedId = focused && focused.id;
      var selection = null;
      if (focused && typeof focused.selectionStart === "number") {
        try { selection = [focused.selectionStart, focused.selectionEnd]; } catch (e) { selection = null; }
      }
      pairs.forEach(function (pair) {
        var old = pair[0];
        var region = document.adoptNode(pair[1]);
        var open = openDetails(old);
        var inner = [];
        old.querySelectorAll("[id]").forEach(function (element) {
          if (element.scrollTop || element.scrollLeft) {
            inner.push([element.id, element.scrollTop, element.scrollLeft]);
          }
        });
        if (old.scrollTop || old.scrollLeft) inner.push([null, old.scrollTop, old.scrollLeft]);
        old.replaceWith(region);
        open.forEach(function (id) {
          var row = region.querySelector('[data-event-id="' + CSS.escape(id) + '"]');
          var details = row && row.querySelector("details");
          if (details) details.open = true;
        });
        inner.forEach(function (kept) {
          var element = kept[0] === null ? region : document.getElementById(kept[0]);
          if (element) { element.scrollTop = kept[1]; element.scrollLeft = kept[2]; }
        });
        drawPlots(region, fresh);
        showCompared(region);
      });
      if (focusedId && focused !== document.activeElement) {
        var again = document.getElementById(focusedId);
        if (again && again.focus) {
          again.focus({ preventScroll: true });
          if (selection && again.setSelectionRange) {
            try { again.setSelectionRange(selection[0], selection[1]); } catch (e) { /* not a text field */ }
          }
        }
      }
      window.scrollTo(x, y);
      return null;
    };

    var schedule = function () {
      clearTimeout(timer);
      timer = setTimeout(tick, period * 1000);
    };

    var tick = function () {
      timer = null;
      if (document.visibilityState === "hidden" || busy) return;  // visibilitychange resumes
      busy = true;
      fetch(window.location.href, {
        credentials: "same-origin",
        cache: "no-store",
        redirect: "error",
        headers: { Accept: "text/html" }
      }).then(function (response) {
        if (!response.ok) throw new Error("HTTP " + response.status + " " + response.statusText);
        var type = response.headers.get("Content-Type") || "";
        if (type.indexOf("text/html") !== 0) throw new Error("the answer is not a page (" + type + ")");
        return response.text();
      }).then(function (text) {
        var problem = swap(new DOMParser().parseFromString(text, "text/html"));
        showNotice(problem);
        if (!problem) document.body.dataset.refreshedAt = String(Date.now());
      }).catch(function (error) {
        // fetch rejects with a TypeError when nothing answers (server down, network gone).
        var reason = error instanceof TypeError ? "no answer from the server (" + error.message + ")"
          : error && error.message ? error.message : String(error);
        showNotice(reason);
      }).then(function () {
        busy = false;
        if (document.visibilityState !== "hidden") schedule();
      });
    };

    document.addEventListener("visibilitychange", function () {
      if (document.visibilityState === "hidden") {
        clearTimeout(timer);
        timer = null;
      } else if (!busy && timer === null) {
        schedule();
      }
    });
    schedule();
  }
})();
