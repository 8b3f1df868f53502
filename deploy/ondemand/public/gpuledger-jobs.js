// gpuledger-jobs.js: the "My last GPU jobs" widget of the Open OnDemand dashboard.
//
// Fills every element with a data-gpuledger-jobs attribute with a table of the signed-in
// user's last jobs from gpuledger's HTTP API (GET <data-url>, default /gpuledger/api/v1/jobs),
// read through the OnDemand server's own reverse proxy: the browser sends its OnDemand
// session, Apache authenticates it and passes the user to the API in a trusted header
// (apache/gpuledger-api.conf), so no token reaches the browser. Every value from the API is
// escaped before it is shown. Under node (the tests) it exports its functions instead.
(function (root) {
  "use strict";

  function escapeHtml(value) {
    return String(value === null || value === undefined ? "" : value).replace(
      /[&<>"']/g,
      function (c) {
        return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c];
      }
    );
  }

  function percent(value) {
    return value === null || value === undefined ? "–" : Math.round(value * 100) + "%";
  }

  function hours(value) {
    return value === null || value === undefined ? "–" : Number(value).toFixed(1);
  }

  function when(iso) {
    return iso ? String(iso).replace("T", " ").slice(0, 16) + " UTC" : "–";
  }

  // The rows of the table for the API's body {"user": ..., "jobs": [...]}; `link` makes each
  // job id a link to its report (the job's cluster and id are appended, URL-encoded).
  function renderJobs(body, link) {
    var jobs = (body && body.jobs) || [];
    if (jobs.length === 0) {
      return '<tr><td colspan="6">No jobs in the lake yet.</td></tr>';
    }
    return jobs
      .map(function (job) {
        var id = escapeHtml(job.job_id);
        if (link) {
          var href =
            link + encodeURIComponent(job.cluster) + "/" + encodeURIComponent(job.job_id);
          id = '<a href="' + escapeHtml(href) + '">' + id + "</a>";
        }
        return (
          "<tr><td>" + id + "</td><td>" + escapeHtml(job.job_name) + "</td><td>" +
          escapeHtml(job.state) + "</td><td>" + escapeHtml(job.gpus) + "</td><td>" +
          escapeHtml(when(job.start_ts)) + "</td><td>" + escapeHtml(hours(job.alloc_gpu_h)) +
          " GPU-h, " + escapeHtml(percent(job.busy_mean)) + " busy</td></tr>"
        );
      })
      .join("");
  }

  function load(element) {
    var url = element.getAttribute("data-url") || "/gpuledger/api/v1/jobs?limit=10";
    var body = element.querySelector("tbody");
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) {
        return response.json().then(function (data) {
          if (!response.ok) {
            throw new Error(data.error || "HTTP " + response.status);
          }
          return data;
        });
      })
      .then(function (data) {
        body.innerHTML = renderJobs(data, element.getAttribute("data-report-url"));
      })
      .catch(function (error) {
        body.innerHTML =
          '<tr><td colspan="6">gpuledger is not reachable: ' +
          escapeHtml(error.message) + "</td></tr>";
      });
  }

  var api = { escapeHtml: escapeHtml, renderJobs: renderJobs, load: load };
  if (typeof module !== "undefined" && module.exports) {
    module.exports = api;
  } else {
    root.gpuledgerJobs = api;
    document.querySelectorAll("[data-gpuledger-jobs]").forEach(load);
  }
})(this);
