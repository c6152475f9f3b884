// Drives a web bundle's page in a real headless browser (Debian's chromium through puppeteer-core, no
// browser download): loads URL, waits for the page's model, runs window.shrinkbert.run on the texts
// of INPUTS_JSON (one pipeline call each; OPTIONS_JSON the pipeline's options, default top_k null) and
// prints the results as one JSON line.
//   node .web/web_drive.mjs URL INPUTS_JSON CHROMIUM [OPTIONS_JSON]   (copied into .web/ so puppeteer-core
//   resolves)
import puppeteer from 'puppeteer-core';
import { readFileSync } from 'node:fs';
const [url, textsFile, chromium, optionsJson] = process.argv.slice(2);
const options = JSON.parse(optionsJson ?? '{"top_k": null}');
const browser = await puppeteer.launch({ executablePath: chromium, headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
try {
  const page = await browser.newPage();
  page.on('pageerror', (e) => console.error('pageerror:', e.message));
  await page.goto(url);
  await page.waitForFunction('window.shrinkbert !== undefined', { timeout: 120000 });
  const texts = JSON.parse(readFileSync(textsFile, 'utf8'));
  const out = await page.evaluate(async (t, o) => window.shrinkbert.run(t, o), texts, options);
  console.log(JSON.stringify(out));
} finally {
  await browser.close();
}
