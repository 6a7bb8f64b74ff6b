// How long a lesson trains in the browser, for docs/teaching.md: opens `?lesson=N&autotrain`
// (with `&compute=flex` when asked, the CPU fallback of a browser without WebGPU) in headless
// Chromium and times it from its first step until training ends. It reads `window.qkvLab`, as
// web/check-deployed.mjs does. Where a lesson pauses for discussion it presses Space at once; it
// does not press Eliminate W_Q, so lesson 5's time leaves out the copy.
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
  let state;
  for (;;) {
    // Stopped: ended, or paused for discussion (its notice starts "Paused").
    await page.waitForFunction(() => !window.qkvLab.playing && window.qkvLab.step > 1, null, { timeout: 3_600_000, polling: 200 });
    state = await page.evaluate(() => JSON.parse(JSON.stringify(window.qkvLab)));
    if (!(state.notice ?? "").startsWith("Paused")) break;
    console.log(`  paused at step ${state.step} after ${((Date.now() - started) / 1000).toFixed(0)} s; Space`);
    await page.locator("canvas").first().click({ position: { x: 5, y: 5 } });
    await page.keyboard.press("Space");
    await page.waitForFunction(() => window.qkvLab.playing, null, { timeout: 60_000, polling: 100 });
  }
  const secs = (Date.now() - started) / 1000;
  console.log(`${link}: from step 1 to step ${state.step} in ${secs.toFixed(0)} s on ${state.compute}`);
  if (state.error) console.log(`  error: ${state.error}`);
} finally {
  await browser.close();
}
