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

  document.querySelectorAll("[data-figure]").forEach(function (div) {
    var source = document.getElementById(div.dataset.figure);
    if (!source || typeof Plotly === "undefined") return;
    var figure = JSON.parse(source.textContent);
    Plotly.newPlot(div, figure.data, figure.layout, {
      responsive: true, displaylogo: false, modeBarButtonsToRemove: ["sendDataToCloud"]
    }).then(function () { div.dataset.ready = "true"; });
  });
})();
