//! The browser build end to end: `trunk serve` builds and serves the page (the README's command;
//! with `QKV_WEB_RELEASE=1`, `trunk serve --release`: the deployed site's build, which
//! `web/bench.sh` measures), a localhost server of the test's own serves the same files, and
//! Debian's Chromium headless drives the page. The page trains the default demo (`?autotrain`) and
//! the test reads `window.qkvLab`, the state the app publishes, through a small reporter script
//! that the test server adds to the page and that POSTs it back once enough steps are done.
//!
//! Run 1 has WebGPU (`--enable-unsafe-webgpu`, SwiftShader without a GPU): the page must time a
//! few steps on WebGPU and on the CPU, train on the faster and say so; run 2 has none and must
//! train on the CPU fallback, in a Web Worker. Both then export the first run and must download its
//! checkpoint and metrics. Run 2 then reloads once its runs are kept in the browser's storage, in
//! the middle of the next save (its checkpoints written, not the index that names them): the
//! service worker must serve the app from its cache (the server sees no request for the wasm or its
//! glue), and the page must offer the last complete save and continue its curves. Both print their
//! start-up stages and the page's training speed (`web/bench.sh` collects them with the wasm size).
//!
//! Needs trunk, wasm-bindgen-cli, the wasm32 target and chromium (`tests/run-all.sh` installs
//! them), and for `QKV_WEB_RELEASE=1` wasm-opt (`web/bench.sh` installs it). Set
//! QKV_SKIP_WEB=1 to skip on a machine without them.

#![allow(clippy::unwrap_used, reason = "test helpers: a failed unwrap fails the test, as an assertion would")]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::Duration;

/// Training steps the page must complete before it reports: on the CPU fallback (0.1–0.3 s a
/// step here), and on the page with WebGPU, which first times SwiftShader's WebGPU (about 11 s a
/// step) and the CPU, then trains on the faster: a few steps show the loss falling (the seed is
/// fixed: it falls every time). A page asks for its count with `?e2e_steps=N`.
const STEPS: usize = 50;
const WEBGPU_STEPS: usize = 5;

