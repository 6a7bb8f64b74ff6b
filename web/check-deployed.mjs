// Opens a deployed QKV Lab page in headless Chromium and checks what the end-to-end test checks
// of the page it builds: lesson 1 started by its link (`?lesson=1&autotrain`) reaches step 10,
// every run's loss falls, its attention maps are distributions, and nothing is logged as an
// error. The page publishes its state as `window.qkvLab`; this reads it. The Pages and release
// workflows run it after deploying:
//
//   npm install --no-save playwright-core@1.64.1
//   node web/check-deployed.mjs URL [CHROMIUM]      (CHROMIUM: /usr/bin/google-chrome by default)
import { chromium } from "playwright-core";

const STEPS = 10;
const [url, executablePath = "/usr/bin/google-chrome"] = process.argv.slice(2);
if (!url) {
  console.error("usage: node web/check-deployed.mjs URL [CHROMIUM]");
  process.exit(2);
}
const link = new URL(`?lesson=1&autotrain`, url.endsWith("/") ? url : `${url}/`).href;

// A runner has no GPU: WebGPU over SwiftShader where the browser offers it, else the page's CPU
// fallback in Web Workers; either must train.
const browser = await chromium.launch({ executablePath, args: ["--no-sandbox", "--enable-unsafe-webgpu"] });
const failures = [];
try {
  const page = await browser.newPage();
  const errors = [];
  page.on("console", (message) => message.type() === "error" && errors.push(message.text()));
  page.on("pageerror", (error) => errors.push(`uncaught: ${error.message}`));
  const started = Date.now();
  await page.goto(link);
  await page.waitForFunction((steps) => window.qkvLab && window.qkvLab.step >= steps, STEPS, { timeout: 600_000, polling: 500 });
  const state = await page.evaluate(() => JSON.parse(JSON.stringify(window.qkvLab)));
  console.log(`${link}: step ${state.step} after ${((Date.now() - started) / 1000).toFixed(1)} s on ${state.compute ?? "?"}`);
  if (state.runs.length < 2) failures.push(`lesson 1 compares two runs, the page has ${state.runs.length}`);
  for (const run of state.runs) {
    console.log(`  ${run.name}: loss ${run.firstLoss} -> ${run.lastLoss}`);
    if (!(run.lastLoss < run.firstLoss)) failures.push(`${run.name} did not learn (${run.firstLoss} -> ${run.lastLoss})`);
  }
  if (state.attentionRowsSumToOne !== true) failures.push("the attention maps' rows are not distributions");
  failures.push(...errors.map((error) => `console: ${error}`));
} catch (error) {
  failures.push(`the page did not reach step ${STEPS}: ${error.message}`);
} finally {
  await browser.close();
}
if (failures.length > 0) {
  console.error(`${link} fails:\n  ${failures.join("\n  ")}`);
  process.exit(1);
}
console.log(`${link} trains`);
