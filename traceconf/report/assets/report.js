// traceconf HTML report: sorting and the kernel filter. The page is complete without this script.
(function () {
  "use strict";
  document.documentElement.classList.add("js");

  function cellValue(row, index) {
    var cell = row.cells[index];
    if (!cell) { return ""; }
    var v = cell.getAttribute("data-v");
    if (v !== null && v !== "" && !isNaN(Number(v))) { return Number(v); }
    return cell.textContent.trim().toLowerCase();
  }

  function sortBy(table, header) {
    var index = header.cellIndex;
    var descending = header.getAttribute("aria-sort") !== "descending";
    Array.prototype.forEach.call(table.tHead.rows[table.tHead.rows.length - 1].cells, function (th) {
      th.removeAttribute("aria-sort");
    });
    header.setAttribute("aria-sort", descending ? "descending" : "ascending");
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = cellValue(a, index), y = cellValue(b, index);
      var order = (typeof x === "number" && typeof y === "number") ? x - y : String(x).localeCompare(String(y));
      if (order === 0) { order = Number(a.getAttribute("data-rank")) - Number(b.getAttribute("data-rank")); return order; }
      return descending ? -order : order;
    });
    rows.forEach(function (row) { body.appendChild(row); });
  }

  Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), function (table) {
    if (!table.tHead) { return; }
    var headers = table.tHead.rows[table.tHead.rows.length - 1].cells;
    Array.prototype.forEach.call(headers, function (th) {
      th.setAttribute("title", "sort by " + th.textContent.trim());
      th.addEventListener("click", function () { sortBy(table, th); });
    });
  });

  var filter = document.getElementById("kernel-filter");
  if (filter) {
    filter.hidden = false;
    var select = filter.querySelector("select");
    select.addEventListener("change", function () {
      var wanted = select.value;
      Array.prototype.forEach.call(document.querySelectorAll("[data-kernel]"), function (el) {
        el.classList.toggle("hidden-by-filter", wanted !== "" && el.getAttribute("data-kernel") !== wanted);
      });
    });
  }
})();
