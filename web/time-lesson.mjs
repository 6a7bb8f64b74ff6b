// How long a lesson trains in the browser, for docs/teaching.md: opens `?lesson=N&autotrain`
// (with `&compute=flex` when asked, the CPU fallback of a browser without WebGPU) in headless
// Chromium and times it from its first step until training ends. It reads `window.qkvLab`, as
// web/check-deployed.mjs does. Lessons that pause for discussion (3 and 5) stop there: this times
// the lessons that run through.
//
//   npm install --no-save playwright-core@1.64.1
//   node web/time-lesson.mjs URL N [flex|webgpu] [CHROMIUM]
import { chromium } from "playwright-core";

const [url, lesson, compute = "flex", executablePath = "/usr/bin/google-chrome"] = process.argv.slice(2);
if (!url || !lesson) {
  console.error("usage: node web/time-lesson.mjs URL N [flex|webgpu] [CHROMIUM]");
  process.exit(2);
}
const link = new URL(`?lesson=${lesson}&autotrain&compute=${compute}`, url.endsWith("/") ? url : `${url}/`).href;
const browser = await chromium.launch({ executablePath, args: ["--no-sandbox", "--enable-unsafe-webgpu"] });
try {
  const page = await browser.newPage();
  await page.goto(link);
  await page.waitForFunction(() => window.qkvLab && window.qkvLab.step >= 1, null, { timeout: 600_000, polling: 200 });
  const started = Date.now();
  // Ended: no longer playing, past the first step (a paused lesson ends here too).
  await page.waitForFunction(() => !window.qkvLab.playing && window.qkvLab.step > 1, null, { timeout: 3_600_000, polling: 500 });
  const state = await page.evaluate(() => JSON.parse(JSON.stringify(window.qkvLab)));
  const secs = (Date.now() - started) / 1000;
  console.log(`${link}: from step 1 to step ${state.step} in ${secs.toFixed(0)} s on ${state.compute}`);
  if (state.error) console.log(`  error: ${state.error}`);
} finally {
  await browser.close();
}