/// Installed first thing in the page: records console errors and the files the page downloads,
/// then polls `window.qkvLab`. When the page has trained `STEPS` steps it exports the first run
/// (`qkvLab.exportRun(0)`, what the Export button does) and POSTs the state back once both files
/// were downloaded; or as soon as the page failed or logged an error.
const REPORTER: &str = r#"<script>
(function () {
  var errors = [];
  var original = console.error;
  console.error = function () {
    errors.push(Array.prototype.map.call(arguments, String).join(" "));
    original.apply(console, arguments);
  };
  addEventListener("error", function (e) { errors.push("uncaught: " + e.message); });
  addEventListener("unhandledrejection", function (e) { errors.push("unhandled rejection: " + e.reason); });
  // Downloads: the page makes a Blob URL and clicks a link to it; keep the Blob's size and head.
  var downloads = [], blobs = {};
  var createObjectURL = URL.createObjectURL;
  URL.createObjectURL = function (blob) { var url = createObjectURL.call(URL, blob); blobs[url] = blob; return url; };
  var click = HTMLAnchorElement.prototype.click;
  HTMLAnchorElement.prototype.click = function () {
    var blob = blobs[this.href];
    if (blob && this.download) {
      var entry = { name: this.download, size: blob.size, head: null };
      downloads.push(entry);
      blob.slice(0, 18).text().then(function (t) { entry.head = t; });
    }
    return click.call(this);
  };
  // The page killed mid-save: once armed, the next save of the kept runs writes its checkpoints
  // and then waits forever to write the index that names them, and the page is reloaded right
  // there; the reload must offer the last complete save, not the half-written one.
  var stallIndex = false, stalledStep = null, savingStep = null;
  var put = Cache.prototype.put;
  Cache.prototype.put = function (request) {
    var url = typeof request === "string" ? request : request.url;
    var step = /\/kept-runs\/step-(\d+)\//.exec(url);
    if (step) savingStep = Number(step[1]);
    if (stallIndex && /\/kept-runs\/index\.json$/.test(url)) { stalledStep = savingStep; return new Promise(function () {}); }
    return put.apply(this, arguments);
  };
  var stall = JSON.parse(sessionStorage.getItem("qkv-e2e-stall") || "null");
  var appMs = null, evaluatedMs = null, firstStepMs = null, trainedMs = null, trainedNotice = null, sent = {}, ticks = 0, adapter = null;
  // `?e2e_reload`: once trained, reload the page (when the service worker is ready); the reloaded
  // page reports after a few steps, without exporting.
  var reloadCheck = /[?&]e2e_reload/.test(location.search);
  var reloaded = sessionStorage.getItem("qkv-e2e-reloaded") === "1";
  // The reloaded page continues the runs the first load kept, from the step they were kept at.
  var target = reloaded ? Infinity : __STEPS__, continuedFrom = null;
  // Whether WebGPU could give this page an adapter at all (navigator.gpu alone does not say).
  if (navigator.gpu) navigator.gpu.requestAdapter().then(function (a) { adapter = !!a; }, function () { adapter = false; });
  else adapter = false;
  // The page's own frames while it trains: the time between animation frames, which the browser
  // can only draw when the page's thread is free (the app repaints only when something changed,
  // so its own frame-to-frame time says how often news came, not whether the page could draw).
  var frames = [], lastFrame = null;
  function onFrame(t) {
    if (lastFrame !== null && window.qkvLab && window.qkvLab.playing && window.qkvLab.step >= 1) {
      frames.push(t - lastFrame);
      if (frames.length > 1200) frames.shift();
    }
    lastFrame = t;
    requestAnimationFrame(onFrame);
  }
  requestAnimationFrame(onFrame);
  function pageFrames() {
    if (!frames.length) return null;
    var sorted = frames.slice().sort(function (a, b) { return a - b; });
    var mean = frames.reduce(function (a, b) { return a + b; }, 0) / frames.length;
    return { meanMs: mean, p95Ms: sorted[Math.floor(0.95 * (sorted.length - 1))], count: frames.length };
  }
  // What the trained page waits for before it reloads (said in its progress reports).
  var reloadWait = null, waitingForWorker = "the service worker to be ready";
  // Each final report goes once (the test takes a page's first; a later one, such as a failure
  // while the trained page waits to reload, answers the test's next wait); progress goes every
  // five seconds until the page closes, so that a test that times out says what the page awaited.
  function report(reason) {
    if (reason !== "progress") {
      if (sent[reason]) return;
      sent[reason] = true;
    }
    var controlled = !!(navigator.serviceWorker && navigator.serviceWorker.controller);
    var posted = fetch("/e2e-report", { method: "POST", body: JSON.stringify({
      reason: reason, state: window.qkvLab || null, errors: errors, webGpuAdapter: adapter, downloads: downloads,
      downloadedMs: window.qkvDownloadedMs || null, appMs: appMs,
      workerStartedMs: window.qkvWorkerStartedMs || null, workerReadyMs: window.qkvWorkerReadyMs || null, evaluatedMs: evaluatedMs,
      firstStepMs: firstStepMs, trainedMs: trainedMs, trainedNotice: trainedNotice, elapsedMs: performance.now(),
      reloaded: reloaded, serviceWorker: controlled, pageFrames: pageFrames(), continuedFrom: continuedFrom,
      reloadWait: reloadWait, stall: stall }) });
    if (reason === "trained" && reloadCheck && !reloaded) {
      // Reload once the service worker is ready and the runs are kept at the target step.
      reloadWait = waitingForWorker;
      posted.then(function () { return navigator.serviceWorker.ready; }).then(function () {
        reloadWait = "the runs to be kept at step __STEPS__ or later";
        return new Promise(function (resolve) {
          var kept = setInterval(function () {
            if (window.qkvLab && window.qkvLab.keptStep !== null && window.qkvLab.keptStep >= __STEPS__) { clearInterval(kept); resolve(); }
          }, 100);
        });
      }).then(function () {
        // Kept at step __STEPS__ or later: the next save is stalled before its index, and the
        // page reloaded in the middle of it.
        var kept = window.qkvLab.keptStep;
        stallIndex = true;
        reloadWait = "a save after step " + kept + " to reach its index";
        return new Promise(function (resolve) {
          var stalled = setInterval(function () { if (stalledStep !== null) { clearInterval(stalled); resolve(kept); } }, 50);
        });
      }).then(function (kept) {
        reloadWait = "the reload";
        sessionStorage.setItem("qkv-e2e-stall", JSON.stringify({ kept: kept, stalled: stalledStep }));
        sessionStorage.setItem("qkv-e2e-reloaded", "1");
        location.reload();
      });
    }
  }
  setInterval(function () {
    var s = window.qkvLab;
    // Start-up, in stages: the app runs (the wasm downloaded and compiled, the device made), the
    // untrained models are evaluated (on a GPU: the first kernels compiled), the first step.
    if (s && appMs === null) appMs = performance.now();
    if (s && s.runs && s.runs.length && s.runs[0].firstValLoss !== null && evaluatedMs === null) evaluatedMs = performance.now();
    if (s && s.step >= 1 && firstStepMs === null) firstStepMs = performance.now();
    if (s && s.error) report("app error");
    else if (errors.length) report("console error");
    else if (reloaded && s) {
      if (continuedFrom === null && s.keptOffer !== null) { continuedFrom = s.keptOffer; s.continueKept(); }
      // Every run three steps on (runs in separate workers keep their own pace). While the kept
      // runs load the list is empty, and an empty list's `every` is true: wait for the runs.
      else if (continuedFrom !== null && s.runs.length > 0 && s.runs.every(function (r) { return r.steps >= continuedFrom + 3; }))
        report("trained after reload");
    }
    // Not while the page times its computes: it reports on the compute it chose.
    else if (s && s.step >= target && trainedMs === null && !s.timing) {
      trainedMs = performance.now(); trainedNotice = s.notice;
      if (reloaded) report("trained after reload"); else s.exportRun(0);
    }
    else if (downloads.length >= 2 && downloads.every(function (d) { return d.head !== null; })) report("trained");
    // A service worker that failed to install leaves no registration, and `ready` never comes.
    if (reloadWait === waitingForWorker && ticks % 10 === 0)
      navigator.serviceWorker.getRegistration().then(function (r) { if (!r) report("no service worker"); });
    if (++ticks % 50 === 0) report("progress");
  }, 100);
})();
</script>"#;

