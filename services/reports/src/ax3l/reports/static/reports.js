// Ax3l reports: filter forms submit on change, and plots are drawn from their JSON blocks.
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
  document.querySelectorAll("[data-figure]").forEach(function (div) {
    var source = document.getElementById(div.dataset.figure);
    if (!source || typeof Plotly === "undefined") return;
    var figure = JSON.parse(source.textContent);
    drawn.push({ div: div, figure: figure });
    Plotly.newPlot(div, figure.data, themed(figure.layout), {
      responsive: true, displaylogo: false, modeBarButtonsToRemove: ["sendDataToCloud"]
    }).then(function () {
      div.dataset.ready = "true";
      div.dataset.theme = darkScheme && darkScheme.matches ? "dark" : "light";
    });
  });
  if (darkScheme && darkScheme.addEventListener && drawn.length) {
    darkScheme.addEventListener("change", function () {
      drawn.forEach(function (plot) {
        Plotly.react(plot.div, plot.figure.data, themed(plot.figure.layout)).then(function () {
          plot.div.dataset.theme = darkScheme.matches ? "dark" : "light";
        });
      });
    });
  }
})();