fn tool(candidates: &[&str]) -> Option<String> {
    candidates
        .iter()
        .find(|name| Command::new(name).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok())
        .map(|name| name.to_string())
}

fn content_type(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()) {
        Some("html") => "text/html; charset=utf-8",
        Some("js") => "text/javascript",
        Some("wasm") => "application/wasm",
        Some("css") => "text/css",
        _ => "application/octet-stream",
    }
}

/// Serves `dist` (with the reporter in index.html) and forwards reports to `reports`.
fn serve(listener: &TcpListener, dist: &Path, reports: &Sender<String>) {
    for stream in listener.incoming().flatten() {
        let (dist, reports) = (dist.to_path_buf(), reports.clone());
        std::thread::spawn(move || {
            let _ = answer(stream, &dist, &reports);
        });
    }
}

/// Every request the test server answered, in order ("GET /path"), and "REPORT reason" where a
/// page's final report arrived: what the page fetched after a reload.
static REQUESTS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

fn answer(mut stream: TcpStream, dist: &Path, reports: &Sender<String>) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request = String::new();
    reader.read_line(&mut request)?;
    // A connection the browser opened ahead of need and closed unused.
    if request.is_empty() {
        return Ok(());
    }
    let mut length = 0;
    loop {
        let mut header = String::new();
        reader.read_line(&mut header)?;
        if header.trim().is_empty() {
            break;
        }
        if let Some(value) = header.to_ascii_lowercase().strip_prefix("content-length:") {
            length = value.trim().parse().unwrap_or(0);
        }
    }
    let mut parts = request.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or("/"));
    if method == "POST" && target == "/e2e-report" {
        let mut body = vec![0; length];
        reader.read_exact(&mut body)?;
        let body = String::from_utf8_lossy(&body).into_owned();
        if let Ok(report) = serde_json::from_str::<serde_json::Value>(&body)
            && report["reason"] != "progress"
        {
            REQUESTS.lock().unwrap().push(format!("REPORT {}", report["reason"]));
        }
        let _ = reports.send(body);
        return stream.write_all(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n");
    }
    let path = target.split(['?', '#']).next().unwrap_or("/");
    REQUESTS.lock().unwrap().push(format!("{method} {path}"));
    let steps = target
        .split(['?', '&', '#'])
        .find_map(|pair| pair.strip_prefix("e2e_steps=").and_then(|n| n.parse::<usize>().ok()))
        .unwrap_or(STEPS);
    let file = if path == "/" { dist.join("index.html") } else { dist.join(path.trim_start_matches('/')) };
    let (status, body, kind) = match std::fs::read(&file) {
        Ok(body) if file.ends_with("index.html") => {
            let html = String::from_utf8_lossy(&body).replacen(
                "<head>",
                &format!("<head>{}", REPORTER.replace("__STEPS__", &steps.to_string())),
                1,
            );
            ("200 OK", html.into_bytes(), content_type(&file))
        }
        Ok(body) => ("200 OK", body, content_type(&file)),
        Err(_) => ("404 Not Found", b"not found".to_vec(), "text/plain"),
    };
    let sent = write!(stream, "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len())
        .and_then(|()| stream.write_all(&body));
    if let Err(e) = &sent {
        eprintln!("test server: {method} {path}: the answer ({} bytes) did not go out: {e}", body.len());
    }
    sent
}

/// `encodeURIComponent`, for the setup in a link.
fn encode_uri_component(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'!' | b'~' | b'*' | b'\'' | b'(' | b')' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Where the browser profiles go: a RAM disk when the machine has one with room. Chromium refuses
/// to store files of more than a few megabytes (Cache.put fails with a "network error") when the
/// disk its profile lies on has only a few GB free, as a build machine's often has after a cold
/// build; the service worker could then not keep the 45 MB debug wasm and the reload part would
/// wait for it in vain. A RAM disk's free space is the machine's memory instead.
fn profiles_folder() -> PathBuf {
    const ROOM: u64 = 2 << 30;
    let ram_disk = Path::new("/dev/shm");
    match free_bytes(ram_disk) {
        Some(free) if free >= ROOM => ram_disk.to_path_buf(),
        _ => std::env::temp_dir(),
    }
}

/// The free space of the file system that holds `path`, as POSIX `df` reports it.
fn free_bytes(path: &Path) -> Option<u64> {
    let output = Command::new("df").arg("-Pk").arg(path).stderr(Stdio::null()).output().ok()?;
    let text = String::from_utf8_lossy(&output.stdout);
    // The second line's fourth column: the kibibytes available.
    let kib: u64 = text.lines().nth(1)?.split_whitespace().nth(3)?.parse().ok()?;
    Some(kib * 1024)
}

/// Chromium, killed when dropped.
struct Browser(Child, PathBuf);

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        let _ = std::fs::remove_dir_all(&self.1);
        let log = self.1.with_extension("log");
        if std::thread::panicking() || std::env::var_os("QKV_WEB_LOG").is_some() {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(60).collect();
            eprintln!("chromium log ({}):\n{}", log.display(), tail.into_iter().rev().collect::<Vec<_>>().join("\n"));
        }
        let _ = std::fs::remove_file(&log);
    }
}

fn open(chromium: &str, url: &str, webgpu: bool, profile: &Path) -> Browser {
    let mut command = Command::new(chromium);
    command.args(["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--no-first-run", "--enable-unsafe-swiftshader"]);
    // The machine's network is closed: no background connections to fail at.
    command.args(["--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-quic"]);
    // A headless page counts as hidden: without these its timers and GPU callbacks are throttled.
    command.args(["--disable-background-timer-throttling", "--disable-renderer-backgrounding", "--disable-backgrounding-occluded-windows"]);
    command.arg(format!("--user-data-dir={}", profile.display()));
    if webgpu {
        command.args(["--enable-unsafe-webgpu", "--enable-features=Vulkan"]);
    } else {
        command.arg("--disable-features=WebGPU,Vulkan");
    }
    // Chromium's own log (console messages included) goes next to the profile, for failures.
    command.args(["--enable-logging=stderr", "--v=0"]);
    let log = std::fs::File::create(profile.with_extension("log")).expect("a log file");
    let child = command.arg(url).stdout(Stdio::null()).stderr(log).spawn().expect("chromium starts");
    Browser(child, profile.to_path_buf())
}

struct Report {
    json: serde_json::Value,
    raw: String,
}

/// The page's final report; it sends its progress every five seconds until then.
fn wait_for_report(reports: &Receiver<String>, timeout: Duration) -> Report {
    let deadline = std::time::Instant::now() + timeout;
    let mut last = String::from("nothing");
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let Ok(raw) = reports.recv_timeout(left) else {
            panic!("the page did not finish within {timeout:?}; its last progress report: {last}")
        };
        let json: serde_json::Value = serde_json::from_str(&raw).expect("the report is JSON");
        if json["reason"] != "progress" {
            return Report { json, raw };
        }
        last = raw;
    }
}

/// What both runs must show: trained `steps` steps, every run's loss fell, attention maps came,
/// and the console stayed clean.
fn assert_trained(report: &Report, label: &str, steps: usize) {
    let (json, raw) = (&report.json, &report.raw);
    assert_eq!(json["reason"], "trained", "{label}: the page stopped early: {raw}");
    assert!(json["errors"].as_array().is_some_and(|e| e.is_empty()), "{label}: console errors: {raw}");
    let state = &json["state"];
    assert!(state["step"].as_u64().unwrap_or(0) >= steps as u64, "{label}: {raw}");
    let runs = state["runs"].as_array().expect("runs");
    assert!(runs.len() >= 2, "{label}: the default demo compares at least two runs: {raw}");
    for run in runs {
        let (first, last) = (run["firstLoss"].as_f64().unwrap(), run["lastLoss"].as_f64().unwrap());
        assert!(last < first, "{label}: {} did not learn ({first} -> {last}): {raw}", run["name"]);
    }
    assert!(state["attentionMaps"].as_u64().unwrap_or(0) > 0, "{label}: no attention maps: {raw}");
    assert_eq!(state["attentionRowsSumToOne"], true, "{label}: attention rows are not distributions: {raw}");
    // Export downloaded the first run's checkpoint and metrics.
    let first = runs[0]["name"].as_str().unwrap_or_default();
    let downloaded = |name: String| json["downloads"].as_array().and_then(|d| d.iter().find(|f| f["name"] == name.as_str()).cloned());
    let checkpoint = downloaded(format!("{first}.qkv")).unwrap_or_else(|| panic!("{label}: no checkpoint downloaded: {raw}"));
    assert_eq!(checkpoint["head"], "QKV-LAB CHECKPOINT", "{label}: the download is not a checkpoint: {raw}");
    assert!(checkpoint["size"].as_u64().unwrap_or(0) > 10_000, "{label}: the checkpoint is too small to hold the weights: {raw}");
    let metrics = downloaded(format!("{first}-metrics.csv")).unwrap_or_else(|| panic!("{label}: no metrics downloaded: {raw}"));
    assert!(metrics["head"].as_str().is_some_and(|h| h.starts_with("run,")), "{label}: the metrics are not CSV: {raw}");
    let number = |value: &serde_json::Value| value.as_f64().unwrap_or(f64::NAN);
    let tokens_per_sec: Vec<String> = runs.iter().map(|run| format!("{:.0}", number(&run["tokensPerSec"]))).collect();
    eprintln!(
        "web e2e {label} start-up: wasm downloaded {:.0} ms, app running {:.0} ms, training worker started {:.0} ms and ready {:.0} ms, \
         untrained models evaluated {:.0} ms, first step {:.0} ms",
        number(&json["downloadedMs"]),
        number(&json["appMs"]),
        number(&json["workerStartedMs"]),
        number(&json["workerReadyMs"]),
        number(&json["evaluatedMs"]),
        number(&json["firstStepMs"]),
    );
    eprintln!(
        "web e2e {label}: compute {} (trained on {}), {steps} steps; page load to first training step {:.0} ms; to step {steps} {:.0} ms; \
         checkpoint export {:.0} ms ({} bytes); tokens/s {}; page frame {:.1} ms (95th percentile {:.1} ms) while training, \
         the app repainting every {:.1} ms, each repaint taking {:.1} ms of the page's thread; {} loss at step {steps} {:.6}",
        state["compute"],
        state["backend"],
        number(&json["firstStepMs"]),
        number(&json["trainedMs"]),
        number(&json["elapsedMs"]) - number(&json["trainedMs"]),
        checkpoint["size"],
        tokens_per_sec.join(" / "),
        number(&json["pageFrames"]["meanMs"]),
        number(&json["pageFrames"]["p95Ms"]),
        number(&state["frameMs"]),
        number(&state["repaintCpuMs"]),
        first,
        number(&runs[0]["earlyLosses"][steps - 1]),
    );
}

/// A plain HTTP/1.1 GET on localhost: the status line, the headers (lower-cased) and the body.
fn get(port: u16, path: &str) -> std::io::Result<(String, String, Vec<u8>)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n")?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response)?;
    let split = response.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or(response.len());
    let head = String::from_utf8_lossy(&response[..split]).to_string();
    let (status, headers) = head.split_once("\r\n").unwrap_or((&head, ""));
    Ok((status.to_string(), headers.to_ascii_lowercase(), response[(split + 4).min(response.len())..].to_vec()))
}

/// `trunk serve`, killed when dropped.
struct TrunkServe(Child);

impl Drop for TrunkServe {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What the README tells a newcomer to run: `trunk serve` builds the page and serves it, the
/// wasm included; the folder it serves from is the page the rest of the test opens: one build
/// for both. `release` builds the site `trunk build --release` deploys (the `web` profile's
/// whole-program LTO, then wasm-opt): slower to build, so CI tests the README's command and
/// `web/bench.sh` the deployed build.
fn trunk_serve(release: bool) -> (TrunkServe, PathBuf) {
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let dist = Path::new(env!("CARGO_TARGET_TMPDIR")).join("web-serve-dist");
    let log = Path::new(env!("CARGO_TARGET_TMPDIR")).join("trunk-serve.log");
    let mut args = vec!["serve"];
    if release {
        args.push("--release");
    }
    let child = Command::new("trunk")
        .args(args)
        .args(["--offline", "--no-autoreload", "--port", &port.to_string(), "--dist"])
        .arg(&dist)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("a log file"))
        .spawn()
        .expect("trunk serve starts");
    let mut serving = TrunkServe(child);
    // A cold release build of the page (whole-program LTO, then wasm-opt) took 12 minutes on this
    // project's 2-core reference machine when it had the machine to itself; CI's builds run beside
    // other work.
    let deadline = std::time::Instant::now() + Duration::from_secs(3600);
    let log_text = || std::fs::read_to_string(&log).unwrap_or_default();
    let page = loop {
        match get(port, "/") {
            Ok((status, _, body)) if status.contains(" 200") => break String::from_utf8_lossy(&body).to_string(),
            _ if std::time::Instant::now() > deadline => panic!("trunk serve did not serve the page within an hour:\n{}", log_text()),
            _ => {
                if let Ok(Some(status)) = serving.0.try_wait() {
                    panic!("trunk serve stopped ({status}) before serving the page:\n{}", log_text());
                }
                std::thread::sleep(Duration::from_secs(2))
            }
        }
    };
    assert!(page.contains("qkv_canvas"), "trunk serve's page has no app canvas:\n{page}");
    let wasm = page
        .split(['"', '\''])
        .find(|part| part.ends_with("_bg.wasm"))
        .unwrap_or_else(|| panic!("trunk serve's page names no wasm file:\n{page}"))
        .to_string();
    let (status, headers, body) = get(port, &format!("/{}", wasm.trim_start_matches('/'))).expect("the wasm is served");
    assert!(status.contains(" 200"), "{wasm}: {status}");
    assert!(headers.contains("content-type: application/wasm"), "{wasm} is not served as wasm: {headers}");
    assert!(body.starts_with(b"\0asm"), "{wasm} is not WebAssembly");
    eprintln!("trunk serve: http://127.0.0.1:{port}/ serves the page and {wasm} ({} bytes)", body.len());
    (serving, dist)
}

#[test]
fn the_browser_build_trains_on_webgpu_and_falls_back_to_the_cpu() {
    if std::env::var_os("QKV_SKIP_WEB").is_some() {
        eprintln!("skipped: QKV_SKIP_WEB is set");
        return;
    }
    assert!(tool(&["trunk"]).is_some(), "needs trunk: cargo install --locked trunk@0.21.14 (or set QKV_SKIP_WEB=1)");
    let chromium = tool(&["chromium", "chromium-browser"]).expect("needs Chromium: apt-get install chromium (or set QKV_SKIP_WEB=1)");
    let release = std::env::var_os("QKV_WEB_RELEASE").is_some();
    assert!(
        !release || tool(&["wasm-opt"]).is_some(),
        "QKV_WEB_RELEASE needs binaryen's wasm-opt: cargo install --locked wasm-opt@0.116.1"
    );
    let (_trunk_serve, dist) = trunk_serve(release);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (sender, reports) = channel();
    std::thread::spawn(move || serve(&listener, &dist, &sender));
    let profiles = profiles_folder();
    let profile = |name: &str| profiles.join(format!("qkv-web-e2e-{}-{name}", std::process::id()));
    let timeout = Duration::from_secs(std::env::var("QKV_WEB_TIMEOUT").ok().and_then(|t| t.parse().ok()).unwrap_or(1200));

    // QKV_WEB_RUNS=webgpu or cpu runs one part only, when working on it.
    let runs = std::env::var("QKV_WEB_RUNS").unwrap_or_default();
    if runs.is_empty() || runs == "webgpu" {
        // Headless Chromium without a GPU computes on WebGPU (SwiftShader) but cannot present a
        // WebGPU canvas, so this run draws with WebGL and trains on a WebGPU device of its own.
        let gpu =
            open(&chromium, &format!("http://127.0.0.1:{port}/?autotrain&render=webgl&e2e_steps={WEBGPU_STEPS}"), true, &profile("webgpu"));
        let report = wait_for_report(&reports, timeout);
        drop(gpu);
        assert_trained(&report, "WebGPU", WEBGPU_STEPS);
        assert_chose_by_timing(&report);
        assert!(report.json["state"]["link"].as_str().is_some_and(|l| l.contains("#setup=")), "no shareable link: {}", report.raw);
    }
    if runs == "webgpu" {
        return;
    }

    // The second page opens a shared link: ViTs on the embedded digits (the first page trained
    // the default demo's GPTs), the first run renamed.
    let vision_setup = r#"{"plan":{"preset":"vision-digits","data":{"Images":"digits"},"training":{"warmup_steps":10},
        "runs":[{"variant":"standard"},{"variant":"wq-identity"}]}}"#;
    let mut setup: serde_json::Value = serde_json::from_str(vision_setup).unwrap();
    setup["plan"]["runs"][0]["name"] = "from-the-link".into();
    // Once trained, the page reloads: the second load must come from the service worker's cache.
    // QKV_WEB_IN_PAGE=1 trains on the page's own thread (`?worker=0`), for web/bench.sh's comparison.
    let in_page = std::env::var_os("QKV_WEB_IN_PAGE").is_some();
    // Two workers, a run each, so that the fan-out of the runs over workers is tried on any
    // machine; QKV_WEB_WORKERS=auto leaves the count to the page (one per core but one), as
    // web/bench.sh does.
    let workers = std::env::var("QKV_WEB_WORKERS").unwrap_or_else(|_| "2".into());
    let query = match (in_page, workers.as_str()) {
        (true, _) => "autotrain&e2e_reload&worker=0".to_string(),
        (false, "auto") => "autotrain&e2e_reload".to_string(),
        (false, count) => format!("autotrain&e2e_reload&workers={count}"),
    };
    let link = format!("http://127.0.0.1:{port}/?{query}#setup={}", encode_uri_component(&setup.to_string()));
    let cpu = open(&chromium, &link, false, &profile("cpu"));
    let report = wait_for_report(&reports, timeout);
    let after_reload = wait_for_report(&reports, timeout);
    drop(cpu);
    assert_eq!(report.json["webGpuAdapter"], false, "WebGPU was not switched off: {}", report.raw);
    assert_trained(&report, if in_page { "CPU fallback in the page" } else { "CPU fallback" }, STEPS);
    assert!(report.json["state"]["compute"].as_str().unwrap_or("").starts_with("flex"), "{}", report.raw);
    // Off the page's thread, so that the page draws while a step computes.
    let in_worker = report.json["state"]["backend"].as_str().unwrap_or("").contains("Web Worker");
    assert_eq!(in_worker, !in_page, "trained in a worker: {in_worker}, asked for one: {}: {}", !in_page, report.raw);
    assert_eq!(report.json["state"]["runs"][0]["name"], "from-the-link", "the link's setup was not applied: {}", report.raw);
    // The notice as it stood before the export's own notice replaced it.
    let notice = report.json["trainedNotice"].as_str().unwrap_or("");
    assert!(notice.contains("no WebGPU"), "the fallback is not announced: {}", report.raw);
    assert_served_from_cache(&after_reload);
}

/// The page timed WebGPU and the CPU, trains on the faster and says so.
fn assert_chose_by_timing(report: &Report) {
    let (state, raw) = (&report.json["state"], &report.raw);
    let choice = &state["computeChoice"];
    assert_eq!(choice["by"], "Timing", "the page did not time its computes: {raw}");
    let timed = choice["timed"].as_array().map(Vec::as_slice).unwrap_or_default();
    // Each compute as the page saves it: its backend and adapter (qkv-compute's ComputeId).
    let backend = |t: &serde_json::Value| t["compute"]["backend"].as_str().unwrap_or_default().to_string();
    let secs = |t: &serde_json::Value| t["secs_per_step"].as_f64();
    assert!(timed.len() == 2 && backend(&timed[0]) == "wgpu" && backend(&timed[1]) == "flex", "WebGPU, then the CPU: {raw}");
    let (gpu, cpu) = (secs(&timed[0]).expect("WebGPU timed"), secs(&timed[1]).expect("the CPU timed"));
    let faster = if gpu <= cpu { &timed[0] } else { &timed[1] };
    assert_eq!(&choice["chosen"], &faster["compute"], "{raw}");
    // The page names the compute it trains on by the label made from that identity.
    let faster = state["compute"].as_str().unwrap_or_default().to_string();
    let chosen = choice["chosen"]["backend"].as_str().unwrap_or("?");
    assert!(faster.starts_with(chosen), "the page trains on another compute than it chose: {raw}");
    let notice = report.json["trainedNotice"].as_str().unwrap_or("");
    assert!(notice.starts_with(&format!("Training on {faster}, the fastest here")), "the choice is not shown: {raw}");
    eprintln!("web e2e compute choice: WebGPU {gpu:.3} s a step, the CPU {cpu:.3} s a step: \"{notice}\"");
}

/// The reloaded page continued the runs the first load kept, under the service worker, without
/// fetching the app again.
fn assert_served_from_cache(report: &Report) {
    let (json, raw) = (&report.json, &report.raw);
    assert_ne!(
        json["reason"], "no service worker",
        "the service worker did not install, so the page cannot reload from its cache (is the disk of the browser's \
         profile nearly full? see the chromium log): {raw}"
    );
    assert_eq!(json["reason"], "trained after reload", "the reloaded page did not train: {raw}");
    assert!(json["errors"].as_array().is_some_and(|e| e.is_empty()), "console errors after the reload: {raw}");
    assert_eq!(json["serviceWorker"], true, "no service worker controls the reloaded page: {raw}");
    // The runs kept at step 50 or so came back and trained on: their curves keep the first load's steps.
    let from = json["continuedFrom"].as_u64().unwrap_or(0);
    assert!(from >= STEPS as u64, "the reloaded page did not offer the runs kept at step {STEPS}: {raw}");
    // The first load was closed in the middle of a later save (its checkpoints written, not yet
    // its index): the reload offers the last complete save, and loses only the steps since.
    let (kept, stalled) = (json["stall"]["kept"].as_u64(), json["stall"]["stalled"].as_u64());
    assert!(kept.zip(stalled).is_some_and(|(k, s)| s > k), "the page was not closed in the middle of a later save: {raw}");
    assert_eq!(Some(from), kept, "the reload did not offer the last complete save: {raw}");
    let runs = json["state"]["runs"].as_array().map(Vec::as_slice).unwrap_or_default();
    assert!(runs.first().is_some_and(|run| run["name"] == "from-the-link"), "the link's runs did not come back: {raw}");
    assert!(runs.iter().all(|run| run["steps"].as_u64().unwrap_or(0) >= from + 3), "the curves did not continue: {raw}");
    let requests = REQUESTS.lock().unwrap().clone();
    let since = requests.iter().rposition(|r| r.starts_with("REPORT \"trained\"")).expect("the first load's report");
    let fetched: Vec<&String> =
        requests[since..].iter().filter(|r| r.ends_with(".wasm") || (r.ends_with(".js") && !r.ends_with("/sw.js"))).collect();
    assert!(fetched.is_empty(), "the reloaded page fetched the app again: {fetched:?} (all requests since: {:?})", &requests[since..]);
    eprintln!(
        "web e2e reload: closed while saving step {}, continued the runs kept at step {from} to step {} with the app from \
         the service worker's cache; the server saw only {:?}",
        stalled.unwrap_or_default(),
        json["state"]["step"],
        requests[since + 1..].iter().filter(|r| !r.starts_with("POST")).collect::<Vec<_>>()
    );
}
